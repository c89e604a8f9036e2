// Fuzz target segment_decode: arbitrary bytes as one received segment (SPEC 2.1-2.4).
// Checks: decoding refuses only with hpref::Error; strict decoding accepts a subset of what
// plain decoding accepts, with equal items, and refuses the rest only for their layout;
// whatever decodes re-encodes (unless the format cannot carry it: depth) and SPEC 2.6
// holds for the encoder's bytes, decode(encode(decode(s))) == decode(s), including with
// the Python key-class shim on the writing side. Issue 15: decode_segment (its fast path
// first) and the general decoder agree on every input: the same items, or the same refusal,
// kind and message; the fast path alone declines or returns the general decoder's items.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

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

void check_fast_path(std::span<const std::uint8_t> bytes, const DecodeOptions& options) {
  SharedBytes segment = SharedBytes::copy_of(bytes);
  Result general = result_of([&] { return detail::decode_segment_general(segment, options); });
  Result combined = result_of([&] { return decode_segment(segment, options); });
  auto fast = detail::decode_segment_fast(segment, options);
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
