// `hpref frame` batch ops and the inspect view of a segment.
#include "hpref/cli/frame.hpp"

#include <sstream>

#include "hpref/cli/batch.hpp"
#include "hpref/error.hpp"
#include "hpref/repr.hpp"

namespace hpref::cli {
namespace {

// The SPEC 1.4 key class of a request: "key_class" (a dotted name; absent or null:
// `base`'s), "key_fields" (an array of field names) and "key_state" ("dict" or "values")
// over `base`. Fields or a state without any name are refused.
KeyClass key_class_of(const Json& request, KeyClass base) {
  if (auto it = request.find("key_class"); it != request.end() && !it->is_null()) {
    if (!it->is_string()) throw Error(Errc::invalid_request, "\"key_class\" must be a string");
    base.name = it->get<std::string>();
  }
  bool described = false;
  if (auto it = request.find("key_fields"); it != request.end() && !it->is_null()) {
    if (!it->is_array()) {
      throw Error(Errc::invalid_request, "\"key_fields\" must be an array of field names");
    }
    base.fields.clear();
    for (const Json& f : *it) {
      if (!f.is_string()) {
        throw Error(Errc::invalid_request,
                    "a \"key_fields\" entry must be a string, got " + dump_json(f));
      }
      base.fields.push_back(f.get<std::string>());
    }
    described = true;
  }
  if (auto it = request.find("key_state"); it != request.end() && !it->is_null()) {
    if (!it->is_string()) {
      throw Error(Errc::invalid_request, "\"key_state\" must be \"dict\" or \"values\"");
    }
    base.state = parse_key_state(it->get<std::string>());
    described = true;
  }
  if (described && base.empty()) {
    throw Error(Errc::invalid_request, "\"key_fields\" and \"key_state\" describe a key "
                                       "class: they need \"key_class\"");
  }
  base.validate();
  return base;
}

DecodeOptions decode_options(const Json& request) {
  DecodeOptions options;
  if (auto it = request.find("strict"); it != request.end() && !it->is_null()) {
    if (!it->is_boolean()) throw Error(Errc::invalid_request, "\"strict\" must be true or false");
    options.strict = it->get<bool>();
  }
  options.pickle.key_class = key_class_of(request, options.pickle.key_class);
  return options;
}

std::vector<std::uint64_t> splits_from_json(const Json& j) {
  if (!j.is_array()) throw Error(Errc::invalid_request, "\"splits\" must be an array of sizes");
  std::vector<std::uint64_t> out;
  for (const Json& s : j) {
    if (!s.is_number_unsigned() && !(s.is_number_integer() && s.get<std::int64_t>() >= 0)) {
      throw Error(Errc::invalid_request,
                  "a split must be a non-negative JSON integer, got " + dump_json(s));
    }
    out.push_back(s.get<std::uint64_t>());
  }
  return out;
}

std::string hex_field(const Json& request, const char* name) {
  const Json& j = required_field(request, name);
  if (!j.is_string()) {
    throw Error(Errc::invalid_request, std::string("\"") + name + "\" must be a hex string");
  }
  return j.get<std::string>();
}

// --- inspect -------------------------------------------------------------------

// Counts what is written to it and keeps nothing: the first pass of inspect.
class CountingBuffer final : public std::streambuf {
 public:
  std::uint64_t count() const { return count_; }

 protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++count_;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    count_ += static_cast<std::uint64_t>(n);
    return n;
  }

 private:
  std::uint64_t count_ = 0;
};

[[noreturn]] void inspect_over_cap(std::uint64_t cap) {
  throw Error(Errc::output_limit,
              "the inspect view of this segment would be more than " + std::to_string(cap) +
                  " bytes (memo references are printed out in full); raise --max-output-bytes "
                  "to allow it");
}

class SchemaPrinter {
 public:
  // `counted`, when given, is the buffer behind `out`: past `cap` bytes, Error output_limit.
  SchemaPrinter(std::ostream& out, const CountingBuffer* counted, std::uint64_t cap)
      : out_(out), counted_(counted), cap_(cap) {}

  void node(const Value& schema, int indent) {
    if (counted_ != nullptr && counted_->count() > cap_) inspect_over_cap(cap_);
    auto f = schema.items();
    std::string_view tag = f[0].as_str();
    std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
    if (tag == "__hp_tensor__") {
      out_ << "tensor " << f[1].as_str().substr(6) << " shape " << repr(f[2], 60) << " offset "
           << f[3].as_int() << " size " << f[4].as_int() << "\n";
    } else if (tag == "__hp_bytes__" || tag == "__hp_bytearray__") {
      out_ << (tag == "__hp_bytes__" ? "bytes" : "bytearray") << " offset " << f[1].as_int()
           << " size " << f[2].as_int() << "\n";
    } else if (tag == "__hp_value__") {
      out_ << "value " << repr(f[1], 80) << "\n";
    } else if (tag == "__hp_mapping__") {
      out_ << "mapping (" << f[1].items().size() << " entries)\n";
      for (const Value& pair : f[1].items()) {
        out_ << pad << "  " << repr(pair.items()[0], 60) << ": ";
        node(pair.items()[1], indent + 1);
      }
    } else {
      out_ << (tag == "__hp_tuple__" ? "tuple" : "list") << " (" << f[1].items().size()
           << " items)\n";
      std::size_t i = 0;
      for (const Value& child : f[1].items()) {
        out_ << pad << "  [" << i++ << "] ";
        node(child, indent + 1);
      }
    }
  }

 private:
  std::ostream& out_;
  const CountingBuffer* counted_;
  std::uint64_t cap_;
};

std::uint64_t max_output_bytes(const Json& request, std::uint64_t cap) {
  auto it = request.find("max_output_bytes");
  if (it == request.end() || it->is_null()) return cap;
  auto v = json_as_int64(*it);
  if (!v || *v < 0) {
    throw Error(Errc::invalid_request,
                "\"max_output_bytes\" must be a non-negative int64 JSON integer, got " +
                    dump_json(*it));
  }
  return static_cast<std::uint64_t>(*v);
}

}  // namespace

Json handle_frame_request(const Json& request) {
  return handle_frame_request_capped(request, kDefaultMaxOutputBytes);
}

RequestHandler frame_request_handler(std::uint64_t max_output_bytes) {
  return [max_output_bytes](const Json& request) {
    return handle_frame_request_capped(request, max_output_bytes);
  };
}

Json handle_frame_request_capped(const Json& request, std::uint64_t default_cap) {
  std::uint64_t cap = max_output_bytes(request, default_cap);
  const Json& op = required_field(request, "op");
  if (!op.is_string()) throw Error(Errc::invalid_request, "\"op\" must be a string");
  const std::string& name = op.get_ref<const std::string&>();
  if (name == "encode_segment") {
    EncodeOptions options;
    options.key_class = key_class_of(request, KeyClass{});
    std::vector<Item> items = items_from_json(required_field(request, "items"));
    return Json{{"ok", true}, {"frame_hex", to_hex(encode_segment(items, options))}};
  }
  if (name == "decode_segment") {
    std::vector<std::uint8_t> frame = from_hex(hex_field(request, "frame_hex"));
    auto items = decode_segment(SharedBytes::adopt(std::move(frame)), decode_options(request));
    return Json{{"ok", true}, {"items", items_json_checked(items, cap)}};
  }
  if (name == "decode_received") {
    std::vector<std::uint8_t> received = from_hex(hex_field(request, "received_hex"));
    auto splits = splits_from_json(required_field(request, "splits"));
    auto items = merge_received(SharedBytes::adopt(std::move(received)), splits,
                                decode_options(request));
    return Json{{"ok", true}, {"items", items_json_checked(items, cap)}};
  }
  if (name == "pickle_read") {
    std::vector<std::uint8_t> bytes = from_hex(hex_field(request, "pickle_hex"));
    Value v = read_pickle(std::span<const std::uint8_t>(bytes), decode_options(request).pickle);
    return Json{{"ok", true}, {"value", value_json_checked(v, cap)}};
  }
  if (name == "pickle_write") {
    Value v = value_from_json(required_field(request, "value"));
    std::string bytes = write_pickle(v);
    return Json{{"ok", true},
                {"pickle_hex", to_hex(std::span<const std::uint8_t>(
                                   reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                   bytes.size()))}};
  }
  throw Error(Errc::invalid_request,
              "unknown op \"" + name +
                  "\" (frame ops: encode_segment, decode_segment, decode_received, "
                  "pickle_read, pickle_write)");
}

namespace {

void write_inspect(std::ostream& out, const CountingBuffer* counted,
                   std::span<const std::uint8_t> segment, const DecodeOptions& options,
                   std::uint64_t cap) {
  SharedBytes bytes = SharedBytes::copy_of(segment);
  std::vector<Item> items = decode_segment(bytes, options);
  SegmentHeader h = read_segment_header(segment);
  switch (h.kind) {
    case SegmentHeader::Kind::empty: out << "segment: empty (0 bytes, 0 items)\n"; return;
    case SegmentHeader::Kind::legacy:
      out << "segment: legacy metadata pickle, " << segment.size() << " bytes, " << items.size()
          << " items (no binary leaves)\n";
      for (std::size_t i = 0; i < items.size(); ++i) {
        out << "item " << i << " key " << repr(items[i].first, 80) << "\n  value "
            << repr(items[i].second, 200) << "\n";
        if (counted != nullptr && counted->count() > cap) inspect_over_cap(cap);
      }
      return;
    case SegmentHeader::Kind::framed: break;
  }
  out << "segment: HPB1 frame, " << segment.size() << " bytes = header 20 + metadata "
      << h.metadata_size << " + binary " << h.binary_size << "; " << items.size() << " items"
      << (options.strict ? " (strict layout checked)" : "") << "\n";
  Value metadata = read_pickle(segment.subspan(kFrameHeaderSize, h.metadata_size), options.pickle);
  SchemaPrinter printer(out, counted, cap);
  std::size_t i = 0;
  for (const Value& pair : metadata.items()) {
    out << "item " << i++ << " key " << repr(pair.items()[0], 80) << "\n  ";
    printer.node(pair.items()[1], 1);
  }
}

}  // namespace

std::string inspect_segment(std::span<const std::uint8_t> segment, const DecodeOptions& options,
                            std::uint64_t max_output_bytes) {
  // First count, then write: the view is refused past the cap before it is built.
  CountingBuffer counter;
  std::ostream counting(&counter);
  write_inspect(counting, &counter, segment, options, max_output_bytes);
  if (counter.count() > max_output_bytes) inspect_over_cap(max_output_bytes);
  std::ostringstream out;
  write_inspect(out, nullptr, segment, options, max_output_bytes);
  return out.str();
}

}  // namespace hpref::cli
