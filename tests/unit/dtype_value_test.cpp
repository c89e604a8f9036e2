// SPEC 1.1-1.4: dtypes, tensors, Values and their two equalities, sample keys.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_set>
#include <vector>

#include "hpref/dtype.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/siphash.hpp"
#include "hpref/tensor.hpp"
#include "hpref/value.hpp"
#include "test_util.hpp"

using namespace hpref;
using hpref::test::bytes_of;

BOOST_AUTO_TEST_SUITE(dtype)

BOOST_AUTO_TEST_CASE(table_sizes_spec_1_3) {
  BOOST_TEST(element_size(parse_dtype("torch.float64")) == 8u);
  BOOST_TEST(element_size(parse_dtype("torch.complex128")) == 16u);
  BOOST_TEST(element_size(parse_dtype("torch.complex32")) == 4u);
  BOOST_TEST(element_size(parse_dtype("torch.bool")) == 1u);
  BOOST_TEST(element_size(parse_dtype("torch.quint4x2")) == 1u);
  BOOST_TEST(element_size(parse_dtype("torch.bits16")) == 2u);
  BOOST_TEST(element_size(parse_dtype("torch.float8_e8m0fnu")) == 1u);
  for (int i = 0; i < kDTypeCount; ++i) {
    DType d = dtype_at(i);
    BOOST_TEST(parse_dtype(dtype_wire_name(d)) == d);
  }
}

BOOST_AUTO_TEST_CASE(aliases_read_as_canonical_spec_1_3) {
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.double")) == "torch.float64");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.float")) == "torch.float32");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.half")) == "torch.float16");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.cdouble")) == "torch.complex128");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.cfloat")) == "torch.complex64");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.chalf")) == "torch.complex32");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.long")) == "torch.int64");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.int")) == "torch.int32");
  BOOST_TEST(dtype_wire_name(parse_dtype("torch.short")) == "torch.int16");
}

BOOST_AUTO_TEST_CASE(invalid_dtype_without_prefix) {
  HPREF_CHECK_ERROR(parse_dtype("float32"), Errc::invalid_dtype, "'float32'");
  HPREF_CHECK_ERROR(parse_dtype("Torch.float32"), Errc::invalid_dtype, "Torch.float32");
}

BOOST_AUTO_TEST_CASE(unsupported_dtype_not_in_table) {
  HPREF_CHECK_ERROR(parse_dtype("torch.uint1"), Errc::unsupported_dtype, "torch.uint1");
  HPREF_CHECK_ERROR(parse_dtype("torch."), Errc::unsupported_dtype, "torch.");
  HPREF_CHECK_ERROR(parse_dtype("torch.Tensor"), Errc::unsupported_dtype, "torch.Tensor");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tensor)

BOOST_AUTO_TEST_CASE(numel_is_exact_spec_2_4) {
  std::vector<std::int64_t> zero_dim = {0, std::numeric_limits<std::int64_t>::max()};
  BOOST_TEST(*checked_numel(zero_dim) == 0);
  std::vector<std::int64_t> huge = {1ll << 32, 1ll << 32};
  BOOST_TEST(!checked_numel(huge).has_value());
  std::vector<std::int64_t> scalar = {};
  BOOST_TEST(*checked_numel(scalar) == 1);
  std::vector<std::int64_t> negative = {2, -1};
  BOOST_TEST(!checked_numel(negative).has_value());
  // The orders a one-pass count can get wrong: a zero after an overflow still makes 0, a
  // negative dim refuses after an overflow or a zero.
  std::vector<std::int64_t> zero_after_overflow = {1ll << 32, 1ll << 32, 0};
  BOOST_TEST(*checked_numel(zero_after_overflow) == 0);
  std::vector<std::int64_t> negative_after_overflow = {1ll << 32, 1ll << 32, -1};
  BOOST_TEST(!checked_numel(negative_after_overflow).has_value());
  std::vector<std::int64_t> negative_after_zero = {0, -1};
  BOOST_TEST(!checked_numel(negative_after_zero).has_value());
}

BOOST_AUTO_TEST_CASE(byte_count_must_match_shape) {
  HPREF_CHECK_ERROR(Tensor::copy_of(DType::float32, {2, 3}, bytes_of("12345678")),
                    Errc::invalid_tensor, "needs 24 bytes, got 8");
  HPREF_CHECK_ERROR(Tensor::copy_of(DType::int8, {-1}, {}), Errc::invalid_tensor, "negative");
}

BOOST_AUTO_TEST_CASE(view_keeps_buffer_alive_spec_1_2) {
  Tensor t;
  {
    auto buffer = SharedBytes::copy_of(std::string_view("xABCDEFGH", 9));
    t = Tensor(DType::int32, {2}, buffer.slice(1, 8));
  }  // the only named owner is gone; the view still owns the allocation
  BOOST_TEST(std::string(reinterpret_cast<const char*>(t.bytes().data()), 8) == "ABCDEFGH");
}

BOOST_AUTO_TEST_CASE(misaligned_elements_read_by_memcpy_spec_1_2) {
  // Offset 1 is misaligned for int32; element() must still read it correctly.
  std::vector<std::uint8_t> raw = {0xff, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x80};
  auto buffer = SharedBytes::copy_of(raw);
  Tensor t(DType::int32, {2}, buffer.slice(1, 8));
  BOOST_TEST(t.element<std::int32_t>(0) == 1);
  BOOST_TEST(t.element<std::int32_t>(1) == static_cast<std::int32_t>(0x80000002u));
}

BOOST_AUTO_TEST_CASE(device_names) {
  BOOST_TEST(Device::parse("cuda:3").str() == "cuda:3");
  BOOST_TEST(Device::parse("cpu").str() == "cpu");
  HPREF_CHECK_ERROR(Device::parse("cuda:-1"), Errc::invalid_argument, "cuda:-1");
  HPREF_CHECK_ERROR(Device::parse("npu"), Errc::invalid_argument, "npu");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(value)

BOOST_AUTO_TEST_CASE(structural_equality_is_type_exact_spec_1_1) {
  BOOST_TEST(!(Value::boolean(true) == Value::integer(1)));
  BOOST_TEST(!(Value::integer(1) == Value::floating(1.0)));
  BOOST_TEST(!(Value::floating(0.0) == Value::floating(-0.0)));
  double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST(Value::floating(nan) == Value::floating(nan));
  BOOST_TEST(!(Value::bytes(std::string_view("a")) == Value::bytearray(bytes_of("a"))));
  BOOST_TEST(!(Value::tuple({}) == Value::list({})));
  BOOST_TEST(Value::list({Value::integer(1)}) == Value::list({Value::integer(1)}));
  auto t1 = Tensor::copy_of(DType::int16, {2}, bytes_of("abcd"));
  auto t2 = Tensor::copy_of(DType::uint16, {2}, bytes_of("abcd"));
  auto t3 = Tensor::copy_of(DType::int16, {1, 2}, bytes_of("abcd"));
  BOOST_TEST(Value::tensor(t1) ==
             Value::tensor(Tensor::copy_of(DType::int16, {2}, bytes_of("abcd"))));
  BOOST_TEST(!(Value::tensor(t1) == Value::tensor(t2)));
  BOOST_TEST(!(Value::tensor(t1) == Value::tensor(t3)));
}

BOOST_AUTO_TEST_CASE(mapping_order_matters_structurally) {
  Value a = Value::mapping({{Value::integer(1), Value()}, {Value::integer(2), Value()}});
  Value b = Value::mapping({{Value::integer(2), Value()}, {Value::integer(1), Value()}});
  BOOST_TEST(!(a == b));
}

BOOST_AUTO_TEST_CASE(key_equality_is_pythons_spec_1_1) {
  BOOST_TEST(key_equal(Value::boolean(true), Value::integer(1)));
  BOOST_TEST(key_equal(Value::integer(1), Value::floating(1.0)));
  BOOST_TEST(key_equal(Value::floating(0.0), Value::floating(-0.0)));
  BOOST_TEST(key_equal(Value::boolean(false), Value::floating(-0.0)));
  BOOST_TEST(!key_equal(Value::floating(std::nan("")), Value::floating(std::nan(""))));
  // 2**53 + 1 is not equal to the double nearest to it.
  BOOST_TEST(!key_equal(Value::integer((1ll << 53) + 1), Value::floating(9007199254740992.0)));
  BOOST_TEST(key_equal(Value::integer(1ll << 53), Value::floating(9007199254740992.0)));
  BOOST_TEST(!key_equal(Value::string("a"), Value::bytes(std::string_view("a"))));
  BOOST_TEST(key_equal(Value::tuple({Value::boolean(true), Value::floating(2.0)}),
                       Value::tuple({Value::integer(1), Value::integer(2)})));
  BOOST_TEST(key_hash(Value::tuple({Value::boolean(true), Value::floating(2.0)})) ==
             key_hash(Value::tuple({Value::integer(1), Value::integer(2)})));
  BOOST_TEST(!key_equal(Value::floating(9223372036854775808.0),
                        Value::integer(std::numeric_limits<std::int64_t>::min())));
}

// A key whose tuples share nodes (memo references: depth d, 2^d logical leaves) hashes one
// table lookup per shared node, not per logical node. The hash must not change with the
// sharing: equal to the hash of the same key built without sharing, and a shared node's
// hash is never taken for another node's (two different shared nodes in one key).
BOOST_AUTO_TEST_CASE(key_hash_of_shared_tuples_is_the_hash_of_the_tree_they_stand_for) {
  std::function<Value(int, const Value&)> unshared = [&](int depth, const Value& leaf) {
    if (depth == 0) return Value::tuple({leaf});
    return Value::tuple({unshared(depth - 1, leaf), unshared(depth - 1, leaf)});
  };
  auto shared = [](int depth, const Value& leaf) {
    Value t = Value::tuple({leaf});
    for (int i = 0; i < depth; ++i) t = Value::tuple({t, t});
    return t;
  };
  for (int depth : {1, 2, 5, 10}) {
    BOOST_TEST_CONTEXT("depth " << depth) {
      Value a = shared(depth, Value::string("x"));
      Value b = shared(depth, Value::integer(7));
      Value key = Value::tuple({a, b, a, Value::integer(1)});
      Value flat =
          Value::tuple({unshared(depth, Value::string("x")), unshared(depth, Value::integer(7)),
                        unshared(depth, Value::string("x")), Value::integer(1)});
      BOOST_TEST(key_equal(key, flat));
      BOOST_TEST(key_hash(key) == key_hash(flat));
      // b's node in a's place: a different key, and (but for a collision) another hash.
      Value swapped = Value::tuple({b, a, a, Value::integer(1)});
      BOOST_TEST(key_hash(swapped) != key_hash(key));
    }
  }
}

// KeySet past its linear part (16 keys) keeps each key's hash: keys that share long
// tuples are found again, told apart, and a NaN inside a shared node still equals nothing.
BOOST_AUTO_TEST_CASE(key_set_with_shared_tuple_keys) {
  Value t = Value::tuple({Value::string("x")});
  for (int i = 0; i < 12; ++i) t = Value::tuple({t, t});
  KeySet set;
  for (int i = 0; i < 200; ++i) BOOST_TEST(set.insert(Value::tuple({t, Value::integer(i)})));
  for (int i = 0; i < 200; i += 7) BOOST_TEST(!set.insert(Value::tuple({t, Value::floating(i)})));
  Value nan = Value::tuple({Value::floating(std::nan(""))});
  Value with_nan = Value::tuple({nan, nan});
  BOOST_TEST(set.insert(with_nan));
  BOOST_TEST(set.insert(with_nan));  // NaN equals nothing, itself included (SPEC 1.1)
  BOOST_TEST(set.size() == 202u);
}

// Issue 10, hash flooding: a peer chose int keys that std::hash (the identity) sends to
// one bucket of the table KeySet uses (multiples of its bucket count): duplicate
// detection went quadratic (631 KB, 89 s). key_hash is keyed per process and spreads them.
BOOST_AUTO_TEST_CASE(key_hash_spreads_keys_chosen_to_collide) {
  const std::size_t n = 50000;
  std::unordered_set<std::int64_t> probe;  // the bucket count such a table has for n keys
  for (std::size_t i = 0; i < n; ++i) probe.insert(static_cast<std::int64_t>(i));
  const std::size_t buckets = probe.bucket_count();
  std::vector<std::size_t> old_load(buckets), new_load(buckets), float_load(buckets);
  for (std::size_t i = 1; i <= n; ++i) {
    auto k = static_cast<std::int64_t>(i * buckets);
    ++old_load[std::hash<std::int64_t>()(k) % buckets];
    ++new_load[key_hash(Value::integer(k)) % buckets];
    ++float_load[key_hash(Value::tuple({Value::floating(static_cast<double>(k) + 0.5)})) % buckets];
  }
  // The keys do aim std::hash at one bucket...
  BOOST_TEST(*std::max_element(old_load.begin(), old_load.end()) == n);
  // ...and not key_hash: n keys in about n buckets, the fullest holds a handful (expected
  // about 8; over 24 has probability far below 1e-15).
  BOOST_TEST(*std::max_element(new_load.begin(), new_load.end()) <= 24u);
  BOOST_TEST(*std::max_element(float_load.begin(), float_load.end()) <= 24u);
}

// The hash under the keys above is SipHash-1-3: known answers for the key 00 01 .. 0f and
// the messages 00 01 .. (n-1) bytes long, as the reference vectors of SipHash-2-4 are laid
// out. The values come from an independent Python transcription of the SipHash paper,
// checked against the published SipHash-2-4 vectors (0x726fdb47dd0e0e31 for n = 0) and
// against SipHash-1-3 answers published elsewhere: under the zero key "" -> 0xd1fba762150c532c
// and "siphash" -> 0x8264ceeccb16bcbe, and the Linux kernel's 64-bit hsiphash (this
// function, truncated to 32 bits) whose first vector 0x050fc4dc is the low half of n = 0. Lengths
// cover an empty message, a partial word, a whole word, a word and a tail, and several words.
BOOST_AUTO_TEST_CASE(siphash13_known_answers) {
  const std::uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
  std::string msg;
  for (int i = 0; i < 64; ++i) msg.push_back(static_cast<char>(i));
  const std::pair<std::size_t, std::uint64_t> answers[] = {
      {0, 0xabac0158050fc4dcULL},  {1, 0xc9f49bf37d57ca93ULL},  {7, 0xd3927d989bb11140ULL},
      {8, 0x369095118d299a8eULL},  {9, 0x25a48eb36c063de4ULL},  {15, 0xd320d86d2a519956ULL},
      {16, 0xcc4fdd1a7d908b66ULL}, {17, 0x9cf2689063dbd80cULL}, {63, 0x9d199062b7bbb3a8ULL}};
  for (auto [n, want] : answers) {
    BOOST_TEST_CONTEXT("length " << n) {
      BOOST_TEST(siphash13(k0, k1, std::string_view(msg).substr(0, n)) == want);
    }
  }
  BOOST_TEST(siphash13(0, 0, "") == 0xd1fba762150c532cULL);
  BOOST_TEST(siphash13(0, 0, "siphash") == 0x8264ceeccb16bcbeULL);
}

BOOST_AUTO_TEST_CASE(mapping_refuses_duplicate_and_unhashable_keys) {
  HPREF_CHECK_ERROR(Value::mapping({{Value::integer(1), Value()}, {Value::boolean(true), Value()}}),
                    Errc::duplicate_key, "True");
  HPREF_CHECK_ERROR(Value::mapping({{Value::list({}), Value()}}), Errc::unhashable_key, "[]");
  // Both ways of finding one: scanned (up to kScannedKeys entries) and hashed (more), the
  // duplicate last and equal under key equality only (1.0 and 1, SPEC 1.1).
  for (std::size_t n : {std::size_t{3}, kScannedKeys, kScannedKeys + 1, 3 * kScannedKeys}) {
    std::vector<Value::Entry> entries;
    for (std::size_t i = 0; i + 1 < n; ++i)
      entries.emplace_back(Value::integer(static_cast<std::int64_t>(i)), Value());
    BOOST_TEST(Value::mapping(entries).entries().size() == n - 1);
    entries.emplace_back(Value::floating(1.0), Value());
    HPREF_CHECK_ERROR(Value::mapping(entries), Errc::duplicate_key, "1.0 appears twice");
    // str keys (MappingKeys compares their bytes), among keys of other kinds: b"k1" is no "k1"
    std::vector<Value::Entry> named;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      std::string name = "k" + std::to_string(i);
      named.emplace_back(i % 2 ? Value::string(name) : Value::bytes(bytes_of(name)), Value());
    }
    named.emplace_back(Value::string("k0"), Value());  // k0 went in as bytes
    BOOST_TEST(Value::mapping(named).entries().size() == n);
    named.back().first = Value::string("k1");
    HPREF_CHECK_ERROR(Value::mapping(named), Errc::duplicate_key, "'k1' appears twice");
  }
  HPREF_CHECK_ERROR(Value::mapping({{Value::tuple({Value::bytearray(bytes_of("x"))}), Value()}}),
                    Errc::unhashable_key, "bytearray");
}

BOOST_AUTO_TEST_CASE(strings_must_be_utf8) {
  HPREF_CHECK_ERROR(Value::string("\xed\xa0\x80"), Errc::invalid_utf8, "\\xed");      // surrogate
  HPREF_CHECK_ERROR(Value::string("\xc0\xaf"), Errc::invalid_utf8, "\\xc0");          // overlong
  HPREF_CHECK_ERROR(Value::string("\xf4\x90\x80\x80"), Errc::invalid_utf8, "\\xf4");  // > U+10FFFF
  BOOST_TEST(Value::string("\xf0\x9f\x98\x80 ok").as_str().size() == 7u);
}

BOOST_AUTO_TEST_CASE(node_count_and_depth) {
  Value leaf = Value::list({Value::integer(1), Value::integer(2)});
  Value outer = Value::tuple({leaf, leaf, Value::mapping({{Value::string("k"), leaf}})});
  BOOST_TEST(leaf.node_count() == 3u);
  BOOST_TEST(outer.node_count() == 1u + 3u + 3u + (1u + 1u + 3u));
  BOOST_TEST(outer.depth() == 3);
  BOOST_TEST(Value::integer(3).depth() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sample_key)

BOOST_AUTO_TEST_CASE(valid_keys_round_trip_spec_1_4) {
  SampleKey k = SampleKey::make(7, 2);
  BOOST_TEST(*SampleKey::from_value(k.to_value()) == k);
  SampleKey s = SampleKey::make(std::string("doc-9"), 0);
  BOOST_TEST(*SampleKey::from_value(s.to_value()) == s);
}

BOOST_AUTO_TEST_CASE(invalid_keys_refused_spec_1_4) {
  HPREF_CHECK_ERROR(SampleKey::make(-1, 0), Errc::invalid_sample_key, "-1");
  HPREF_CHECK_ERROR(SampleKey::make(1, -2), Errc::invalid_sample_key, "-2");
  HPREF_CHECK_ERROR(SampleKey::make(std::string(), 0), Errc::invalid_sample_key, "''");
  BOOST_TEST(!SampleKey::from_value(Value::tuple({Value::boolean(true), Value::integer(0)})));
  BOOST_TEST(!SampleKey::from_value(Value::tuple({Value::integer(1)})));
  BOOST_TEST(!SampleKey::from_value(Value::list({Value::integer(1), Value::integer(0)})));
}

BOOST_AUTO_TEST_SUITE_END()
