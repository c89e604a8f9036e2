// Fuzz target segment_decode: arbitrary bytes as one received segment (SPEC 2.1-2.4).
// Checks: decoding refuses only with hpref::Error; strict decoding accepts a subset of what
// plain decoding accepts, with equal items, and refuses the rest only for their layout;
// whatever decodes re-encodes (unless the format cannot carry it: depth) and SPEC 2.6
// holds for the encoder's bytes, decode(encode(decode(s))) == decode(s), including with
// the Python key-class shim on the writing side. Issue 15: decode_segment (its fast path
// first) and the general decoder agree on every input: the same items, or the same refusal,
// kind and message; the fast path alone declines or returns the general decoder's items.
// Where leaves point (SPEC 2.1, 2.4; tensor.hpp: a decoded tensor shares the received
// buffer): each decoder, run on a SharedBytes copy, gives items whose tensor/bytes leaves
// that view the segment lie inside a framed segment's binary region [20 + metadata_size,
// size); under `strict` those leaves, in depth-first order, tile the region exactly; a legacy
// segment's leaves never view it. The header sizes are parsed here, not by the library.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "hpref/codec.hpp"
#include "hpref/detail/codec_paths.hpp"
#include "hpref/sample_key.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

struct Result {
  std::optional<std::vector<Item>> items;
  std::string refusal;  // "kind: message"
};

template <class F>
Result result_of(F&& decode) {
  try {
    return {decode(), ""};
  } catch (const Error& e) {
    return {std::nullopt, std::string(errc_name(e.code())) + ": " + e.what()};
  }
}

// Calls visit(leaf) on each binary leaf (tensor storage, bytes, bytearray) of an item
// value, depth-first with mapping entries in order: the order the encoder lays them out
// (SPEC 2.2). Keys are not leaves. Nothing is copied: a memo-shared value can have far
// more logical leaves than the segment has bytes (callers bound the walk: small_enough).
template <class Visit>
void for_each_leaf(const Value& v, std::size_t& index, Visit& visit) {
  switch (v.kind()) {
    case ValueKind::tensor:
      visit(index++, v.as_tensor().storage());
      break;
    case ValueKind::bytes:
    case ValueKind::bytearray:
      visit(index++, v.as_bytes());
      break;
    case ValueKind::tuple:
    case ValueKind::list:
      for (const Value& child : v.items()) for_each_leaf(child, index, visit);
      break;
    case ValueKind::mapping:
      for (const auto& [key, child] : v.entries()) for_each_leaf(child, index, visit);
      break;
    default:
      break;
  }
}

template <class Visit>
void for_each_leaf(std::span<const Item> items, Visit visit) {
  std::size_t index = 0;
  for (const Item& item : items) for_each_leaf(item.second, index, visit);
}

std::uint64_t big_endian_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// `items` were decoded from `segment` (with `strict` or not). A leaf views the segment
// when it shares its owner; its offset is then where its bytes start in the segment.
void check_leaf_ranges(const SharedBytes& segment, std::span<const Item> items, bool strict,
                       const char* decoder) {
  const std::size_t size = segment.size();
  auto views = [&](const SharedBytes& leaf) {
    return size > 0 && leaf.owner() && leaf.owner() == segment.owner() &&
           leaf.data() >= segment.data() && leaf.data() <= segment.data() + size;
  };
  const std::string who = std::string(decoder) + (strict ? " (strict)" : "");
  bool framed = size >= 4 && std::memcmp(segment.data(), "HPB1", 4) == 0;
  if (!framed) {
    // Empty or legacy: every value comes out of the pickle, which copies.
    for_each_leaf(items, [&](std::size_t, const SharedBytes& leaf) {
      HPREF_FUZZ_REQUIRE(!views(leaf),
                         who + ": a leaf of a legacy segment views the segment's bytes");
    });
    return;
  }
  // SPEC 2.1: a decodable framed segment is a 20-byte header, metadata_size bytes of
  // pickle, binary_size bytes of binary region, and nothing else.
  HPREF_FUZZ_REQUIRE(size >= 20, who + ": decoded a framed segment under 20 bytes");
  std::uint64_t meta = big_endian_u64(segment.data() + 4);
  std::uint64_t binary = big_endian_u64(segment.data() + 12);
  HPREF_FUZZ_REQUIRE(meta <= size - 20 && binary == size - 20 - meta,
                     who + ": decoded a framed segment whose sizes (" + std::to_string(meta) +
                         ", " + std::to_string(binary) + ") do not add up to " +
                         std::to_string(size));
  const std::size_t lo = 20 + static_cast<std::size_t>(meta);
  std::size_t cursor = lo;  // strict: where the next leaf must start
  for_each_leaf(items, [&](std::size_t i, const SharedBytes& leaf) {
    if (!views(leaf)) return;  // a copy (an __hp_value__ bytes, an empty leaf)
    auto offset = static_cast<std::size_t>(leaf.data() - segment.data());
    HPREF_FUZZ_REQUIRE(offset >= lo && leaf.size() <= size - offset,
                       who + ": leaf " + std::to_string(i) + " views [" + std::to_string(offset) +
                           ", +" + std::to_string(leaf.size()) + ") outside the binary region [" +
                           std::to_string(lo) + ", " + std::to_string(size) + ")");
    if (strict) {
      HPREF_FUZZ_REQUIRE(offset == cursor, who + ": strict leaf " + std::to_string(i) +
                                               " starts at " + std::to_string(offset) +
                                               ", not where the previous ended (" +
                                               std::to_string(cursor) + ")");
      cursor += leaf.size();
    }
  });
  if (strict) {
    HPREF_FUZZ_REQUIRE(cursor == size, who + ": strict leaves end at " + std::to_string(cursor) +
                                           ", not at the segment's end " + std::to_string(size));
  }
}

void check_fast_path(std::span<const std::uint8_t> bytes, const DecodeOptions& options) {
  SharedBytes segment = SharedBytes::copy_of(bytes);
  Result general = result_of([&] { return detail::decode_segment_general(segment, options); });
  Result combined = result_of([&] { return decode_segment(segment, options); });
  auto fast = detail::decode_segment_fast(segment, options);
  // Leaf ranges for values of at most kRoundTripBudget logical nodes (node_count counts a
  // memo-shared child per use, so the walk is bounded; large tensors and bytes still count
  // one node each, so big-but-plain segments are checked).
  auto leaves_checked = [&](const std::vector<Item>& items, const char* decoder) {
    std::uint64_t nodes = 0;
    for (const Item& item : items) {
      if (__builtin_add_overflow(nodes, item.second.node_count(), &nodes)) return;
    }
    if (nodes <= static_cast<std::uint64_t>(kRoundTripBudget)) {
      check_leaf_ranges(segment, items, options.strict, decoder);
    }
  };
  if (general.items) leaves_checked(*general.items, "the general decoder");
  if (combined.items) leaves_checked(*combined.items, "decode_segment");
  if (fast) leaves_checked(*fast, "the fast path");
  if (fast) {
    HPREF_FUZZ_REQUIRE(general.items, "the fast path decoded what the general decoder refused: " +
                                          general.refusal);
    HPREF_FUZZ_REQUIRE(items_equal(*fast, *general.items),
                       "the fast path and the general decoder disagree");
  }
  if (general.items) {
    HPREF_FUZZ_REQUIRE(combined.items && items_equal(*combined.items, *general.items),
                       "decode_segment and the general decoder disagree");
  } else {
    HPREF_FUZZ_REQUIRE(combined.refusal == general.refusal,
                       "decode_segment refused with '" + combined.refusal +
                           "', the general decoder with '" + general.refusal + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RssBound rss("segment_decode", size);
  std::span<const std::uint8_t> segment(data, size);
  DecodeOptions loose_options;
  DecodeOptions strict_options;
  strict_options.strict = true;

  auto loose = attempt("decode_segment", [&] { return decode_segment(segment, loose_options); });
  auto strict =
      attempt("decode_segment(strict)", [&] { return decode_segment(segment, strict_options); });

  check_fast_path(segment, loose_options);
  check_fast_path(segment, strict_options);

  // SPEC 2.4: strict only adds the layout rule.
  if (strict) {
    HPREF_FUZZ_REQUIRE(loose, "strict decoding accepted what plain decoding refused with " +
                                  kind_text(loose.error));
    HPREF_FUZZ_REQUIRE(items_equal(*strict.value, *loose.value),
                       "strict and plain decoding disagree");
  } else if (loose) {
    HPREF_FUZZ_REQUIRE(*strict.error == Errc::non_canonical_layout,
                       "strict decoding refused a decodable segment with " +
                           kind_text(strict.error) + ", not non_canonical_layout");
  } else {
    HPREF_FUZZ_REQUIRE(*strict.error == *loose.error,
                       "strict and plain decoding refuse with different kinds: " +
                           kind_text(strict.error) + " vs " + kind_text(loose.error));
  }
  if (!loose) return 0;
  const std::vector<Item>& items = *loose.value;

  // Decoding never yields an unhashable key (SPEC 1.4), and the header agrees.
  for (const Item& item : items) {
    HPREF_FUZZ_REQUIRE(item.first.is_hashable(), "decoded an unhashable key");
  }
  auto header = attempt("read_segment_header", [&] { return read_segment_header(segment); });
  HPREF_FUZZ_REQUIRE(header, "a decodable segment has an unreadable header");
  HPREF_FUZZ_REQUIRE((header.value->kind == SegmentHeader::Kind::empty) == (size == 0),
                     "header kind 'empty' disagrees with the segment size");

  if (!small_enough(items)) return 0;
  // SPEC 2.6: a decoded value may nest deeper once framed (each container becomes a
  // schema node of two levels), so depth_limit is the one refusal the encoder may make.
  auto encoded = check_encode_round_trip(items, {Errc::depth_limit});
  if (!encoded) return 0;
  EncodeOptions python_keys;
  python_keys.key_class = std::string(kDefaultKeyClass);
  check_encode_round_trip(items, {Errc::depth_limit}, python_keys);
  return 0;
}
