// Segment encoding (SPEC 2.1, 2.2, 2.6): legacy pickle when no item holds a binary leaf,
// else the HPB1 frame whose metadata replaces each leaf by a descriptor and whose binary
// region holds the leaves in depth-first order. Values the format cannot carry are
// refused with the path to the offending part. One PickleWriter writes the whole metadata,
// so its memo (SPEC 2.3: mapping-key strs, the key-class global) spans every item.
#include <cstring>

#include "hpref/codec.hpp"
#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/utf8.hpp"

namespace hpref {
namespace {

constexpr std::string_view kTensorTag = "__hp_tensor__";
constexpr std::string_view kBytesTag = "__hp_bytes__";
constexpr std::string_view kByteArrayTag = "__hp_bytearray__";
constexpr std::string_view kMappingTag = "__hp_mapping__";
constexpr std::string_view kTupleTag = "__hp_tuple__";
constexpr std::string_view kListTag = "__hp_list__";
constexpr std::string_view kValueTag = "__hp_value__";

// One step below items[i]: an index into a tuple/list or a key of a mapping. The steps of
// the node being written are linked on the call stack (the writer's recursion), each to
// the one above it; a path is only spelled out for an error.
struct Step {
  const Value* key = nullptr;  // mapping key, or nullptr for an index
  std::size_t index = 0;
  const Step* up = nullptr;  // the step above (nullptr: the item's value itself)
};

bool contains_binary(const Value& v) {
  switch (v.kind()) {
    case ValueKind::tensor:
    case ValueKind::bytes:
    case ValueKind::bytearray:
      return true;
    case ValueKind::tuple:
    case ValueKind::list:
      for (const Value& child : v.items()) {
        if (contains_binary(child)) return true;
      }
      return false;
    case ValueKind::mapping:
      for (const auto& entry : v.entries()) {
        if (contains_binary(entry.second)) return true;
      }
      return false;
    default:
      return false;
  }
}

PickleLimits writer_limits(const EncodeOptions& options) {
  PickleLimits limits;
  limits.max_depth = options.max_depth;
  limits.max_stack = options.max_stack;
  return limits;
}

class Encoder {
 public:
  Encoder(const EncodeOptions& options, std::string& metadata)
      : options_(options), writer_(metadata, writer_limits(options)) {}

  std::vector<std::span<const std::uint8_t>> leaves;
  std::uint64_t offset = 0;

  // Where errors are reported from: item i, at its top.
  void begin_item(std::size_t i) { item_ = i; }

  // Checks what both forms need: hashable keys, and depth (SPEC 2.3 limit) of each pair.
  void check_item(std::size_t i, const Item& item) {
    begin_item(i);
    if (!item.first.is_hashable()) {
      fail(Errc::unhashable_key,
           "items[" + std::to_string(i) + "].key " + repr(item.first) + " is not hashable");
    }
    if (2 + item.first.depth() > options_.max_depth) {
      fail(Errc::depth_limit, "items[" + std::to_string(i) + "].key nests deeper than the " +
                                  std::to_string(options_.max_depth) + "-level pickle limit");
    }
    // A pair sits at level 2; the value's own containers go deeper.
    const Value* v = &item.second;
    int level = 3;
    std::vector<Step> path;  // down to the node that is too deep, if one is
    while (v->is_container() && level - 1 + v->depth() > options_.max_depth) {
      if (level > options_.max_depth) fail_depth(path);
      v = deepest_child(*v, path);
      ++level;
    }
  }

  // SPEC 1.4: with a key class, a key that stands for one of its instances is written as
  // the class's object pattern: with the default fields a valid SampleKey 2-tuple, with
  // other fields a tuple of one value per field. Any other key is written as its Value.
  void key(const Value& k) {
    const KeyClass& kc = options_.key_class;
    if (!kc.empty()) {
      bool is_instance = kc.has_default_fields()
                             ? SampleKey::from_value(k).has_value()
                             : k.is(ValueKind::tuple) && k.items().size() == kc.fields.size();
      if (is_instance) {
        writer_.key_object(k, kc);
        return;
      }
    }
    writer_.value(k);
  }

  void plain(const Value& v) { writer_.value(v); }

  // The one writer of the metadata: it mirrors the reader's stack across the whole pickle.
  PickleWriter& writer() { return writer_; }

  // The schema node of `v`, whose tuple sits at metadata level `level`.
  void schema(const Value& v, int level, const Step* at = nullptr) {
    if (level > options_.max_depth) fail_depth(at);
    switch (v.kind()) {
      case ValueKind::tensor:
        tensor(v.as_tensor(), level, at);
        return;
      case ValueKind::bytes:
      case ValueKind::bytearray: {
        const SharedBytes& b = v.as_bytes();
        writer_.begin_tuple(3);
        writer_.str(v.is(ValueKind::bytes) ? kBytesTag : kByteArrayTag);
        leaf(b.span());
        writer_.end_tuple(3);
        return;
      }
      case ValueKind::tuple:
      case ValueKind::list:
        sequence(v, level, at);
        return;
      case ValueKind::mapping:
        mapping(v, level, at);
        return;
      default:
        writer_.begin_tuple(2);
        writer_.str(kValueTag);
        writer_.value(v);
        writer_.end_tuple(2);
        return;
    }
  }

 private:
  [[noreturn]] void fail(Errc code, const std::string& message) const {
    throw Error(code, "cannot encode segment: " + message);
  }

  [[noreturn]] void fail_depth(const std::vector<Step>& path) const {
    fail(Errc::depth_limit, path_text(path) + " nests deeper than the " +
                                std::to_string(options_.max_depth) +
                                "-level metadata pickle limit (SPEC 2.3)");
  }

  [[noreturn]] void fail_depth(const Step* at) const {
    std::vector<Step> path;
    for (; at != nullptr; at = at->up) path.insert(path.begin(), *at);
    fail_depth(path);
  }

  static const Value* deepest_child(const Value& v, std::vector<Step>& path) {
    if (v.is(ValueKind::mapping)) {
      auto entries = v.entries();
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].second.depth() + 1 == v.depth()) {
          path.push_back({&entries[i].first, i});
          return &entries[i].second;
        }
      }
      // Only a key reaches the depth: name the key's mapping.
      return &v;
    }
    auto items = v.items();
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i].depth() + 1 == v.depth()) {
        path.push_back({nullptr, i});
        return &items[i];
      }
    }
    return &v;
  }

  std::string path_text(const std::vector<Step>& path) const {
    std::string out = "items[";
    out += std::to_string(item_);
    out += "].value";
    for (const Step& s : path) {
      if (s.key == nullptr) {
        out += "[" + std::to_string(s.index) + "]";
      } else if (s.key->is(ValueKind::string)) {
        std::string text(s.key->as_str());
        std::string_view cut = utf8_prefix(text, 40);
        out += "[\"" + std::string(cut) + (cut.size() < text.size() ? "..." : "") + "\"]";
      } else {
        out += "[" + repr(*s.key, 40) + "]";
      }
    }
    return out;
  }

  void leaf(std::span<const std::uint8_t> bytes) {
    writer_.integer(static_cast<std::int64_t>(offset));
    writer_.integer(static_cast<std::int64_t>(bytes.size()));
    leaves.push_back(bytes);
    offset += bytes.size();
  }

  void tensor(const Tensor& t, int level, const Step* at) {
    if (level + 1 > options_.max_depth) fail_depth(at);
    writer_.begin_tuple(5);
    writer_.str(kTensorTag);
    writer_.str(dtype_wire_name(t.dtype()));
    writer_.begin_tuple(t.dim());
    for (std::int64_t d : t.shape()) writer_.integer(d);
    writer_.end_tuple(t.dim());
    leaf(t.bytes());
    writer_.end_tuple(5);
  }

  void sequence(const Value& v, int level, const Step* at) {
    auto items = v.items();
    if (level + 1 > options_.max_depth) fail_depth(at);
    writer_.begin_tuple(2);
    writer_.str(v.is(ValueKind::tuple) ? kTupleTag : kListTag);
    writer_.begin_tuple(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      Step step{nullptr, i, at};
      schema(items[i], level + 2, &step);
    }
    writer_.end_tuple(items.size());
    writer_.end_tuple(2);
  }

  void mapping(const Value& v, int level, const Step* at) {
    auto entries = v.entries();
    if (level + 1 > options_.max_depth) fail_depth(at);
    writer_.begin_tuple(2);
    writer_.str(kMappingTag);
    writer_.begin_tuple(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      Step step{&entries[i].first, i, at};
      if (level + 2 > options_.max_depth ||
          level + 2 + entries[i].first.depth() > options_.max_depth) {
        fail_depth(&step);
      }
      writer_.begin_tuple(2);
      writer_.mapping_key(entries[i].first);  // SPEC 2.3 memo: a user mapping's key
      schema(entries[i].second, level + 3, &step);
      writer_.end_tuple(2);
    }
    writer_.end_tuple(entries.size());
    writer_.end_tuple(2);
  }

  const EncodeOptions& options_;
  PickleWriter writer_;
  std::size_t item_ = 0;
};

void put_be64(std::uint8_t* out, std::uint64_t x) {
  for (int i = 7; i >= 0; --i) *out++ = static_cast<std::uint8_t>(x >> (8 * i));
}

}  // namespace

SegmentPlan plan_segment(std::span<const Item> items, const EncodeOptions& options) {
  SegmentPlan plan;
  options.key_class.validate();  // refused up front, even with no item to write
  if (items.empty()) return plan;
  Encoder enc(options, plan.metadata_);
  bool framed = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.check_item(i, items[i]);
    framed = framed || contains_binary(items[i].second);
  }
  PickleWriter& w = enc.writer();
  w.begin();
  w.begin_tuple(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    enc.begin_item(i);  // every item passed check_item above
    w.begin_tuple(2);
    enc.key(items[i].first);
    if (framed) {
      enc.schema(items[i].second, 3);
    } else {
      enc.plain(items[i].second);
    }
    w.end_tuple(2);
  }
  w.end_tuple(items.size());
  w.end();
  plan.framed_ = framed;
  plan.leaves_ = std::move(enc.leaves);
  plan.binary_size_ = enc.offset;
  plan.size_ = plan.metadata_.size() + (framed ? kFrameHeaderSize + plan.binary_size_ : 0);
  return plan;
}

void SegmentPlan::write_to(std::span<std::uint8_t> out) const {
  HPREF_CHECK_EQ(out.size(), size_);
  std::uint8_t* p = out.data();
  if (framed_) {
    std::memcpy(p, kFrameMagic.data(), 4);
    put_be64(p + 4, metadata_.size());
    put_be64(p + 12, binary_size_);
    p += kFrameHeaderSize;
  }
  if (!metadata_.empty()) std::memcpy(p, metadata_.data(), metadata_.size());
  p += metadata_.size();
  for (const auto& leaf : leaves_) {
    if (!leaf.empty()) std::memcpy(p, leaf.data(), leaf.size());
    p += leaf.size();
  }
}

std::vector<std::uint8_t> encode_segment(std::span<const Item> items,
                                         const EncodeOptions& options) {
  std::vector<std::uint8_t> out;
  encode_segment_into(items, out, options);
  return out;
}

void encode_segment_into(std::span<const Item> items, std::vector<std::uint8_t>& out,
                         const EncodeOptions& options) {
  SegmentPlan plan = plan_segment(items, options);
  out.resize(plan.size());
  plan.write_to(out);
}

}  // namespace hpref
