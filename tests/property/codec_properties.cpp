// Properties of SPEC 2: round trips, golden stability, total decoders on hostile bytes,
// strict layout, merge, and the limits of the metadata pickle.
#define BOOST_TEST_DYN_LINK
#include <rapidcheck/boost_test.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <limits>
#include <numeric>

#include "generators.hpp"
#include "hpref/error.hpp"
#include "hpref/pickle.hpp"

using namespace hpref;

namespace {

std::vector<std::uint8_t> encode(const std::vector<Item>& items) { return encode_segment(items); }

std::vector<Item> decode(std::span<const std::uint8_t> bytes, bool strict = false) {
  DecodeOptions options;
  options.strict = strict;
  return decode_segment(bytes, options);
}

bool same_items(const std::vector<Item>& a, const std::vector<Item>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].first == b[i].first) || !(a[i].second == b[i].second)) return false;
  }
  return true;
}

// Decoding must return items or throw hpref::Error; anything else fails the property.
void decode_is_total(std::span<const std::uint8_t> bytes) {
  for (bool strict : {false, true}) {
    try {
      decode(bytes, strict);
    } catch (const Error& e) {
      // An internal check firing is our bug, not a refusal of the input.
      RC_ASSERT(e.code() != Errc::internal);
    } catch (const std::exception& e) {
      RC_FAIL(std::string("decode threw a non-hpref exception: ") + e.what());
    }
  }
}

std::uint64_t be64(std::span<const std::uint8_t> p) {
  std::uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | p[i];
  return x;
}

void put_be64(std::vector<std::uint8_t>& out, std::size_t at, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<std::uint8_t>(x >> (8 * (7 - i)));
}

// A framed segment taken apart: metadata schema Value, leaves in depth-first order.
struct Frame {
  Value metadata;
  std::vector<std::span<const std::uint8_t>> leaves;  // views into the original bytes
};

void collect_leaves(const Value& schema, std::vector<std::pair<std::int64_t, std::int64_t>>& out) {
  auto f = schema.items();
  std::string_view tag = f[0].as_str();
  if (tag == "__hp_tensor__" || tag == "__hp_bytes__" || tag == "__hp_bytearray__") {
    out.emplace_back(f[f.size() - 2].as_int(), f[f.size() - 1].as_int());
  } else if (tag == "__hp_mapping__") {
    for (const Value& pair : f[1].items()) collect_leaves(pair.items()[1], out);
  } else if (tag == "__hp_tuple__" || tag == "__hp_list__") {
    for (const Value& child : f[1].items()) collect_leaves(child, out);
  }
}

using Range = std::pair<std::int64_t, std::int64_t>;  // (offset, size)

// The schema with leaf (offset, size) fields replaced, in depth-first order, by `ranges`.
Value with_ranges(const Value& schema, const std::vector<Range>& ranges, std::size_t& next) {
  auto f = schema.items();
  std::string_view tag = f[0].as_str();
  std::vector<Value> fields(f.begin(), f.end());
  if (tag == "__hp_tensor__" || tag == "__hp_bytes__" || tag == "__hp_bytearray__") {
    fields[fields.size() - 2] = Value::integer(ranges[next].first);
    fields[fields.size() - 1] = Value::integer(ranges[next].second);
    ++next;
  } else if (tag == "__hp_mapping__") {
    std::vector<Value> pairs;
    for (const Value& pair : f[1].items()) {
      pairs.push_back(Value::tuple({pair.items()[0], with_ranges(pair.items()[1], ranges, next)}));
    }
    fields[1] = Value::tuple(std::move(pairs));
  } else if (tag == "__hp_tuple__" || tag == "__hp_list__") {
    std::vector<Value> kids;
    for (const Value& child : f[1].items()) kids.push_back(with_ranges(child, ranges, next));
    fields[1] = Value::tuple(std::move(kids));
  }
  return Value::tuple(std::move(fields));
}

// A frame from metadata pairs (whose leaves get `ranges`) and a binary region.
std::vector<std::uint8_t> reframe(const Value& metadata, const std::vector<Range>& ranges,
                                  std::span<const std::uint8_t> region) {
  std::vector<Value> pairs;
  std::size_t next = 0;
  for (const Value& pair : metadata.items()) {
    pairs.push_back(Value::tuple({pair.items()[0], with_ranges(pair.items()[1], ranges, next)}));
  }
  std::string meta = write_pickle(Value::tuple(std::move(pairs)));
  std::vector<std::uint8_t> frame(20);
  std::copy_n("HPB1", 4, frame.begin());
  put_be64(frame, 4, meta.size());
  put_be64(frame, 12, region.size());
  frame.insert(frame.end(), meta.begin(), meta.end());
  frame.insert(frame.end(), region.begin(), region.end());
  return frame;
}

// A framed encoder output taken apart: its metadata, leaf ranges and binary region.
struct Parts {
  Value metadata;
  std::vector<Range> leaves;
  std::vector<std::uint8_t> binary;
};

Parts take_apart(std::span<const std::uint8_t> bytes) {
  Parts p;
  std::uint64_t meta_size = be64(bytes.subspan(4));
  auto binary = bytes.subspan(20 + meta_size);
  p.binary.assign(binary.begin(), binary.end());
  p.metadata = read_pickle(bytes.subspan(20, meta_size));
  for (const Value& pair : p.metadata.items()) collect_leaves(pair.items()[1], p.leaves);
  return p;
}

}  // namespace

RC_BOOST_PROP(decode_of_encode_is_identity_spec_2_6, ()) {
  auto items = *gen::items();
  auto bytes = encode(items);
  RC_TAG(bytes.empty() ? "empty" : bytes[0] == 'H' ? "framed" : "legacy");
  RC_ASSERT(same_items(decode(bytes), items));
}

RC_BOOST_PROP(encode_of_decode_is_identity_on_encoder_output_spec_2_6, ()) {
  auto bytes = encode(*gen::items());
  RC_ASSERT(encode(decode(bytes)) == bytes);
}

RC_BOOST_PROP(strict_accepts_every_encoder_output_spec_2_4, ()) {
  auto items = *gen::items();
  RC_ASSERT(same_items(decode(encode(items), true), items));
}

RC_BOOST_PROP(decode_is_total_on_arbitrary_bytes_spec_2_4, ()) {
  auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(rc::gen::arbitrary<std::uint8_t>());
  if (*rc::gen::arbitrary<bool>() && bytes.size() >= 4) {
    std::copy_n("HPB1", 4, bytes.begin());  // reach the framed path as well
  }
  decode_is_total(bytes);
}

RC_BOOST_PROP(decode_is_total_on_mutated_frames_spec_2_4, ()) {
  auto bytes = encode(*gen::items(true));
  RC_PRE(!bytes.empty());
  int mutations = *rc::gen::inRange(1, 4);
  for (int m = 0; m < mutations; ++m) {
    switch (*rc::gen::inRange(0, 4)) {
      case 0: {  // flip one bit
        if (bytes.empty()) break;
        auto i = *rc::gen::inRange<std::size_t>(0, bytes.size());
        bytes[i] ^= static_cast<std::uint8_t>(1u << *rc::gen::inRange(0, 8));
        break;
      }
      case 1:  // truncate
        bytes.resize(*rc::gen::inRange<std::size_t>(0, bytes.size() + 1));
        break;
      case 2: {  // extend
        auto extra =
            *rc::gen::container<std::vector<std::uint8_t>>(rc::gen::arbitrary<std::uint8_t>());
        bytes.insert(bytes.end(), extra.begin(), extra.end());
        break;
      }
      case 3: {  // patch a size field so the header still adds up, or not
        if (bytes.size() < 20) break;
        std::size_t field = *rc::gen::element<std::size_t>(4, 12);
        std::uint64_t value = *rc::gen::weightedOneOf<std::uint64_t>({
            {2, rc::gen::inRange<std::uint64_t>(0, bytes.size())},
            {1, rc::gen::arbitrary<std::uint64_t>()},
        });
        put_be64(bytes, field, value);
        if (*rc::gen::arbitrary<bool>()) {  // rebalance the other field to the real length
          std::size_t other = field == 4 ? 12 : 4;
          put_be64(bytes, other,
                   bytes.size() - 20 - std::min<std::uint64_t>(value, bytes.size() - 20));
        }
        break;
      }
    }
  }
  decode_is_total(bytes);
}

// SPEC 2.4: leaf descriptors rewritten to arbitrary offsets and sizes are decoded or refused
// (range_out_of_bounds, tensor_size_mismatch, ...), never read out of bounds.
RC_BOOST_PROP(decode_is_total_on_patched_descriptors_spec_2_4, ()) {
  auto bytes = encode(*gen::items(true));
  RC_PRE(bytes.size() >= 20 && bytes[0] == 'H');
  Parts parts = take_apart(bytes);
  RC_PRE(!parts.leaves.empty());
  auto ranges = parts.leaves;
  auto field = *rc::gen::weightedOneOf<std::int64_t>({
      {2, rc::gen::inRange<std::int64_t>(0, static_cast<std::int64_t>(parts.binary.size()) + 3)},
      {1, rc::gen::inRange<std::int64_t>(0, std::numeric_limits<std::int64_t>::max())},
      {1, rc::gen::just(std::numeric_limits<std::int64_t>::max())},
  });
  auto& leaf = ranges[*rc::gen::inRange<std::size_t>(0, ranges.size())];
  (*rc::gen::arbitrary<bool>() ? leaf.first : leaf.second) = field;
  auto frame = reframe(parts.metadata, ranges, parts.binary);
  decode_is_total(frame);
}

// SPEC 2.4 strict: any placement of the leaves decodes to the same items without strict;
// strict accepts it exactly when it is the encoder's placement.
RC_BOOST_PROP(strict_refuses_exactly_the_non_canonical_layouts_spec_2_4, ()) {
  auto items = *gen::items(true);
  auto bytes = encode(items);
  RC_PRE(bytes.size() >= 20 && bytes[0] == 'H');
  Parts parts = take_apart(bytes);
  const auto& leaves = parts.leaves;
  std::span<const std::uint8_t> binary = parts.binary;

  // A new layout: leaves in a random order, random gaps, random trailing bytes.
  std::vector<std::size_t> order(leaves.size());
  std::iota(order.begin(), order.end(), 0);
  if (*rc::gen::arbitrary<bool>()) {  // Fisher-Yates with generated draws (shrinks to identity)
    for (std::size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[*rc::gen::inRange<std::size_t>(0, i)]);
    }
  }
  std::vector<std::int64_t> offsets(leaves.size());
  std::vector<std::uint8_t> region;
  for (std::size_t i : order) {
    auto gap = *rc::gen::weightedOneOf<std::size_t>(
        {{4, rc::gen::just<std::size_t>(0)}, {1, rc::gen::inRange<std::size_t>(1, 5)}});
    region.insert(region.end(), gap, 0xEE);
    offsets[i] = static_cast<std::int64_t>(region.size());
    auto leaf = binary.subspan(static_cast<std::size_t>(leaves[i].first),
                               static_cast<std::size_t>(leaves[i].second));
    region.insert(region.end(), leaf.begin(), leaf.end());
  }
  region.insert(region.end(),
                *rc::gen::weightedOneOf<std::size_t>(
                    {{4, rc::gen::just<std::size_t>(0)}, {1, rc::gen::inRange<std::size_t>(1, 5)}}),
                0xEE);
  std::vector<Range> ranges(leaves.size());
  for (std::size_t i = 0; i < leaves.size(); ++i) ranges[i] = {offsets[i], leaves[i].second};
  auto frame = reframe(parts.metadata, ranges, region);

  bool canonical = region.size() == binary.size();
  std::int64_t cursor = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    canonical = canonical && offsets[i] == cursor;
    cursor += leaves[i].second;
  }
  RC_TAG(canonical ? "canonical" : "non-canonical");
  RC_ASSERT(same_items(decode(frame), items));
  bool strict_ok = true;
  try {
    decode(frame, true);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::non_canonical_layout);
    strict_ok = false;
  }
  RC_ASSERT(strict_ok == canonical);
}

RC_BOOST_PROP(merge_concatenates_segments_in_rank_order_spec_2_5, ()) {
  auto all = *gen::items();
  auto cuts = *rc::gen::container<std::vector<std::size_t>>(
      rc::gen::inRange<std::size_t>(0, all.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::uint8_t> received;
  std::vector<std::uint64_t> splits;
  std::size_t start = 0;
  cuts.push_back(all.size());
  for (std::size_t cut : cuts) {
    std::vector<Item> part(all.begin() + static_cast<std::ptrdiff_t>(start),
                           all.begin() + static_cast<std::ptrdiff_t>(cut));
    auto seg = encode(part);
    splits.push_back(seg.size());
    received.insert(received.end(), seg.begin(), seg.end());
    start = cut;
  }
  auto buffer = SharedBytes::adopt(std::move(received));
  RC_ASSERT(same_items(merge_received(buffer, splits), all));
  // The same key in two segments is refused (a NaN key equals nothing, as in Python).
  if (!all.empty() && key_equal(all.front().first, all.front().first)) {
    auto dup = encode(std::vector<Item>{all.front()});
    std::vector<std::uint8_t> twice(buffer.span().begin(), buffer.span().end());
    twice.insert(twice.end(), dup.begin(), dup.end());
    splits.push_back(dup.size());
    try {
      merge_received(SharedBytes::adopt(std::move(twice)), splits);
      RC_FAIL("a key arriving twice was accepted");
    } catch (const Error& e) {
      RC_ASSERT(e.code() == Errc::duplicate_payload_key);
    }
  }
}

RC_BOOST_PROP(pickle_write_read_round_trip_and_golden_stability_spec_2_3, ()) {
  // Tensor-free Values (tensors never appear in a pickle).
  auto v = *rc::gen::suchThat(gen::value(4), [](const Value& x) {
    std::function<bool(const Value&)> has_tensor = [&](const Value& y) {
      if (y.is(ValueKind::tensor)) return true;
      if (y.is(ValueKind::tuple) || y.is(ValueKind::list)) {
        return std::any_of(y.items().begin(), y.items().end(), has_tensor);
      }
      if (y.is(ValueKind::mapping)) {
        for (const auto& e : y.entries())
          if (has_tensor(e.second)) return true;
      }
      return false;
    };
    return !has_tensor(x);
  });
  std::string bytes = write_pickle(v);
  Value back = read_pickle(bytes);
  RC_ASSERT(back == v);
  RC_ASSERT(write_pickle(back) == bytes);
}

RC_BOOST_PROP(key_hash_agrees_with_key_equality_spec_1_1, ()) {
  auto a = *gen::key(2);
  // b: another key, a itself, or a numeric twin of a of another type (1 ~ 1.0 ~ True).
  Value twin = a;
  if (a.is(ValueKind::integer)) twin = Value::floating(static_cast<double>(a.as_int()));
  if (a.is(ValueKind::boolean)) twin = Value::integer(a.as_bool() ? 1 : 0);
  if (a.is(ValueKind::floating) && a.as_float() == 0.0) twin = Value::floating(-a.as_float());
  if (a.is(ValueKind::tuple) && !a.items().empty() && a.items()[0].is(ValueKind::integer)) {
    std::vector<Value> items(a.items().begin(), a.items().end());
    items[0] = Value::floating(static_cast<double>(items[0].as_int()));
    twin = Value::tuple(std::move(items));
  }
  auto b = *rc::gen::oneOf(gen::key(2), rc::gen::just(a), rc::gen::just(twin));
  RC_TAG(key_equal(a, b) ? "equal" : "different");
  RC_ASSERT(key_equal(a, b) == key_equal(b, a));
  if (key_equal(a, b)) RC_ASSERT(key_hash(a) == key_hash(b));
}

// SPEC 2.3 limits: nesting d is accepted exactly when d <= the configured depth limit.
RC_BOOST_PROP(deep_nesting_hits_the_depth_limit_spec_2_3, ()) {
  int depth = *rc::gen::inRange(1, 400);
  PickleReadOptions options;
  options.limits.max_depth = *rc::gen::element(256, depth, depth - 1, depth + 1);
  std::string p = "\x80\x05";
  if (*rc::gen::arbitrary<bool>()) {  // nested lists: d EMPTY_LISTs, d-1 APPENDs
    p.append(static_cast<std::size_t>(depth), ']');
    p.append(static_cast<std::size_t>(depth - 1), 'a');
  } else {  // nested tuples: EMPTY_TUPLE, d-1 TUPLE1s
    p += ')';
    p.append(static_cast<std::size_t>(depth - 1), '\x85');
  }
  p += ".";
  RC_TAG(depth <= options.limits.max_depth ? "within the limit" : "over the limit");
  try {
    Value v = read_pickle(p, options);
    RC_ASSERT(depth <= options.limits.max_depth);
    RC_ASSERT(v.depth() == depth);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::pickle_depth_limit);
    RC_ASSERT(depth > options.limits.max_depth);
  }
}

// SPEC 2.3 limits: memo references count as copies, so a bomb of b-way fetches over k levels
// is refused exactly when its expanded size exceeds the node limit, and never expanded.
RC_BOOST_PROP(memo_bombs_hit_the_node_limit_spec_2_3, ()) {
  int branching = *rc::gen::inRange(2, 9);
  int levels = *rc::gen::inRange(1, 14);
  std::uint64_t expanded = 1;
  for (int level = 1; level <= levels; ++level)
    expanded = 1 + static_cast<std::uint64_t>(branching) * expanded;
  PickleReadOptions options;  // a limit at, just below or just above the expansion, or the default
  options.limits.max_nodes =
      *rc::gen::element<std::uint64_t>(16u << 20, expanded, expanded - 1, expanded + 1);
  std::string p =
      "\x80\x05N\x94"
      "0";
  expanded = 1;
  bool fits = expanded <= options.limits.max_nodes;
  for (int level = 1; level <= levels; ++level) {
    p += "(";
    for (int k = 0; k < branching; ++k) {
      p += 'j';  // LONG_BINGET(level - 1)
      p += std::string{static_cast<char>(level - 1), 0, 0, 0};
    }
    p += "t\x94"
         "0";
    expanded = 1 + static_cast<std::uint64_t>(branching) * expanded;
    fits = fits && expanded <= options.limits.max_nodes;
  }
  p += "j" + std::string{static_cast<char>(levels), 0, 0, 0} + ".";
  RC_TAG(fits ? "fits" : "over the limit");
  try {
    Value v = read_pickle(p, options);
    RC_ASSERT(fits);
    RC_ASSERT(v.node_count() == expanded);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::pickle_node_limit);
    RC_ASSERT(!fits);
  }
}

// SPEC 2.3/2.6: the encoder refuses exactly what the reader would refuse, so whatever
// encodes decodes.
RC_BOOST_PROP(whatever_encodes_decodes_spec_2_6, ()) {
  int depth = *rc::gen::inRange(60, 280);
  Value v = *rc::gen::oneOf(rc::gen::just(Value::integer(1)),
                            rc::gen::just(Value::bytes(std::string_view("x"))));
  for (int i = 0; i < depth; ++i) {
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        v = Value::list({v});
        break;
      case 1:
        v = Value::tuple({v, Value()});
        break;
      default:
        v = Value::mapping({{Value::string("k"), v}});
        break;
    }
  }
  std::vector<Item> items = {{Value::tuple({Value::integer(1), Value::integer(0)}), v}};
  std::vector<std::uint8_t> bytes;
  try {
    bytes = encode(items);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::depth_limit);
    RC_TAG("refused");
    // Exactly: written past the limit (a writer allowed deeper), the reader refuses it.
    EncodeOptions deeper;
    deeper.max_depth = 1000;
    std::vector<std::uint8_t> written = encode_segment(items, deeper);
    try {
      decode(written);
      RC_FAIL("the encoder refused a value whose segment the decoder reads");
    } catch (const Error& r) {
      RC_ASSERT(r.code() == Errc::pickle_depth_limit);
    }
    return;
  }
  RC_TAG("encoded");
  RC_ASSERT(same_items(decode(bytes), items));
}

// SPEC 2.3, whatever encodes decodes (issue 10: write_pickle wrote depth 300 that
// read_pickle refused): under the same limits the writer accepts a Value exactly when the
// reader accepts the writer's bytes for it, for the depth and the stack limits.
RC_BOOST_PROP(pickle_writer_refuses_exactly_what_the_reader_refuses_spec_2_3, ()) {
  int levels = *rc::gen::inRange(0, 12);
  Value v = Value::integer(7);
  for (int level = 0; level < levels; ++level) {
    auto width = static_cast<std::size_t>(*rc::gen::inRange(1, 8));
    std::vector<Value> children(width, Value());
    children[*rc::gen::inRange<std::size_t>(0, width)] = v;
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        v = Value::list(std::move(children));
        break;
      case 1:
        v = Value::tuple(std::move(children));
        break;
      default: {
        std::vector<Value::Entry> entries;
        for (std::size_t i = 0; i < width; ++i) {
          entries.emplace_back(Value::integer(static_cast<std::int64_t>(i)), children[i]);
        }
        v = Value::mapping(std::move(entries));
      }
    }
  }
  PickleLimits limits;
  limits.max_depth = std::max(0, v.depth() + *rc::gen::inRange(-1, 2));
  limits.max_stack = static_cast<std::uint64_t>(*rc::gen::inRange(1, 40));
  PickleLimits generous;
  generous.max_depth = 1000;
  std::string bytes = write_pickle(v, generous);
  PickleReadOptions read_options;
  read_options.limits = limits;
  bool read_ok = true;
  try {
    RC_ASSERT(read_pickle(bytes, read_options) == v);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::pickle_depth_limit || e.code() == Errc::pickle_stack_limit);
    read_ok = false;
  }
  bool write_ok = true;
  try {
    RC_ASSERT(write_pickle(v, limits) == bytes);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == Errc::depth_limit || e.code() == Errc::pickle_stack_limit);
    write_ok = false;
  }
  RC_TAG(write_ok ? "written" : "refused");
  RC_ASSERT(read_ok == write_ok);
}
