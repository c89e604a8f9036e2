// SPEC 2.3: the metadata pickle subset. One test per accepted shape, per refusal and
// per limit (each asserting the error kind and that the message names the offender),
// and the writer's golden bytes.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"
#include "test_util.hpp"

using namespace hpref;
using namespace std::literals;
using hpref::test::hex;

namespace {

Value read(std::string_view bytes, const PickleReadOptions& options = {}) {
  return read_pickle(bytes, options);
}

std::string le(std::uint64_t x, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  return out;
}

std::string short_str(std::string_view s) {
  return "\x8c"s + static_cast<char>(s.size()) + std::string(s);
}

Value str(std::string_view s) { return Value::string(s); }
Value i64(std::int64_t i) { return Value::integer(i); }

}  // namespace

BOOST_AUTO_TEST_SUITE(pickle_accepts)

BOOST_AUTO_TEST_CASE(every_accepted_opcode_spec_2_3) {
  // PROTO FRAME MARK POP POP_MARK NONE NEWTRUE NEWFALSE BININT BININT1 BININT2 LONG1
  // BINFLOAT SHORT_BINUNICODE BINUNICODE BINUNICODE8 SHORT_BINBYTES BINBYTES BINBYTES8
  // BYTEARRAY8 EMPTY_TUPLE TUPLE1-3 TUPLE EMPTY_LIST APPEND APPENDS LIST EMPTY_DICT SETITEM
  // SETITEMS DICT MEMOIZE BINPUT LONG_BINPUT BINGET LONG_BINGET STOP
  std::string p = "\x80\x04"s + "\x95" + le(0, 8);
  p += "N0";                                         // NONE POP
  p += "(N1";                                        // MARK NONE POP_MARK
  p += "]\x94";                                      // EMPTY_LIST MEMOIZE(0)
  p += "(";                                          // MARK for APPENDS
  p += "N\x88\x89";                                  // NONE NEWTRUE NEWFALSE
  p += "J" + le(static_cast<std::uint32_t>(-5), 4);  // BININT -5
  p += "K"s + '\x07' + "M" + le(256, 2);             // BININT1 7, BININT2 256
  p += "\x8a"s + '\x05' + le(1ull << 32, 5);         // LONG1 2**32
  p += "G" + le(0xf83f, 8);                          // BINFLOAT 1.5 (big-endian bytes)
  p += "(" + short_str("a") + "X" + le(1, 4) + "b" + "\x8d" + le(1, 8) + "c" + "t";
  p += "C"s + '\x01' + "x" + "B" + le(1, 4) + "y" + "\x8e" + le(1, 8) + "z" + "\x87";
  p += "\x96" + le(2, 8) + "\x00\xff"s + "\x85";              // BYTEARRAY8, TUPLE1
  p += ")";                                                   // EMPTY_TUPLE
  p += "\x86";                                                // TUPLE2 ((bytearray,), ())
  p += "(K"s + '\x01' + "K" + '\x02' + "l";                   // LIST [1, 2]
  p += "e";                                                   // APPENDS onto the memoized list
  p += "}q"s + '\x01' + short_str("k") + "K" + '\x01' + "s";  // EMPTY_DICT BINPUT(1) SETITEM
  p += "(" + short_str("m") + "K" + '\x02' + short_str("n") + "K" + '\x03' + "u";  // SETITEMS
  p += "r" + le(7, 4);                                                             // LONG_BINPUT(7)
  p += "a";                                     // APPEND the dict
  p += "(" + short_str("d") + "N" + "d" + "a";  // DICT {'d': None}, APPEND
  p += "h"s + '\x01' + "a";                     // BINGET(1): the dict again, APPEND
  p += "j" + le(7, 4) + "a";                    // LONG_BINGET(7): same dict, APPEND
  p += ".";
  Value v = read(p);
  BOOST_REQUIRE(v.is(ValueKind::list));
  auto items = v.items();
  BOOST_REQUIRE_EQUAL(items.size(), 16u);
  BOOST_TEST(items[0].is(ValueKind::none));
  BOOST_TEST(items[1].as_bool() == true);
  BOOST_TEST(items[2].as_bool() == false);
  BOOST_TEST(items[3].as_int() == -5);
  BOOST_TEST(items[4].as_int() == 7);
  BOOST_TEST(items[5].as_int() == 256);
  BOOST_TEST(items[6].as_int() == (1ll << 32));
  BOOST_TEST(items[7].as_float() == 1.5);
  BOOST_TEST((items[8] == Value::tuple({str("a"), str("b"), str("c")})));
  BOOST_TEST(
      (items[9] == Value::tuple({Value::bytes("x"sv), Value::bytes("y"sv), Value::bytes("z"sv)})));
  Value ba = Value::tuple({Value::bytearray(SharedBytes::copy_of("\x00\xff"sv))});
  BOOST_TEST((items[10] == Value::tuple({ba, Value::tuple({})})));
  BOOST_TEST((items[11] == Value::list({i64(1), i64(2)})));
  Value d = Value::mapping({{str("k"), i64(1)}, {str("m"), i64(2)}, {str("n"), i64(3)}});
  BOOST_TEST((items[12] == d));
  BOOST_TEST((items[13] == Value::mapping({{str("d"), Value()}})));
  BOOST_TEST((items[14] == d));
  BOOST_TEST((items[15] == d));
}

BOOST_AUTO_TEST_CASE(codecs_encode_bytes_at_protocol_2) {
  // CPython: pickle.dumps(b'ab\xff', 2)
  auto p =
      "\x80\x02"
      "c_codecs\nencode\nq\x00X\x04\x00\x00\x00"
      "ab\xc3\xbfq\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04."sv;
  BOOST_TEST((read(p) == Value::bytes("ab\xff"sv)));
  // pickle.dumps(b'', 2) uses __builtin__.bytes()
  BOOST_TEST((read("\x80\x02"
                   "c__builtin__\nbytes\nq\x00)Rq\x01."sv) == Value::bytes(""sv)));
}

BOOST_AUTO_TEST_CASE(bytearray_with_zero_or_one_argument) {
  // pickle.dumps(bytearray(b'a\xff'), 2) and 3, and bytearray() at 4
  auto p2 =
      "\x80\x02"
      "c__builtin__\nbytearray\nq\x00"
      "c_codecs\nencode\nq\x01X\x03\x00\x00\x00"
      "a\xc3\xbfq\x02X\x06\x00\x00\x00latin1q\x03\x86q\x04Rq\x05\x85q\x06Rq\x07."sv;
  auto p3 =
      "\x80\x03"
      "cbuiltins\nbytearray\nq\x00"
      "C\x02"
      "a\xffq\x01\x85q\x02Rq\x03."sv;
  auto p4 =
      "\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x08"
      "builtins\x94\x8c\tbytearray\x94\x93\x94)R\x94."sv;
  Value expected = Value::bytearray(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>("a\xff"), 2));
  BOOST_TEST((read(p2) == expected));
  BOOST_TEST((read(p3) == expected));
  BOOST_TEST((read(p4) == Value::bytearray(SharedBytes())));
}

BOOST_AUTO_TEST_CASE(key_class_pattern_spec_1_4) {
  // CPython protocol 2: (SampleKey(3, 0), SampleKey('x', 1)) with memo sharing.
  auto p =
      "\x80\x02"
      "chyper_parallel.distributed_data.schema\nSampleKey\nq\x00)\x81q\x01}q\x02(X\t\x00\x00\x00sample_idq\x03K\x03X\x08\x00\x00\x00positionq\x04K\x00ubh\x00)\x81q\x05}q\x06(h\x03X\x01\x00\x00\x00xq\x07h\x04K\x01ub\x86q\x08."sv;
  Value expected = Value::tuple({Value::tuple({i64(3), i64(0)}), Value::tuple({str("x"), i64(1)})});
  BOOST_TEST((read(p) == expected));
  // The same object fetched again by BINGET after BUILD is the same key.
  std::string twice(p.substr(0, p.size() - 4));  // up to and including the second BUILD
  twice += "h\x01\x87.";                         // BINGET(1) = first key object, TUPLE3
  Value v = read(twice);
  BOOST_TEST((v.items()[2] == Value::tuple({i64(3), i64(0)})));
  // With the shim off, the class is an ordinary refused global.
  PickleReadOptions off;
  off.key_class = "";
  HPREF_CHECK_ERROR(read(p, off), Errc::pickle_global, "SampleKey");
  // Another configured name.
  PickleReadOptions other;
  other.key_class = "my.pkg.Key";
  HPREF_CHECK_ERROR(read(p, other), Errc::pickle_global,
                    "hyper_parallel.distributed_data.schema.SampleKey");
}

BOOST_AUTO_TEST_CASE(fetching_a_finished_container_twice_yields_equal_copies) {
  // [[1], <memo 0>, <memo 0>]: the inner list is finished before it is fetched.
  // Outer EMPTY_LIST, MARK, inner EMPTY_LIST MEMOIZE, 1, APPEND, BINGET 0 twice, APPENDS.
  std::string p = "\x80\x05]("s +
                  "]\x94K\x01"
                  "a" +
                  "h\x00h\x00"s + "e.";
  Value v = read(p);
  BOOST_REQUIRE_EQUAL(v.items().size(), 3u);
  BOOST_TEST((v.items()[0] == v.items()[1]));
  BOOST_TEST((v.items()[1] == v.items()[2]));
  BOOST_TEST(v.node_count() == 1u + 3u * 2u);
}

// Found by the received_merge fuzzer in CI: a list that LIST built from a MARK and a dict
// that DICT built take further APPEND/APPENDS and SETITEM/SETITEMS (they are not finished
// until fetched from the memo), as CPython's reader allows.
BOOST_AUTO_TEST_CASE(lists_and_dicts_built_from_a_mark_still_grow) {
  // MARK 1 2 LIST, 3 APPEND, MARK 4 5 APPENDS.
  Value list = read(
      "\x80\x02(K\x01K\x02lK\x03"
      "a(K\x04K\x05"
      "e."sv);
  BOOST_TEST((list == Value::list({i64(1), i64(2), i64(3), i64(4), i64(5)})));
  BOOST_TEST(list.node_count() == 6u);
  // MARK 'a' 1 DICT, 'b' 2 SETITEM, MARK 'c' 3 SETITEMS.
  Value dict = read(
      "\x80\x02(X\x01\x00\x00\x00"
      "aK\x01"
      "dX\x01\x00\x00\x00"
      "bK\x02"
      "s(X\x01\x00\x00\x00"
      "cK\x03"
      "u."sv);
  BOOST_TEST((dict == Value::mapping({{Value::string("a"), i64(1)},
                                      {Value::string("b"), i64(2)},
                                      {Value::string("c"), i64(3)}})));
}

BOOST_AUTO_TEST_CASE(pop_pops_a_mark_like_cpython) {
  // MARK then POP with nothing above the mark removes the mark.
  BOOST_TEST((read("\x80\x05K\x01(0."sv) == i64(1)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pickle_refuses)

BOOST_AUTO_TEST_CASE(refused_opcodes_are_named) {
  struct Case {
    std::string bytes;
    const char* name;
  };
  std::vector<Case> cases = {
      {"\x80\x02"
       "I1\n.",
       "INT"},
      {"\x80\x02"
       "L1L\n.",
       "LONG"},
      {"\x80\x02"
       "S'a'\n.",
       "STRING"},
      {"\x80\x02"
       "T\x01\x00\x00\x00"
       "a.",
       "BINSTRING"},
      {"\x80\x02"
       "U\x01"
       "a.",
       "SHORT_BINSTRING"},
      {"\x80\x02"
       "Va\n.",
       "UNICODE"},
      {"\x80\x02"
       "F1.0\n.",
       "FLOAT"},
      {"\x80\x02N"
       "p0\n.",
       "PUT"},
      {"\x80\x02N"
       "g0\n.",
       "GET"},
      {"\x80\x02N2.", "DUP"},
      {"\x80\x02(ios\nsystem\n.", "INST"},
      {"\x80\x02(N"
       "o.",
       "OBJ"},
      {"\x80\x02P1\n.", "PERSID"},
      {"\x80\x02NQ.", "BINPERSID"},
      {"\x80\x02\x82\x01.", "EXT1"},
      {"\x80\x02\x83\x01\x00.", "EXT2"},
      {"\x80\x02\x84\x01\x00\x00\x00.", "EXT4"},
      {"\x80\x02\x8b\x01\x00\x00\x00\x01.", "LONG4"},
      {"\x80\x04\x8f.", "EMPTY_SET"},
      {"\x80\x04]\x90.", "ADDITEMS"},
      {"\x80\x04(K\x01\x91.", "FROZENSET"},
      {"\x80\x04N)}\x92.", "NEWOBJ_EX"},
      {"\x80\x05\x97.", "NEXT_BUFFER"},
      {"\x80\x05N\x98.", "READONLY_BUFFER"},
      {"\x80\x05\xff.", "unknown opcode 0xff"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.name) { HPREF_CHECK_ERROR(read(c.bytes), Errc::pickle_opcode, c.name); }
  }
}

BOOST_AUTO_TEST_CASE(other_globals_are_refused_by_name) {
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "cposix\nsystem\nX\x02\x00\x00\x00id\x85R."sv),
                    Errc::pickle_global, "posix.system");
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "cos\nsystem\n."sv),
                    Errc::pickle_global, "os.system");
  std::string stack = "\x80\x05" + short_str("builtins") + short_str("eval") + "\x93.";
  HPREF_CHECK_ERROR(read(stack), Errc::pickle_global, "builtins.eval");
  HPREF_CHECK_ERROR(read("\x80\x05K\x01K\x02\x93."sv), Errc::pickle_global, "STACK_GLOBAL");
}

BOOST_AUTO_TEST_CASE(an_accepted_global_used_as_a_value) {
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "c_codecs\nencode\n."sv),
                    Errc::pickle_global, "_codecs.encode");
}

BOOST_AUTO_TEST_CASE(reduce_of_other_shapes) {
  // _codecs.encode with another encoding
  std::string p =
      "\x80\x02"
      "c_codecs\nencode\n" +
      short_str("a") + short_str("utf-8") + "\x86R.";
  HPREF_CHECK_ERROR(read(p), Errc::pickle_reduce, "utf-8");
  // characters above U+00FF cannot be latin1
  p = "\x80\x02"
      "c_codecs\nencode\n" +
      short_str("\xc4\x80") + short_str("latin1") + "\x86R.";
  HPREF_CHECK_ERROR(read(p), Errc::pickle_reduce, "U+00FF");
  // bytearray with two arguments, or a str argument
  p = "\x80\x03"
      "cbuiltins\nbytearray\nC\x01"
      "aC\x01"
      "b\x86R.";
  HPREF_CHECK_ERROR(read(p), Errc::pickle_reduce, "bytearray");
  p = "\x80\x03"
      "cbuiltins\nbytearray\n" +
      short_str("a") + "\x85R.";
  HPREF_CHECK_ERROR(read(p), Errc::pickle_reduce, "'a'");
  // bytes with an argument
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "c__builtin__\nbytes\nK\x01\x85R."sv),
                    Errc::pickle_reduce, "bytes");
  // REDUCE of a non-global
  HPREF_CHECK_ERROR(read("\x80\x02K\x01)R."sv), Errc::pickle_reduce, "not a global");
  // REDUCE of the key class (only NEWOBJ is its pattern)
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "chyper_parallel.distributed_data.schema\nSampleKey\n)R."sv),
                    Errc::pickle_reduce, "SampleKey");
  // NEWOBJ of bytearray
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "cbuiltins\nbytearray\n)\x81."sv),
                    Errc::pickle_reduce, "NEWOBJ of builtins.bytearray");
}

BOOST_AUTO_TEST_CASE(build_outside_the_key_pattern) {
  HPREF_CHECK_ERROR(read("\x80\x02]}b."sv), Errc::pickle_reduce, "BUILD");
  std::string k =
      "\x80\x02"
      "chyper_parallel.distributed_data.schema\nSampleKey\n)\x81";
  HPREF_CHECK_ERROR(read(k + "}" + short_str("sample_id") + "K\x01s" + "b."), Errc::pickle_reduce,
                    "'sample_id'");
  HPREF_CHECK_ERROR(
      read(k + "}(" + short_str("sample_id") + "K\x01" + short_str("pos") + "K\x01ub."),
      Errc::pickle_reduce, "'pos'");
  // BUILD twice
  std::string built =
      k + "}(" + short_str("sample_id") + "K\x01" + short_str("position") + "K\x00ub"s;
  HPREF_CHECK_ERROR(read(built + "}b."), Errc::pickle_reduce, "once");
  // used before BUILD
  HPREF_CHECK_ERROR(read(k + "\x85."), Errc::pickle_reduce, "before BUILD");
  // unhashable field
  HPREF_CHECK_ERROR(
      read(k + "}(" + short_str("sample_id") + "]" + short_str("position") + "K\x00ub."s),
      Errc::pickle_unhashable_key, "[]");
}

BOOST_AUTO_TEST_CASE(protocols_outside_2_to_5) {
  HPREF_CHECK_ERROR(read("\x80\x01N."sv), Errc::pickle_protocol, "protocol 1");
  HPREF_CHECK_ERROR(read("\x80\x06N."sv), Errc::pickle_protocol, "protocol 6");
  BOOST_TEST(read("N."sv).is(ValueKind::none));  // PROTO is optional
}

BOOST_AUTO_TEST_CASE(bytes_after_stop) {
  HPREF_CHECK_ERROR(read("\x80\x05N.N"sv), Errc::pickle_trailing_bytes, "1 bytes follow STOP");
}

BOOST_AUTO_TEST_CASE(stack_shape_errors) {
  HPREF_CHECK_ERROR(read("\x80\x05NN."sv), Errc::pickle_stack, "found 2");
  HPREF_CHECK_ERROR(read("\x80\x05."sv), Errc::pickle_stack, "found 0");
  HPREF_CHECK_ERROR(read("\x80\x05(N."sv), Errc::pickle_stack, "unclosed MARK");
  HPREF_CHECK_ERROR(read("\x80\x05"
                         "0."sv),
                    Errc::pickle_stack, "POP");
  HPREF_CHECK_ERROR(read("\x80\x05K\x01K\x02"
                         "a."sv),
                    Errc::pickle_stack, "APPEND needs a list");
  HPREF_CHECK_ERROR(read("\x80\x05}(K\x01u."sv), Errc::pickle_stack, "odd number");
  HPREF_CHECK_ERROR(read("\x80\x05](K\x01"
                         "a."sv),
                    Errc::pickle_stack, "above the last MARK");
  HPREF_CHECK_ERROR(read("\x80\x05N1."sv), Errc::pickle_stack, "no MARK");
  HPREF_CHECK_ERROR(read("\x80\x05N\x86."sv), Errc::pickle_stack, "TUPLE2");
}

BOOST_AUTO_TEST_CASE(integers_beyond_64_bits) {
  HPREF_CHECK_ERROR(read("\x80\x05\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."sv),
                    Errc::pickle_int_range, "9 bytes");
  // The 64-bit extremes are accepted.
  BOOST_TEST(read("\x80\x05\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."sv).as_int() ==
             std::numeric_limits<std::int64_t>::min());
  BOOST_TEST(read("\x80\x05\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."sv).as_int() ==
             std::numeric_limits<std::int64_t>::max());
  BOOST_TEST(read("\x80\x05\x8a\x00."sv).as_int() == 0);
  BOOST_TEST(read("\x80\x05\x8a\x01\xff."sv).as_int() == -1);
}

BOOST_AUTO_TEST_CASE(strings_that_are_not_utf8) {
  // CPython pickles '\ud800' as the surrogatepass bytes ED A0 80.
  HPREF_CHECK_ERROR(read("\x80\x05\x8c\x03\xed\xa0\x80."sv), Errc::pickle_invalid_utf8, "\\xed");
  HPREF_CHECK_ERROR(read("\x80\x05X\x01\x00\x00\x00\xff."sv), Errc::pickle_invalid_utf8, "\\xff");
}

BOOST_AUTO_TEST_CASE(dict_keys_equal_under_key_equality) {
  HPREF_CHECK_ERROR(read("\x80\x05}(K\x01N\x88Nu."sv), Errc::pickle_duplicate_key,
                    "dict key True appears twice");
  HPREF_CHECK_ERROR(read("\x80\x05(K\x01NG\x3f\xf0\x00\x00\x00\x00\x00\x00Nd."sv),
                    Errc::pickle_duplicate_key, "1.0");
  // SETITEM one at a time also checks.
  HPREF_CHECK_ERROR(read("\x80\x05}K\x00Ns\x89Ns."sv), Errc::pickle_duplicate_key, "False");
}

// Up to kScannedKeys entries a dict is checked by scanning its entries, past that by a key
// set built from them when it grows past the scan: a duplicate is found on either side of
// that change and across it, and no false duplicate is reported.
BOOST_AUTO_TEST_CASE(dict_duplicates_found_scanned_and_hashed) {
  auto key = [](int k) { return std::string("K") + static_cast<char>(k) + "N"; };
  std::string one_by_one = "\x80\x05}";
  for (int k = 0; k < 16; ++k) one_by_one += key(k) + "s";
  // 16 entries scanned, then a batch of 4 crossing into the key set, repeating key 3.
  HPREF_CHECK_ERROR(read(one_by_one + "(" + key(16) + key(17) + key(3) + key(18) + "u."),
                    Errc::pickle_duplicate_key, "dict key 3 appears twice");
  std::string batch = "\x80\x05}(";
  for (int k = 0; k < 20; ++k) batch += key(k);
  HPREF_CHECK_ERROR(read(batch + key(7) + "u."), Errc::pickle_duplicate_key,
                    "dict key 7 appears twice");  // in one batch
  HPREF_CHECK_ERROR(read(batch + "u" + key(0) + "s."), Errc::pickle_duplicate_key,
                    "dict key 0 appears twice");  // set, later
  HPREF_CHECK_ERROR(read(batch + "u\x88Ns."), Errc::pickle_duplicate_key,
                    "dict key True appears twice");  // True == 1
  Value ok = read(batch + "u(" + key(40) + key(41) + "u" + key(42) + "s.");
  BOOST_TEST(ok.entries().size() == 23u);
  Value small = read(one_by_one + ".");
  BOOST_TEST(small.entries().size() == 16u);
  HPREF_CHECK_ERROR(read(one_by_one + key(15) + "s."), Errc::pickle_duplicate_key,
                    "dict key 15 appears twice");  // scanned
}

BOOST_AUTO_TEST_CASE(unhashable_dict_keys) {
  HPREF_CHECK_ERROR(read("\x80\x05}]Ns."sv), Errc::pickle_unhashable_key, "list");
  HPREF_CHECK_ERROR(read("\x80\x05}]\x85Ns."sv), Errc::pickle_unhashable_key, "([],)");
}

BOOST_AUTO_TEST_CASE(memo_fetch_of_a_missing_index) {
  HPREF_CHECK_ERROR(read("\x80\x05h\x05."sv), Errc::pickle_memo_missing, "memo index 5");
  HPREF_CHECK_ERROR(read("\x80\x05j\x00\x00\x01\x00."sv), Errc::pickle_memo_missing, "65536");
}

BOOST_AUTO_TEST_CASE(modifying_a_container_after_fetching_it) {
  // A list appended to itself through the memo would be a cycle.
  HPREF_CHECK_ERROR(read("\x80\x05]\x94h\x00"
                         "a."sv),
                    Errc::pickle_frozen_mutation, "APPEND");
  HPREF_CHECK_ERROR(read("\x80\x05}\x94K\x01h\x00s."sv), Errc::pickle_frozen_mutation, "SETITEM");
  // Fetch, drop the copy, then modify the original.
  HPREF_CHECK_ERROR(read("\x80\x05]\x94h\x00"
                         "0K\x01"
                         "a."sv),
                    Errc::pickle_frozen_mutation, "fetched");
  std::string k =
      "\x80\x02"
      "chyper_parallel.distributed_data.schema\nSampleKey\n)\x81\x94h\x00"
      "0"s;
  HPREF_CHECK_ERROR(
      read(k + "}(" + short_str("sample_id") + "K\x01" + short_str("position") + "K\x00ub."s),
      Errc::pickle_frozen_mutation, "BUILD");
}

BOOST_AUTO_TEST_CASE(lengths_longer_than_the_input) {
  HPREF_CHECK_ERROR(read("\x80\x05\x8c\x05"
                         "ab."sv),
                    Errc::pickle_truncated, "SHORT_BINUNICODE");
  HPREF_CHECK_ERROR(read("\x80\x05\x8e\xff\xff\xff\xff\xff\xff\xff\x7f."sv), Errc::pickle_truncated,
                    "9223372036854775807");
  HPREF_CHECK_ERROR(read("\x80\x05\x96\x00\x00\x00\x00\x00\x00\x01\x00."sv), Errc::pickle_truncated,
                    "BYTEARRAY8");
  HPREF_CHECK_ERROR(read("\x80\x05\x95\x00\x01\x00\x00\x00\x00\x00\x00N."sv),
                    Errc::pickle_truncated, "FRAME");
  HPREF_CHECK_ERROR(read("\x80\x05N"sv), Errc::pickle_truncated, "opcode");
  HPREF_CHECK_ERROR(read("\x80\x05J\x01\x02"sv), Errc::pickle_truncated, "BININT");
  HPREF_CHECK_ERROR(read("\x80\x02"
                         "cos"sv),
                    Errc::pickle_truncated, "newline");
  HPREF_CHECK_ERROR(read(""sv), Errc::pickle_truncated, "opcode");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pickle_limits)

std::string nested_lists(int depth) {
  std::string p = "\x80\x05";
  for (int i = 0; i < depth; ++i) p += "]";
  for (int i = 1; i < depth; ++i) p += "a";
  return p + ".";
}

BOOST_AUTO_TEST_CASE(depth_256_accepted_257_refused) {
  BOOST_TEST(read(nested_lists(256)).depth() == 256);
  HPREF_CHECK_ERROR(read(nested_lists(257)), Errc::pickle_depth_limit, "257");
  PickleReadOptions shallow;
  shallow.limits.max_depth = 3;
  BOOST_TEST(read(nested_lists(3), shallow).depth() == 3);
  HPREF_CHECK_ERROR(read(nested_lists(4), shallow), Errc::pickle_depth_limit, "limit of 3");
}

BOOST_AUTO_TEST_CASE(memo_entries_limit) {
  PickleReadOptions small;
  small.limits.max_memo_entries = 4;
  std::string p = "\x80\x05N";
  for (int i = 0; i < 4; ++i) p += "q" + std::string(1, static_cast<char>(i));
  BOOST_TEST(read(p + ".", small).is(ValueKind::none));
  p += "q\x09";
  HPREF_CHECK_ERROR(read(p + ".", small), Errc::pickle_memo_limit, "4 entries");
  // Re-storing an existing index is not a new entry.
  BOOST_TEST(read("\x80\x05Nq\x01q\x01q\x01q\x01q\x01."sv, small).is(ValueKind::none));
}

BOOST_AUTO_TEST_CASE(memo_bomb_hits_the_node_limit) {
  // Each level is a tuple of 8 fetches of the previous one: 8**9 nodes from ~200 bytes.
  std::string p =
      "\x80\x05K\x00\x94"
      "0"s;
  for (int level = 1; level <= 9; ++level) {
    p += "(";
    for (int k = 0; k < 8; ++k) p += "h" + std::string(1, static_cast<char>(level - 1));
    p += "t\x94"
         "0";
  }
  p += "h\x09.";
  HPREF_CHECK_ERROR(read(p), Errc::pickle_node_limit, "16777216 nodes");
  PickleReadOptions big;
  big.limits.max_nodes = 1ull << 40;
  Value v = read(p, big);
  BOOST_TEST(v.node_count() > (16ull << 20));  // shared, not copied: it fits in memory
}

// SPEC 2.4 (issue 10): 4 MB of one-byte pushes held 950 MB until STOP refused them. The
// stack (items and MARKs) is bounded, so such input stops at the limit, naming the byte.
BOOST_AUTO_TEST_CASE(stack_limit_stops_a_run_of_pushes_spec_2_4) {
  PickleReadOptions small;
  small.limits.max_stack = 8;
  // MARK and 7 items: 8 entries.
  BOOST_TEST(read("\x80\x05(NNNNNNNt."sv, small).items().size() == 7u);
  HPREF_CHECK_ERROR(read("\x80\x05(NNNNNNNNt."sv, small), Errc::pickle_stack_limit,
                    "more than 8 entries");
  HPREF_CHECK_ERROR(read("\x80\x05(NNNNNNNNt."sv, small), Errc::pickle_stack_limit, "byte 10");
  // MARKs count too, and so do memo fetches.
  HPREF_CHECK_ERROR(read("\x80\x05((((((((((."sv, small), Errc::pickle_stack_limit, "8 entries");
  std::string fetches = "\x80\x05N\x94";
  for (int i = 0; i < 10; ++i) fetches += "h\x00"s;
  HPREF_CHECK_ERROR(read(fetches + ".", small), Errc::pickle_stack_limit, "8 entries");
  // The default limit: 1 Mi entries; a run of empty dicts is refused at the limit, not at STOP.
  std::string dicts = "\x80\x05" + std::string((1u << 20) + 1, '}') + ".";
  HPREF_CHECK_ERROR(read(dicts), Errc::pickle_stack_limit, "byte 1048578");
}

// SPEC 2.4: work a memo reference repeats without new input (hashing a shared key) is
// bounded by the node limit plus the input's size.
BOOST_AUTO_TEST_CASE(work_of_repeated_shared_keys_is_bounded_spec_2_4) {
  // A tuple of 299593 nodes (8**6 leaves) from ~60 bytes, memoized at index 6.
  std::string p =
      "\x80\x05K\x00\x94"
      "0"s;
  for (int level = 1; level <= 6; ++level) {
    p += "(";
    for (int k = 0; k < 8; ++k) p += "h" + std::string(1, static_cast<char>(level - 1));
    p += "t\x94"
         "0";
  }
  // Each round: a fresh dict keyed by (big, i), then POP: 299595 nodes hashed per 7 bytes.
  auto rounds = [&](int n) {
    std::string q = p;
    for (int i = 0; i < n; ++i) q += "}h\x06K"s + static_cast<char>(i) + "\x86Ns0";
    return q + "N.";
  };
  BOOST_TEST(read(rounds(50)).is(ValueKind::none));  // 50 * 299595 < 16 Mi + input
  HPREF_CHECK_ERROR(read(rounds(70)), Errc::pickle_node_limit, "work");
  // Text converted by _codecs.encode counts the same way.
  std::string t =
      "\x80\x02"
      "c_codecs\nencode\n\x94"
      "0X"s +
      le(1000, 4) + std::string(1000, 'a') +
      "\x94"
      "0X" +
      le(6, 4) +
      "latin1\x94"
      "0";
  for (int i = 0; i < 3; ++i) t += "h\x00h\x01h\x02\x86R0"s;
  t += "N.";
  PickleReadOptions tiny;
  tiny.limits.max_nodes = 100;  // budget 100 + ~1.1 KB of input: one conversion fits
  HPREF_CHECK_ERROR(read(t, tiny), Errc::pickle_node_limit, "_codecs.encode");
  BOOST_TEST(read(t).is(ValueKind::none));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pickle_writer)

std::string w(const Value& v) { return hex(write_pickle(v)); }

BOOST_AUTO_TEST_CASE(golden_scalars_spec_2_3) {
  BOOST_TEST(w(Value()) == "80054e2e");
  BOOST_TEST(w(Value::boolean(true)) == "8005882e");
  BOOST_TEST(w(Value::boolean(false)) == "8005892e");
  BOOST_TEST(w(i64(0)) == "80054b002e");
  BOOST_TEST(w(i64(255)) == "80054bff2e");
  BOOST_TEST(w(i64(256)) == "80054d00012e");
  BOOST_TEST(w(i64(65535)) == "80054dffff2e");
  BOOST_TEST(w(i64(65536)) == "80054a000001002e");
  BOOST_TEST(w(i64(-1)) == "80054affffffff2e");
  BOOST_TEST(w(i64(2147483647)) == "80054affffff7f2e");
  BOOST_TEST(w(i64(-2147483648ll)) == "80054a000000802e");
  BOOST_TEST(w(i64(2147483648ll)) == "80058a0500000080002e");
  BOOST_TEST(w(i64(-2147483649ll)) == "80058a05ffffff7fff2e");
  BOOST_TEST(w(i64(1ll << 40)) == "80058a060000000000012e");
  BOOST_TEST(w(i64(std::numeric_limits<std::int64_t>::max())) == "80058a08ffffffffffffff7f2e");
  BOOST_TEST(w(i64(std::numeric_limits<std::int64_t>::min())) == "80058a0800000000000000802e");
  BOOST_TEST(w(Value::floating(1.5)) == "8005473ff80000000000002e");
  BOOST_TEST(w(Value::floating(-0.0)) ==
             "800547"
             "8000000000000000"
             "2e");
}

BOOST_AUTO_TEST_CASE(golden_strings_and_bytes) {
  BOOST_TEST(w(str("")) == "80058c002e");
  BOOST_TEST(w(str("\xc3\xa9")) == "80058c02c3a92e");
  std::string s255(255, 'a'), s256(256, 'a');
  BOOST_TEST(w(str(s255)).substr(0, 8) == "80058cff");
  BOOST_TEST(w(str(s256)).substr(0, 14) == "80055800010000");
  BOOST_TEST(w(Value::bytes(""sv)) == "800543002e");
  BOOST_TEST(w(Value::bytes(std::string_view(s256))).substr(0, 14) == "80054200010000");
  BOOST_TEST(w(Value::bytearray(SharedBytes())) ==
             "800596"
             "0000000000000000"
             "2e");
  BOOST_TEST(w(Value::bytearray(SharedBytes::copy_of("xy"sv))) ==
             "800596"
             "0200000000000000"
             "7879"
             "2e");
}

BOOST_AUTO_TEST_CASE(golden_tuples) {
  BOOST_TEST(w(Value::tuple({})) == "8005292e");
  BOOST_TEST(w(Value::tuple({Value()})) == "80054e852e");
  BOOST_TEST(w(Value::tuple({Value(), Value()})) == "80054e4e862e");
  BOOST_TEST(w(Value::tuple({Value(), Value(), Value()})) == "80054e4e4e872e");
  BOOST_TEST(w(Value::tuple({Value(), Value(), Value(), Value()})) == "8005284e4e4e4e742e");
}

BOOST_AUTO_TEST_CASE(golden_list_batches_of_1000) {
  BOOST_TEST(w(Value::list({})) == "80055d2e");
  BOOST_TEST(w(Value::list({Value()})) == "80055d4e612e");
  BOOST_TEST(w(Value::list({Value(), Value()})) == "80055d284e4e652e");
  auto list_of = [](std::size_t n) { return Value::list(std::vector<Value>(n, Value())); };
  std::string b1000 = "28" + std::string(2000, '0') + "65";
  for (std::size_t i = 0; i < 1000; ++i) b1000.replace(2 + 2 * i, 2, "4e");
  BOOST_TEST(w(list_of(1000)) == "80055d" + b1000 + "2e");
  BOOST_TEST(w(list_of(1001)) == "80055d" + b1000 + "4e61" + "2e");
  BOOST_TEST(w(list_of(2002)) == "80055d" + b1000 + b1000 + "284e4e65" + "2e");
}

BOOST_AUTO_TEST_CASE(golden_dict_batches_of_1000) {
  BOOST_TEST(w(Value::mapping({})) == "80057d2e");
  BOOST_TEST(w(Value::mapping({{i64(1), Value()}})) == "80057d4b014e732e");
  BOOST_TEST(w(Value::mapping({{i64(1), Value()}, {i64(2), Value()}})) ==
             "80057d284b014e4b024e752e");
  std::vector<Value::Entry> entries;
  for (int i = 0; i < 1001; ++i) entries.emplace_back(i64(i), Value());
  std::string out = w(Value::mapping(entries));
  BOOST_TEST(out.substr(0, 8) == "80057d28");
  BOOST_TEST(out.substr(out.size() - 14) == "754de8034e732e");
}

BOOST_AUTO_TEST_CASE(key_object_pattern_reads_back) {
  std::string out;
  PickleWriter writer(out);
  writer.begin();
  writer.key_object(SampleKey::make(std::string("doc"), 3), kDefaultKeyClass);
  writer.end();
  BOOST_TEST((read_pickle(out) == Value::tuple({str("doc"), i64(3)})));
  // STACK_GLOBAL MEMOIZE EMPTY_TUPLE NEWOBJ
  BOOST_TEST(out.find("\x93\x94)\x81}(") != std::string::npos);
}

// SPEC 2.3 memo (revised, issue 15): a str used as a mapping key is followed by MEMOIZE at
// its first occurrence and written as BINGET at every later one, at any depth; a str value,
// a non-str key and the str inside a tuple key are written in full.
BOOST_AUTO_TEST_CASE(golden_memo_of_mapping_key_strs_spec_2_3) {
  Value inner = Value::mapping(
      {{str("a"), str("a")}, {Value::tuple({str("a")}), i64(1)}, {i64(2), str("b")}});
  Value v = Value::mapping({{str("a"), inner}, {str("b"), Value::list({str("a")})}});
  BOOST_TEST(w(v) ==
             "8005"
             "7d28"
             "8c0161"
             "94"  // {"a": (entry 0)
             "7d28"
             "6800"
             "8c0161"
             "8c016185"
             "4b01"
             "4b02"
             "8c0162"
             "75"  // {a: "a", ("a",): 1, 2: "b"}
             "8c0162"
             "94"
             "5d8c016161"
             "75"
             "2e");  // "b" (entry 1): ["a"]
  BOOST_TEST((read(write_pickle(v)) == v));
  // A key equal as a Value but not a str (b"a", 1) is not a memo hit; key equality is by
  // value, so equal strs in different mappings share one entry.
  Value mixed = Value::list({Value::mapping({{Value::bytes("a"sv), i64(1)}, {str("1"), i64(1)}}),
                             Value::mapping({{i64(1), i64(2)}, {str("1"), i64(3)}})});
  BOOST_TEST(w(mixed) ==
             "80055d28"
             "7d28"
             "430161"
             "4b01"
             "8c0131"
             "94"
             "4b01"
             "75"
             "7d28"
             "4b01"
             "4b02"
             "6800"
             "4b03"
             "75"
             "652e");
  BOOST_TEST((read(write_pickle(mixed)) == mixed));
}

// Entry 255 is the last BINGET; from 256 on the index takes LONG_BINGET's 4 bytes.
BOOST_AUTO_TEST_CASE(golden_memo_binget_and_long_binget_spec_2_3) {
  std::vector<Value::Entry> entries;
  for (int i = 0; i < 257; ++i) entries.emplace_back(str("k" + std::to_string(i)), Value());
  Value again =
      Value::mapping({{str("k0"), Value()}, {str("k255"), Value()}, {str("k256"), Value()}});
  Value v = Value::list({Value::mapping(entries), again});
  std::string out = w(v);
  const std::string tail =
      "7d28"
      "6800"
      "4e"
      "68ff"
      "4e"
      "6a00010000"
      "4e"
      "75"
      "652e";
  BOOST_TEST(out.substr(out.size() - tail.size()) == tail);
  BOOST_TEST(out.find("8c046b32353694") != std::string::npos);  // "k256" MEMOIZE (entry 256)
  BOOST_TEST((read(write_pickle(v)) == v));
}

// SPEC 2.3 memo, against a model of its bytes: keys that differ only in length, in a NUL,
// in their 16th byte, or past it, and 700 short keys (more than the writer's 64 slots for
// short keys, so they collide there), each written in three mappings: MEMOIZE at the
// first occurrence only, BINGET/LONG_BINGET of the right index at every later one.
BOOST_AUTO_TEST_CASE(memo_of_many_short_keys_matches_a_model_spec_2_3) {
  std::vector<std::string> keys = {"",
                                   "a",
                                   "a\0"s,
                                   "\0"s,
                                   "\0\0"s,
                                   "0123456789abcdef",
                                   "0123456789abcdeg",
                                   "0123456789abcdef0",
                                   "0123456789abcdef1"};
  std::uint64_t state = 7;
  while (keys.size() < 700) {
    std::string k;
    state = state * 6364136223846793005u + 1442695040888963407u;
    for (std::size_t n = (state >> 33) % 21; n > 0; --n) {
      state = state * 6364136223846793005u + 1442695040888963407u;
      k.push_back(static_cast<char>("ab\0z"[(state >> 40) % 4]));
    }
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<std::size_t>> orders = {order, {order.rbegin(), order.rend()}, {}};
  for (std::size_t i = 0; i < order.size(); ++i) orders[2].push_back(order[(i * 337) % 700]);
  std::vector<Value> maps;
  std::string model = "\x80\x05]("s;  // PROTO 5, EMPTY_LIST MARK
  std::map<std::string, std::uint32_t> memo;
  for (const auto& o : orders) {
    std::vector<Value::Entry> entries;
    model += "}(";
    for (std::size_t i : o) {
      entries.emplace_back(str(keys[i]), Value());
      auto [it, first] = memo.emplace(keys[i], static_cast<std::uint32_t>(memo.size()));
      if (first) {
        model += short_str(keys[i]) + "\x94";
      } else if (it->second < 256) {
        model += "h"s + static_cast<char>(it->second);
      } else {
        model += "j" + std::string(reinterpret_cast<const char*>(&it->second), 4);
      }
      model += "N";
    }
    model += "u";  // SETITEMS
    maps.push_back(Value::mapping(std::move(entries)));
  }
  model += "e.";  // APPENDS STOP
  Value v = Value::list(maps);
  BOOST_TEST(hex(write_pickle(v)) == hex(model));
  BOOST_TEST((read_pickle(write_pickle(v)) == v));
}

// The writer never makes more memo entries than the reader's limit (max_memo_entries): a
// new key past it is written in full, without MEMOIZE; the reader, with the same limit,
// reads it back, and with a smaller limit refuses it (the limit is the one that binds).
BOOST_AUTO_TEST_CASE(memo_stays_within_the_readers_limit_spec_2_3) {
  Value abc = Value::mapping({{str("a"), i64(1)}, {str("b"), i64(2)}, {str("c"), i64(3)}});
  Value v = Value::list({abc, abc});
  PickleLimits limits;
  limits.max_memo_entries = 2;
  std::string out = write_pickle(v, limits);
  BOOST_TEST(hex(out) ==
             "80055d28"
             "7d28"
             "8c016194"
             "4b01"
             "8c016294"
             "4b02"
             "8c0163"
             "4b03"
             "75"
             "7d28"
             "6800"
             "4b01"
             "6801"
             "4b02"
             "8c0163"
             "4b03"
             "75"
             "652e");
  PickleReadOptions options;
  options.limits = limits;
  BOOST_TEST((read_pickle(out, options) == v));
  options.limits.max_memo_entries = 1;
  HPREF_CHECK_ERROR(read_pickle(out, options), Errc::pickle_memo_limit, "more than 1");
  // Under the default limit every distinct key is an entry.
  BOOST_TEST(hex(write_pickle(v)).find("8c016394") != std::string::npos);
}

Value nested(int depth) {
  Value v;
  for (int i = 0; i < depth; ++i) v = Value::list({v});
  return v;
}

// SPEC 2.3: whatever encodes decodes. The writer refuses exactly what the reader refuses
// for depth: at the limit - 1 and the limit both write and read back, at the limit + 1 the
// writer refuses with depth_limit and the reader refuses those bytes (written under a
// larger limit) with pickle_depth_limit. Issue 10: write_pickle wrote depth 300.
BOOST_AUTO_TEST_CASE(writer_and_reader_agree_on_depth_spec_2_3) {
  for (int limit : {256, 3}) {
    PickleLimits limits;
    limits.max_depth = limit;
    PickleReadOptions read_options;
    read_options.limits = limits;
    for (int depth : {limit - 1, limit}) {
      std::string bytes = write_pickle(nested(depth), limits);
      BOOST_TEST((read_pickle(bytes, read_options) == nested(depth)));
    }
    HPREF_CHECK_ERROR(write_pickle(nested(limit + 1), limits), Errc::depth_limit,
                      std::to_string(limit + 1) + " levels");
    PickleLimits deeper = limits;
    deeper.max_depth = limit + 1;
    std::string bytes = write_pickle(nested(limit + 1), deeper);
    HPREF_CHECK_ERROR(read_pickle(bytes, read_options), Errc::pickle_depth_limit,
                      "limit of " + std::to_string(limit));
  }
  HPREF_CHECK_ERROR(write_pickle(nested(300)), Errc::depth_limit, "300 levels");
}

// The same for the stack (SPEC 2.4): a tuple of n items holds MARK and n items at once.
BOOST_AUTO_TEST_CASE(writer_and_reader_agree_on_the_stack_spec_2_3) {
  PickleLimits limits;
  limits.max_stack = 10;
  PickleReadOptions read_options;
  read_options.limits = limits;
  auto tuple_of = [](std::size_t n) { return Value::tuple(std::vector<Value>(n, Value())); };
  for (std::size_t n : {8u, 9u}) {
    BOOST_TEST((read_pickle(write_pickle(tuple_of(n), limits), read_options) == tuple_of(n)));
  }
  HPREF_CHECK_ERROR(write_pickle(tuple_of(10), limits), Errc::pickle_stack_limit, "10 entries");
  PickleLimits larger = limits;
  larger.max_stack = 11;
  HPREF_CHECK_ERROR(read_pickle(write_pickle(tuple_of(10), larger), read_options),
                    Errc::pickle_stack_limit, "10 entries");
  // Nesting adds up: a list (1) whose batch (MARK + 2 items) holds a tuple (MARK + 4).
  Value nest = Value::list({Value(), Value::tuple(std::vector<Value>(4, Value()))});
  limits.max_stack = 8;
  read_options.limits = limits;
  BOOST_TEST((read_pickle(write_pickle(nest, limits), read_options) == nest));
  limits.max_stack = 7;
  read_options.limits = limits;
  HPREF_CHECK_ERROR(write_pickle(nest, limits), Errc::pickle_stack_limit, "7 entries");
  HPREF_CHECK_ERROR(read_pickle(write_pickle(nest, larger), read_options), Errc::pickle_stack_limit,
                    "7 entries");
}

// The writer's stack count is exact for every container shape, not only for one tuple:
// for each value, the smallest max_stack at which the reader accepts its pickle is the
// smallest at which the writer writes it. Containers one after the other (a list of dicts,
// a dict of lists) would expose a pop too few or too many per batch (pickle_writer mutants
// that popped 2n instead of 2n + 1 after SETITEMS, or n instead of n + 1 after TUPLE,
// survived the tuple test above).
BOOST_AUTO_TEST_CASE(writer_stack_count_is_tight_for_every_container_spec_2_3) {
  auto i = [](std::int64_t n) { return Value::integer(n); };
  auto dict2 = [&](std::int64_t k) { return Value::mapping({{i(k), i(1)}, {i(k + 1), i(2)}}); };
  std::vector<Value> values = {
      Value::list({dict2(0), dict2(2), dict2(4), dict2(6)}),
      Value::list({Value::mapping({{i(0), i(0)}}), Value::mapping({{i(1), i(1)}}), i(5)}),
      Value::mapping({{i(0), Value::list({i(1), i(2)})},
                      {i(1), Value::list({i(3)})},
                      {i(2), Value::list({i(4), i(5), i(6)})}}),
      Value::tuple({Value::list({i(1), i(2)}), Value::list({}), dict2(8), Value::tuple({i(1)})}),
      Value::list({Value::list({Value::list({i(1), i(2)}), i(3)}), dict2(0)}),
      // Tuples of more than three items (MARK ... TUPLE) followed by more values.
      Value::list({Value::tuple({i(1), i(2), i(3), i(4)}),
                   Value::tuple({i(5), i(6), i(7), i(8), i(9)}), dict2(0),
                   Value::tuple({i(1), i(2), i(3)})}),
  };
  for (std::size_t v = 0; v < values.size(); ++v) {
    BOOST_TEST_CONTEXT("value " << v << ": " << repr(values[v])) {
      std::string bytes = write_pickle(values[v]);
      std::uint64_t s = 1;
      for (;; ++s) {
        PickleReadOptions options;
        options.limits.max_stack = s;
        try {
          BOOST_TEST((read_pickle(bytes, options) == values[v]));
          break;
        } catch (const Error& e) {
          BOOST_TEST_REQUIRE(std::string(e.kind()) == "pickle_stack_limit");
        }
      }
      PickleLimits at;
      at.max_stack = s;
      BOOST_TEST(write_pickle(values[v], at) == bytes);
      PickleLimits below;
      below.max_stack = s - 1;
      HPREF_CHECK_ERROR(write_pickle(values[v], below), Errc::pickle_stack_limit,
                        std::to_string(s - 1) + " entries");
    }
  }
}

BOOST_AUTO_TEST_CASE(tensors_are_not_pickled) {
  HPREF_CHECK_ERROR(write_pickle(Value::tensor(Tensor())), Errc::pickle_unwritable, "tensor");
}

BOOST_AUTO_TEST_SUITE_END()
