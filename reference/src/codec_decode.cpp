// Segment decoding (SPEC 2.1, 2.2, 2.4) and merging (SPEC 2.5). Every check of SPEC
// 2.4 is its own error kind, in the order the Python original makes them. Leaves are
// views of the segment buffer; schema nodes shared through the pickle memo decode once
// and are shared in the result, so memory stays proportional to the input.
#include <unordered_map>

#include "hpref/codec.hpp"
#include "hpref/detail/codec_paths.hpp"
#include "hpref/detail/value_access.hpp"
#include "hpref/error.hpp"
#include "hpref/repr.hpp"

namespace hpref {
namespace {

constexpr std::string_view kTensorTag = "__hp_tensor__";
constexpr std::string_view kBytesTag = "__hp_bytes__";
constexpr std::string_view kByteArrayTag = "__hp_bytearray__";
constexpr std::string_view kMappingTag = "__hp_mapping__";
constexpr std::string_view kTupleTag = "__hp_tuple__";
constexpr std::string_view kListTag = "__hp_list__";
constexpr std::string_view kValueTag = "__hp_value__";

std::uint64_t read_be64(const std::uint8_t* p) {
  std::uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | p[i];
  return x;
}

bool is_sequence(const Value& v) { return v.is(ValueKind::tuple) || v.is(ValueKind::list); }

bool is_pair(const Value& v) { return is_sequence(v) && v.items().size() == 2; }

// A non-negative int that is not a bool (SPEC 2.4 divergence).
bool is_count(const Value& v) { return v.is(ValueKind::integer) && v.as_int() >= 0; }

// Checks that `pairs` is a sequence of (hashable key, value) pairs and returns them.
std::span<const Value> checked_pairs(const Value& pairs, const char* what) {
  if (!is_sequence(pairs)) {
    throw Error(Errc::metadata_not_pairs, std::string(what) + " must be a sequence of " +
                                              "(key, value) pairs, got " + repr(pairs, 60));
  }
  for (const Value& pair : pairs.items()) {
    if (!is_pair(pair)) {
      throw Error(Errc::metadata_not_pairs,
                  std::string(what) + " entry " + repr(pair, 60) + " is not a (key, value) pair");
    }
    const Value& key = pair.items()[0];
    if (!key.is_hashable()) {
      throw Error(Errc::unhashable_key, "item key " + repr(key, 60) + " of type " +
                                            std::string(value_kind_name(key.kind())) +
                                            " is not hashable");
    }
  }
  return pairs.items();
}

class SchemaDecoder {
 public:
  // `work_budget`: what comparing and hashing mapping keys may cost in all (SPEC 2.4).
  SchemaDecoder(const SharedBytes& binary, std::uint64_t work_budget)
      : work_budget_(work_budget), binary_(binary) {}

  Value decode(const Value& schema) {
    bool shared = schema.is_container() && detail::ValueAccess::use_count(schema) > 1;
    if (shared) {
      auto it = cache_.find(schema.node_identity());
      if (it != cache_.end()) return it->second;
    }
    Value out = decode_node(schema);
    if (shared) cache_.emplace(schema.node_identity(), out);
    return out;
  }

  // SPEC 2.4 strict: leaves in depth-first order, contiguous from 0, covering the region.
  void check_layout(const Value& schema) {
    const Value& tag = schema.items()[0];
    std::string_view t = tag.as_str();
    if (t == kTensorTag || t == kBytesTag || t == kByteArrayTag) {
      auto f = schema.items();
      std::int64_t offset = f[f.size() - 2].as_int();
      std::int64_t size = f[f.size() - 1].as_int();
      if (static_cast<std::uint64_t>(offset) != cursor_) {
        throw Error(Errc::non_canonical_layout,
                    "strict decoding: a " + std::string(t) + " leaf starts at offset " +
                        std::to_string(offset) + " but the encoder would place it at " +
                        std::to_string(cursor_));
      }
      cursor_ += static_cast<std::uint64_t>(size);
    } else if (t == kMappingTag) {
      for (const Value& pair : schema.items()[1].items()) check_layout(pair.items()[1]);
    } else if (t == kTupleTag || t == kListTag) {
      for (const Value& child : schema.items()[1].items()) check_layout(child);
    }
  }

  void finish_layout() const {
    if (cursor_ != binary_.size()) {
      throw Error(Errc::non_canonical_layout,
                  "strict decoding: the leaves cover " + std::to_string(cursor_) +
                      " bytes but the binary region holds " + std::to_string(binary_.size()));
    }
  }

 private:
  // A long key shared by memo references is compared and hashed again in every mapping
  // that holds it: its length counts against the budget at every use.
  void spend_key_work(const Value& key) {
    std::uint64_t units = key_work_units(key);
    if (units > work_budget_ - work_) {
      throw Error(
          Errc::pickle_node_limit,
          "mapping keys would bring the decoder's work past " + std::to_string(work_budget_) +
              " units (the node limit plus the segment's size): a long key repeated in many "
              "__hp_mapping__ nodes?");
    }
    work_ += units;
  }
  std::uint64_t work_budget_;
  std::uint64_t work_ = 0;

  Value decode_node(const Value& schema) {
    if (!schema.is(ValueKind::tuple) || schema.items().empty()) {
      throw Error(Errc::invalid_schema_node,
                  "schema node " + repr(schema, 60) + " is not a non-empty tuple");
    }
    auto f = schema.items();
    const Value& tag = f[0];
    std::string_view t = tag.is(ValueKind::string) ? tag.as_str() : std::string_view();
    if (tag.is(ValueKind::string)) {
      if (t == kTensorTag) return tensor(f);
      if (t == kBytesTag || t == kByteArrayTag) return bytes(f, t == kByteArrayTag);
      if (t == kMappingTag) return mapping(f);
      if (t == kTupleTag || t == kListTag) return sequence(f, t == kTupleTag);
      if (t == kValueTag) {
        need_at_least(f, 2, t);
        return f[1];
      }
    }
    throw Error(Errc::unknown_schema_tag, "unknown schema tag " + repr(tag, 60));
  }

  static void need_at_least(std::span<const Value> f, std::size_t n, std::string_view tag) {
    if (f.size() < n) {
      throw Error(Errc::schema_field_count, std::string(tag) + " node has " +
                                                std::to_string(f.size()) +
                                                " fields, needs at least " + std::to_string(n));
    }
  }

  static void need_exactly(std::span<const Value> f, std::size_t n, std::string_view tag) {
    if (f.size() != n) {
      throw Error(Errc::schema_field_count, std::string(tag) + " node has " +
                                                std::to_string(f.size()) +
                                                " fields, needs exactly " + std::to_string(n));
    }
  }

  // Checks offset and size (SPEC 2.4) and returns the leaf's bytes.
  SharedBytes range(const Value& offset, const Value& size, std::string_view tag) {
    if (!is_count(offset) || !is_count(size)) {
      throw Error(Errc::invalid_byte_range, std::string(tag) + " descriptor has an invalid byte " +
                                                "range: offset " + repr(offset, 40) + ", size " +
                                                repr(size, 40));
    }
    auto off = static_cast<std::uint64_t>(offset.as_int());
    auto len = static_cast<std::uint64_t>(size.as_int());
    if (off > binary_.size() || len > binary_.size() - off) {
      throw Error(Errc::range_out_of_bounds,
                  std::string(tag) + " range [" + std::to_string(off) + ", " + std::to_string(off) +
                      " + " + std::to_string(len) + ") lies past the binary region of " +
                      std::to_string(binary_.size()) + " bytes");
    }
    return binary_.slice(static_cast<std::size_t>(off), static_cast<std::size_t>(len));
  }

  std::shared_ptr<const std::vector<std::int64_t>> shape_of(const Value& shape) {
    if (!is_sequence(shape)) {
      throw Error(Errc::invalid_shape, "tensor shape " + repr(shape, 60) +
                                           " is not a tuple or list of non-negative ints");
    }
    bool shared = detail::ValueAccess::use_count(shape) > 1;
    if (shared) {
      auto it = shapes_.find(shape.node_identity());
      if (it != shapes_.end()) return it->second;
    }
    if (same_dims(shape, last_dims_))
      return last_dims_;  // tensors of a segment often share a shape
    auto dims = std::make_shared<std::vector<std::int64_t>>();
    dims->reserve(shape.items().size());
    for (const Value& d : shape.items()) {
      if (!is_count(d)) {
        throw Error(Errc::invalid_shape, "tensor shape " + repr(shape, 60) +
                                             " has an entry that is not a non-negative int");
      }
      dims->push_back(d.as_int());
    }
    if (shared) shapes_.emplace(shape.node_identity(), dims);
    last_dims_ = dims;
    return dims;
  }

  static bool same_dims(const Value& shape,
                        const std::shared_ptr<const std::vector<std::int64_t>>& dims) {
    if (!dims || dims->size() != shape.items().size()) return false;
    for (std::size_t i = 0; i < dims->size(); ++i) {
      const Value& d = shape.items()[i];
      if (!is_count(d) || d.as_int() != (*dims)[i]) return false;
    }
    return true;
  }

  Value tensor(std::span<const Value> f) {
    need_exactly(f, 5, kTensorTag);
    if (!f[1].is(ValueKind::string)) {
      throw Error(Errc::invalid_dtype, "tensor dtype " + repr(f[1], 60) + " is not a string");
    }
    DType dtype = parse_dtype(f[1].as_str());
    auto dims = shape_of(f[2]);
    SharedBytes bytes = range(f[3], f[4], kTensorTag);
    auto numel = checked_numel(*dims);
    std::int64_t expected = 0;
    if (!numel ||
        __builtin_mul_overflow(*numel, static_cast<std::int64_t>(element_size(dtype)), &expected)) {
      throw Error(Errc::tensor_size_mismatch, "tensor byte size mismatch: shape " + repr(f[2], 60) +
                                                  " has more elements than int64 can count, got " +
                                                  std::to_string(bytes.size()) + " bytes");
    }
    if (static_cast<std::uint64_t>(expected) != bytes.size()) {
      throw Error(Errc::tensor_size_mismatch, "tensor byte size mismatch: expected " +
                                                  std::to_string(expected) + ", got " +
                                                  std::to_string(bytes.size()));
    }
    return Value::tensor(Tensor(dtype, std::move(dims), std::move(bytes)));
  }

  Value bytes(std::span<const Value> f, bool bytearray) {
    std::string_view tag = bytearray ? kByteArrayTag : kBytesTag;
    need_exactly(f, 3, tag);
    SharedBytes b = range(f[1], f[2], tag);
    return bytearray ? Value::bytearray(std::move(b)) : Value::bytes(std::move(b));
  }

  static const Value& children(std::span<const Value> f, std::string_view tag) {
    need_at_least(f, 2, tag);
    if (!is_sequence(f[1])) {
      throw Error(Errc::invalid_schema_node,
                  std::string(tag) + " children " + repr(f[1], 60) + " are not a tuple or list");
    }
    return f[1];
  }

  Value sequence(std::span<const Value> f, bool tuple) {
    const Value& kids = children(f, tuple ? kTupleTag : kListTag);
    std::vector<Value> out;
    out.reserve(kids.items().size());
    for (const Value& child : kids.items()) out.push_back(decode(child));
    return tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }

  Value mapping(std::span<const Value> f) {
    const Value& entries = children(f, kMappingTag);
    Value out = Value::mapping({});
    std::size_t count = entries.items().size();
    detail::ValueAccess::reserve(out, count);
    MappingKeys keys;
    for (const Value& pair : entries.items()) {
      if (!is_pair(pair)) {
        throw Error(Errc::invalid_schema_node,
                    "__hp_mapping__ entry " + repr(pair, 60) + " is not a (key, child) pair");
      }
      const Value& key = pair.items()[0];
      if (!key.is_hashable()) {
        throw Error(Errc::unhashable_key, "mapping key " + repr(key, 60) + " of type " +
                                              std::string(value_kind_name(key.kind())) +
                                              " is not hashable");
      }
      Value child = decode(pair.items()[1]);
      spend_key_work(key);
      if (keys.repeats(out.entries(), key)) {
        throw Error(Errc::duplicate_mapping_key,
                    "mapping key " + repr(key, 60) + " appears twice in one __hp_mapping__ node");
      }
      detail::ValueAccess::add_entry(out, key, std::move(child));
    }
    return out;
  }

  const SharedBytes& binary_;
  std::uint64_t cursor_ = 0;
  std::unordered_map<const void*, Value, SeededHash> cache_;
  std::unordered_map<const void*, std::shared_ptr<const std::vector<std::int64_t>>, SeededHash>
      shapes_;
  std::shared_ptr<const std::vector<std::int64_t>> last_dims_;  // the shape decoded last
};

}  // namespace

SegmentHeader read_segment_header(std::span<const std::uint8_t> segment) {
  SegmentHeader h;
  if (segment.empty()) return h;
  if (segment.size() < 4 || std::memcmp(segment.data(), kFrameMagic.data(), 4) != 0) {
    h.kind = SegmentHeader::Kind::legacy;
    h.metadata_size = segment.size();
    return h;
  }
  if (segment.size() < kFrameHeaderSize) {
    throw Error(Errc::truncated_header, "segment starts with HPB1 but holds only " +
                                            std::to_string(segment.size()) +
                                            " bytes, fewer than the 20-byte header");
  }
  h.kind = SegmentHeader::Kind::framed;
  h.metadata_size = read_be64(segment.data() + 4);
  h.binary_size = read_be64(segment.data() + 12);
  std::uint64_t total = kFrameHeaderSize;
  if (__builtin_add_overflow(total, h.metadata_size, &total) ||
      __builtin_add_overflow(total, h.binary_size, &total) || total != segment.size()) {
    throw Error(Errc::frame_size_mismatch,
                "frame header announces 20 + " + std::to_string(h.metadata_size) + " + " +
                    std::to_string(h.binary_size) + " bytes but the segment holds " +
                    std::to_string(segment.size()));
  }
  return h;
}

namespace detail {

std::vector<Item> decode_segment_general(const SharedBytes& segment, const DecodeOptions& options) {
  SegmentHeader h = read_segment_header(segment.span());
  switch (h.kind) {
    case SegmentHeader::Kind::empty:
      return {};
    case SegmentHeader::Kind::legacy: {
      Value legacy = read_pickle(segment.span(), options.pickle);
      std::vector<Item> out;
      for (const Value& pair : checked_pairs(legacy, "legacy segment")) {
        out.emplace_back(pair.items()[0], pair.items()[1]);
      }
      return out;
    }
    case SegmentHeader::Kind::framed:
      break;
  }
  auto meta_size = static_cast<std::size_t>(h.metadata_size);
  Value metadata = read_pickle(segment.span().subspan(kFrameHeaderSize, meta_size), options.pickle);
  std::span<const Value> pairs = checked_pairs(metadata, "frame metadata");
  SharedBytes binary =
      segment.slice(kFrameHeaderSize + meta_size, static_cast<std::size_t>(h.binary_size));
  SchemaDecoder decoder(binary, options.pickle.limits.max_nodes + segment.size());
  std::vector<Item> out;
  out.reserve(pairs.size());
  for (const Value& pair : pairs)
    out.emplace_back(pair.items()[0], decoder.decode(pair.items()[1]));
  if (options.strict) {
    for (const Value& pair : pairs) decoder.check_layout(pair.items()[1]);
    decoder.finish_layout();
  }
  return out;
}

}  // namespace detail

// The fast path (codec_fast.cpp) decodes what it fully understands; everything else, and
// every refusal, is the general decoder's.
std::vector<Item> decode_segment(const SharedBytes& segment, const DecodeOptions& options) {
  if (auto items = detail::decode_segment_fast(segment, options)) return std::move(*items);
  return detail::decode_segment_general(segment, options);
}

std::vector<Item> decode_segment(std::span<const std::uint8_t> segment,
                                 const DecodeOptions& options) {
  return decode_segment(SharedBytes::copy_of(segment), options);
}

std::vector<Item> merge_received(const SharedBytes& received, std::span<const std::uint64_t> splits,
                                 const DecodeOptions& options) {
  std::uint64_t total = 0;
  for (std::uint64_t s : splits) {
    if (__builtin_add_overflow(total, s, &total)) {
      total = UINT64_MAX;
      break;
    }
  }
  if (total != received.size()) {
    throw Error(Errc::split_sum_mismatch,
                "received splits sum to " +
                    (total == UINT64_MAX ? std::string("more than 2^64") : std::to_string(total)) +
                    " bytes but the received buffer holds " + std::to_string(received.size()));
  }
  std::vector<Item> out;
  KeySet keys;
  std::uint64_t work = 0;  // of comparing and hashing item keys (SPEC 2.4)
  const std::uint64_t budget = options.pickle.limits.max_nodes + received.size();
  std::size_t cursor = 0;
  for (std::size_t rank = 0; rank < splits.size(); ++rank) {
    auto size = static_cast<std::size_t>(splits[rank]);
    for (Item& item : decode_segment(received.slice(cursor, size), options)) {
      std::uint64_t units = key_work_units(item.first);
      if (units > budget - work) {
        throw Error(Errc::pickle_node_limit, "item keys would bring the merge's work past " +
                                                 std::to_string(budget) +
                                                 " units (the node limit plus the buffer's size)");
      }
      work += units;
      if (!keys.insert(item.first)) {
        throw Error(Errc::duplicate_payload_key, "payload for key " + repr(item.first, 80) +
                                                     " arrived twice (again from "
                                                     "data-plane rank index " +
                                                     std::to_string(rank) + ")");
      }
      out.push_back(std::move(item));
    }
    cursor += size;
  }
  return out;
}

}  // namespace hpref
