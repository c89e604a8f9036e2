// JSON <-> Value for the CLI (ARCHITECTURE.md interchange format).
#include "hpref/cli/json_value.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/sample_key.hpp"

namespace hpref::cli {
namespace {

[[noreturn]] void bad(const std::string& what, const Json& j) {
  std::string text = j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 80) + "...";
  throw Error(Errc::json_value, what + ": " + text);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The only member of a one-member object, checked.
const Json::value_type* sole_member(const Json& j, std::string& name) {
  if (!j.is_object() || j.size() != 1) return nullptr;
  name = j.begin().key();
  return &j.begin().value();
}

std::int64_t json_int(const Json& j, const char* what) {
  if (auto v = json_as_int64(j)) return *v;
  bad(std::string(what) + " must be an int64 JSON integer (no fraction, no exponent)", j);
}

double json_float(const Json& x) {
  if (x.is_string()) {
    const auto& s = x.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    bad("a float string must be \"nan\", \"inf\" or \"-inf\"", x);
  }
  if (x.is_number_float()) return x.get<double>();
  if (x.is_number_unsigned()) return static_cast<double>(x.get<std::uint64_t>());
  if (x.is_number_integer()) return static_cast<double>(x.get<std::int64_t>());
  bad("{\"float\": x} needs a JSON number or \"nan\", \"inf\", \"-inf\"", x);
}

std::vector<Value> value_list(const Json& arr, const char* form) {
  if (!arr.is_array()) bad(std::string("{\"") + form + "\": ...} needs an array", arr);
  std::vector<Value> out;
  out.reserve(arr.size());
  for (const Json& e : arr) out.push_back(value_from_json(e));
  return out;
}

Value tensor_from_json(const Json& t) {
  if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("hex") ||
      t.size() != 3) {
    bad("a tensor is {\"tensor\": {\"dtype\": ..., \"shape\": [...], \"hex\": ...}}", t);
  }
  const Json& dtype = t["dtype"];
  if (!dtype.is_string()) bad("tensor dtype must be a string", dtype);
  DType d = parse_dtype(dtype.get_ref<const std::string&>());
  const Json& shape = t["shape"];
  if (!shape.is_array()) bad("tensor shape must be an array", shape);
  std::vector<std::int64_t> dims;
  for (const Json& dim : shape) {
    std::int64_t v = json_int(dim, "a tensor dim");
    if (v < 0) bad("a tensor dim must be non-negative", dim);
    dims.push_back(v);
  }
  const Json& hex = t["hex"];
  if (!hex.is_string()) bad("tensor hex must be a string", hex);
  std::vector<std::uint8_t> bytes = from_hex(hex.get_ref<const std::string&>());
  return Value::tensor(Tensor(d, std::move(dims), SharedBytes::adopt(std::move(bytes))));
}

// --- writer ------------------------------------------------------------------

void dump_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void dump_to(std::string& out, const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(j.get<std::int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(j.get<std::uint64_t>()); return;
    case Json::value_t::number_float: out += float_repr(j.get<double>()); return;
    case Json::value_t::string: dump_string(out, j.get_ref<const std::string&>()); return;
    case Json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const Json& e : j) {
        if (!first) out += ", ";
        first = false;
        dump_to(out, e);
      }
      out.push_back(']');
      return;
    }
    case Json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        dump_string(out, it.key());
        out += ": ";
        dump_to(out, it.value());
      }
      out.push_back('}');
      return;
    }
    default: throw Error(Errc::internal, "unexpected JSON type in dump_json");
  }
}

}  // namespace

std::optional<std::int64_t> json_as_int64(const Json& j) {
  if (j.is_number_integer() && !j.is_number_unsigned()) return j.get<std::int64_t>();
  if (j.is_number_unsigned()) {
    auto u = j.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(u);
    }
  }
  return std::nullopt;
}

Json parse_json(std::string_view text) {
  Json::parser_callback_t depth_cap = [](int depth, Json::parse_event_t, Json&) {
    if (depth >= kMaxJsonDepth) {
      throw Error(Errc::json_syntax, "JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                                         " levels");
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), depth_cap);
  } catch (const Json::exception& e) {
    throw Error(Errc::json_syntax, std::string("malformed JSON: ") + e.what());
  }
}

std::string dump_json(const Json& j) {
  std::string out;
  dump_to(out, j);
  return out;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::vector<std::uint8_t> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    throw Error(Errc::json_value, "hex text has an odd length (" + std::to_string(hex.size()) + ")");
  }
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_digit(hex[2 * i]);
    int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      throw Error(Errc::json_value, "hex text has a non-hex character at position " +
                                        std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
    }
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

Json value_to_json(const Value& v) {
  switch (v.kind()) {
    case ValueKind::none: return nullptr;
    case ValueKind::boolean: return v.as_bool();
    case ValueKind::integer: return v.as_int();
    case ValueKind::floating: {
      double d = v.as_float();
      if (std::isnan(d)) return Json{{"float", "nan"}};
      if (std::isinf(d)) return Json{{"float", d > 0 ? "inf" : "-inf"}};
      return Json{{"float", d}};
    }
    case ValueKind::string: return std::string(v.as_str());
    case ValueKind::bytes: return Json{{"bytes", to_hex(v.as_bytes().span())}};
    case ValueKind::bytearray: return Json{{"bytearray", to_hex(v.as_bytes().span())}};
    case ValueKind::tensor: {
      const Tensor& t = v.as_tensor();
      Json shape = Json::array();
      for (std::int64_t d : t.shape()) shape.push_back(d);
      return Json{{"tensor", Json{{"dtype", dtype_wire_name(t.dtype())},
                                  {"shape", std::move(shape)},
                                  {"hex", to_hex(t.bytes())}}}};
    }
    case ValueKind::tuple:
    case ValueKind::list: {
      Json arr = Json::array();
      for (const Value& item : v.items()) arr.push_back(value_to_json(item));
      return Json{{v.is(ValueKind::tuple) ? "tuple" : "list", std::move(arr)}};
    }
    case ValueKind::mapping: {
      Json arr = Json::array();
      for (const auto& [key, value] : v.entries()) {
        arr.push_back(Json::array({value_to_json(key), value_to_json(value)}));
      }
      return Json{{"dict", std::move(arr)}};
    }
  }
  throw Error(Errc::internal, "unexpected value kind");
}

Value value_from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value();
    case Json::value_t::boolean: return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return Value::integer(json_int(j, "a bare JSON number"));
    case Json::value_t::string: return Value::string(j.get_ref<const std::string&>());
    case Json::value_t::object: break;
    default: bad("not a Value (arrays are written {\"list\": [...]} or {\"tuple\": [...]})", j);
  }
  std::string form;
  const Json* body = sole_member(j, form);
  if (body == nullptr) bad("a Value object must have exactly one member", j);
  if (form == "float") return Value::floating(json_float(*body));
  if (form == "bytes" || form == "bytearray") {
    if (!body->is_string()) bad("{\"" + form + "\": hex} needs a hex string", *body);
    auto bytes = SharedBytes::adopt(from_hex(body->get_ref<const std::string&>()));
    return form == "bytes" ? Value::bytes(std::move(bytes)) : Value::bytearray(std::move(bytes));
  }
  if (form == "tuple") return Value::tuple(value_list(*body, "tuple"));
  if (form == "list") return Value::list(value_list(*body, "list"));
  if (form == "tensor") return tensor_from_json(*body);
  if (form == "dict") {
    if (!body->is_array()) bad("{\"dict\": [[key, value], ...]} needs an array", *body);
    std::vector<Value::Entry> entries;
    for (const Json& pair : *body) {
      if (!pair.is_array() || pair.size() != 2) bad("a dict entry must be [key, value]", pair);
      entries.emplace_back(value_from_json(pair[0]), value_from_json(pair[1]));
    }
    return Value::mapping(std::move(entries));
  }
  bad("unknown Value form \"" + form + "\"", j);
}

Json key_to_json(const Value& key) {
  if (auto k = SampleKey::from_value(key)) {
    return Json{{"key", Json::array({value_to_json(key.items()[0]), value_to_json(key.items()[1])})}};
  }
  return value_to_json(key);
}

Value key_from_json(const Json& j) {
  std::string form;
  const Json* body = sole_member(j, form);
  if (body != nullptr && form == "key") {
    if (!body->is_array() || body->size() != 2) bad("{\"key\": [sample_id, position]}", j);
    const Json& id = (*body)[0];
    std::int64_t position = json_int((*body)[1], "a key position");
    SampleKey k = id.is_string() ? SampleKey::make(id.get<std::string>(), position)
                                 : SampleKey::make(json_int(id, "a key sample_id"), position);
    return k.to_value();
  }
  Value key = value_from_json(j);
  if (!key.is_hashable()) {
    throw Error(Errc::unhashable_key, "item key " + repr(key, 60) + " is not hashable");
  }
  return key;
}

Json items_to_json(std::span<const Item> items) {
  Json arr = Json::array();
  for (const Item& item : items) {
    arr.push_back(Json::array({key_to_json(item.first), value_to_json(item.second)}));
  }
  return arr;
}

std::vector<Item> items_from_json(const Json& j) {
  if (!j.is_array()) bad("items must be an array of [key, value] pairs", j);
  std::vector<Item> items;
  items.reserve(j.size());
  for (const Json& pair : j) {
    if (!pair.is_array() || pair.size() != 2) bad("an item must be [key, value]", pair);
    items.emplace_back(key_from_json(pair[0]), value_from_json(pair[1]));
  }
  return items;
}

}  // namespace hpref::cli
