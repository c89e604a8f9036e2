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
                    "a \"key_fields\" entry must be a string, got " + shortened(dump_json(f), 80));
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
    throw Error(Errc::invalid_request,
                "\"key_fields\" and \"key_state\" describe a key "
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
      throw Error(Errc::invalid_request, "a split must be a non-negative JSON integer, got " +
                                             shortened(dump_json(s), 80));
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

std::uint64_t max_output_bytes(const Json& request, std::uint64_t cap) {
  auto it = request.find("max_output_bytes");
  if (it == request.end() || it->is_null()) return cap;
  auto v = json_as_int64(*it);
  if (!v || *v < 0) {
    throw Error(Errc::invalid_request,
                "\"max_output_bytes\" must be a non-negative int64 JSON integer, got " +
                    shortened(dump_json(*it), 80));
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
    auto items =
        merge_received(SharedBytes::adopt(std::move(received)), splits, decode_options(request));
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
    return Json{
        {"ok", true},
        {"pickle_hex", to_hex(std::span<const std::uint8_t>(
                           reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()))}};
  }
  throw Error(Errc::invalid_request,
              "unknown op \"" + name +
                  "\" (frame ops: encode_segment, decode_segment, decode_received, "
                  "pickle_read, pickle_write)");
}

}  // namespace hpref::cli
