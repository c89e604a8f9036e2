// The HPB1 payload segment (SPEC 2): the bytes one data-plane rank sends one peer in
// one exchange, an ordered list of (key, Value) items. Empty, legacy (a metadata pickle
// of the pairs) or framed ("HPB1", two big-endian u64 sizes, metadata pickle of
// (key, schema) pairs, binary region of tensor and byte leaves). Decoding returns views
// into the segment buffer (no copy) or one hpref::Error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hpref/pickle.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/value.hpp"

namespace hpref {

using Item = std::pair<Value, Value>;  // (key, value)

inline constexpr std::string_view kFrameMagic = "HPB1";
inline constexpr std::size_t kFrameHeaderSize = 20;

struct EncodeOptions {
  // Non-empty name: item keys that stand for instances of this SPEC 1.4 key class are
  // written as its object pattern (for Python peers): with the default fields, keys that
  // are valid SampleKey 2-tuples; with other fields, tuples of one value per field. Other
  // keys, and all keys under an empty name, are written as their Values. Checked
  // (KeyClass::validate) before anything is written.
  KeyClass key_class;
  // Deepest metadata pickle written (SPEC 2.3): the reader's limit, so whatever
  // encodes decodes.
  int max_depth = PickleLimits{}.max_depth;
  // Most stack entries its reader would hold (SPEC 2.3): longer tuples, lists framed as
  // (tag, children) tuples included, are refused with pickle_stack_limit.
  std::uint64_t max_stack = PickleLimits{}.max_stack;
};

struct DecodeOptions {
  // SPEC 2.4 strict: refuse any binary layout the encoder would not write.
  bool strict = false;
  PickleReadOptions pickle;
};

// An encoded segment before it is written: the metadata bytes and the leaf spans that
// will follow them. It points into the items' tensors and bytes, so it must not outlive
// them. Lets a caller size one send buffer for many segments before copying (SPEC 5.1).
class SegmentPlan {
 public:
  std::size_t size() const noexcept { return size_; }
  bool framed() const noexcept { return framed_; }
  // Writes exactly size() bytes.
  void write_to(std::span<std::uint8_t> out) const;

 private:
  friend SegmentPlan plan_segment(std::span<const Item>, const EncodeOptions&);
  bool framed_ = false;
  std::string metadata_;
  std::vector<std::span<const std::uint8_t>> leaves_;
  std::uint64_t binary_size_ = 0;
  std::size_t size_ = 0;
};

// SPEC 2.1-2.2. Throws Error (unhashable_key, depth_limit, ...) naming the path to the
// offending part, e.g. items[3].value["image"][0].
SegmentPlan plan_segment(std::span<const Item> items, const EncodeOptions& options = {});
std::vector<std::uint8_t> encode_segment(std::span<const Item> items,
                                         const EncodeOptions& options = {});
// Encodes into `out` (resized to the segment, its capacity reused).
void encode_segment_into(std::span<const Item> items, std::vector<std::uint8_t>& out,
                         const EncodeOptions& options = {});

// SPEC 2.1, 2.2, 2.4. Tensors, bytes and bytearrays in the result view `segment`.
std::vector<Item> decode_segment(const SharedBytes& segment, const DecodeOptions& options = {});
// Copies `segment` once into a buffer the result shares.
std::vector<Item> decode_segment(std::span<const std::uint8_t> segment,
                                 const DecodeOptions& options = {});

// SPEC 2.5: splits `received` in data-plane rank order (the splits must sum to its
// length), decodes each segment and concatenates the items; a key that arrives twice
// (key equality) is an error naming it.
std::vector<Item> merge_received(const SharedBytes& received, std::span<const std::uint64_t> splits,
                                 const DecodeOptions& options = {});

// The layout of a segment's outer bytes, for inspection.
struct SegmentHeader {
  enum class Kind { empty, legacy, framed };
  Kind kind = Kind::empty;
  std::uint64_t metadata_size = 0;  // framed: from the header; legacy: the whole segment
  std::uint64_t binary_size = 0;
};
// Reads and checks the header (truncated_header, frame_size_mismatch).
SegmentHeader read_segment_header(std::span<const std::uint8_t> segment);

}  // namespace hpref
