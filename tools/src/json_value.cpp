// JSON <-> Value for the CLI (ARCHITECTURE.md interchange format).
#include "hpref/cli/json_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <unordered_map>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/utf8.hpp"

namespace hpref::cli {
namespace {

// parse_json keeps an integer beyond 64 bits as its text: a binary node of this subtype
// (raw_json's nodes have none), written verbatim by dump_json.
constexpr std::uint8_t kBigInteger = 64;

Json big_integer(const std::string& text) {
  return Json::binary(Json::binary_t::container_type(text.begin(), text.end()), kBigInteger);
}

const Json::binary_t* big_integer_text(const Json& j) {
  if (!j.is_binary()) return nullptr;
  const auto& b = j.get_binary();
  return b.has_subtype() && b.subtype() == kBigInteger ? &b : nullptr;
}

[[noreturn]] void bad(const std::string& what, const Json& j) {
  throw Error(Errc::json_value, what + ": " + shortened(dump_json(j), 80));
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
  if (const auto* text = big_integer_text(x)) {  // finite: parse_json refused overflow
    const char* first = reinterpret_cast<const char*>(text->data());
    double d = 0;
    std::from_chars(first, first + text->size(), d);
    return d;
  }
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

void dump_to(std::string& out, const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      out += std::to_string(j.get<std::int64_t>());
      return;
    case Json::value_t::number_unsigned:
      out += std::to_string(j.get<std::uint64_t>());
      return;
    case Json::value_t::number_float:
      out += float_repr(j.get<double>());
      return;
    case Json::value_t::string:
      append_json_string(out, j.get_ref<const std::string&>());
      return;
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
        append_json_string(out, it.key());
        out += ": ";
        dump_to(out, it.value());
      }
      out.push_back('}');
      return;
    }
    case Json::value_t::binary: {  // text written by raw_json: verbatim
      const auto& text = j.get_binary();
      out.append(reinterpret_cast<const char*>(text.data()), text.size());
      return;
    }
    default:
      throw Error(Errc::internal, "unexpected JSON type in dump_json");
  }
}

}  // namespace

std::string shortened(std::string_view text, std::size_t keep) {
  if (text.size() <= keep) return std::string(text);
  auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
  while (keep > 0 && continuation(text[keep])) --keep;
  auto characters =
      std::count_if(text.begin(), text.end(), [&](char c) { return !continuation(c); });
  return std::string(text.substr(0, keep)) + "... (" + std::to_string(characters) + " characters)";
}

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

namespace {

// A SAX handler building the document. nlohmann's own callback parser rescans the parent
// container after every object it closes (quadratic in an array of objects), and an
// ordered_json object looks its keys up linearly; this builder appends in O(1), finds a
// duplicate key (the last one wins, as in nlohmann) through an ordered index per open
// object, and caps the nesting.
class Builder final : public nlohmann::json_sax<Json> {
 public:
  // `negative_zeros`: the ordinals, among the numbers of the text, of those written "-0".
  Builder(JsonParseInfo* info, std::vector<std::size_t> negative_zeros)
      : info_(info), negative_zeros_(std::move(negative_zeros)) {}

  Json take() { return std::move(root_); }

  bool null() override { return add(Json(nullptr)) != nullptr; }
  bool boolean(bool v) override { return add(Json(v)) != nullptr; }
  bool number_integer(number_integer_t v) override {
    // SAX reports "-0" as the integer 0, which would be echoed as "0".
    if (v == 0 && in_id_ && info_ != nullptr &&
        std::binary_search(negative_zeros_.begin(), negative_zeros_.end(), numbers_)) {
      inexact_id("-0");
    }
    ++numbers_;
    return add(Json(v)) != nullptr;
  }
  bool number_unsigned(number_unsigned_t v) override {
    ++numbers_;
    return add(Json(v)) != nullptr;
  }
  bool number_float(number_float_t v, const string_t& text) override {
    if (in_id_ && info_ != nullptr && text != float_repr(v)) inexact_id(text);
    ++numbers_;
    // No fraction, no exponent: an integer beyond 64 bits, kept as written.
    if (text.find_first_of(".eE") == string_t::npos) return add(big_integer(text)) != nullptr;
    return add(Json(v)) != nullptr;
  }
  bool string(string_t& v) override { return add(Json(std::move(v))) != nullptr; }
  bool binary(binary_t&) override {
    throw Error(Errc::json_syntax, "malformed JSON: binary values are not JSON");
  }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool key(string_t& k) override {
    if (frames_.size() == 1 && k == "id") in_id_ = true;
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    // A number too large for a double (1e400) is valid JSON: in an id, it is an id that
    // cannot be echoed exactly, as 1.50 is.
    constexpr int kNumberOverflow = 406;
    if (e.id == kNumberOverflow && in_id_ && info_ != nullptr) {
      throw Error(Errc::invalid_request, "the \"id\" holds the number " + shortened(token, 40) +
                                             ", which cannot be echoed exactly (use a string, "
                                             "an integer within 64 bits, or a float in its "
                                             "shortest form)");
    }
    if (e.id == kNumberOverflow) {  // valid JSON, a value no field takes: named, not "malformed"
      throw Error(Errc::json_value, "the number " + shortened(token, 40) +
                                        " is beyond a double's range: no field takes it (ints "
                                        "are int64, floats doubles)");
    }
    throw Error(Errc::json_syntax, std::string("malformed JSON: ") + e.what());
  }

 private:
  void inexact_id(const std::string& text) {
    if (!info_->id_inexact) info_->id_inexact_number = text;
    info_->id_inexact = true;
  }

  struct Frame {
    Json* node;
    std::string key;
    std::map<std::string, std::size_t, std::less<>> index;  // object keys -> position
  };

  Json* add(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& top = frames_.back();
    Json* slot = nullptr;
    if (top.node->is_array()) {
      auto& arr = top.node->get_ref<Json::array_t&>();
      arr.push_back(std::move(v));
      slot = &arr.back();
    } else {
      auto& obj = top.node->get_ref<Json::object_t&>();
      auto [it, fresh] = top.index.try_emplace(top.key, obj.size());
      if (fresh) {
        // ordered_map is a vector of pairs: appending skips its linear key search.
        obj.Container::emplace_back(std::move(top.key), std::move(v));
        slot = &obj.Container::back().second;
      } else {
        slot = &obj.Container::operator[](it->second).second;
        *slot = std::move(v);
      }
    }
    if (frames_.size() == 1 && !slot->is_structured()) in_id_ = false;
    return slot;
  }

  bool open(Json&& container) {
    if (frames_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw Error(Errc::json_syntax,
                  "JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    Json* node = add(std::move(container));
    frames_.push_back(Frame{node, {}, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (frames_.size() == 1) in_id_ = false;
    return true;
  }

  JsonParseInfo* info_;
  std::vector<std::size_t> negative_zeros_;
  std::size_t numbers_ = 0;  // numbers seen so far
  Json root_;
  std::vector<Frame> frames_;
  bool in_id_ = false;
};

// The ordinals, among the number tokens of `text` in order, of those written "-0" (none
// when the text has no "-0"). Strings are skipped; on malformed text the parse fails anyway.
std::vector<std::size_t> negative_zero_ordinals(std::string_view text) {
  std::vector<std::size_t> out;
  if (text.find("-0") == std::string_view::npos) return out;
  auto in_number = [](char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  };
  std::size_t ordinal = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
    } else if (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')) {
      std::size_t end = i + 1;
      while (end < text.size() && in_number(text[end])) ++end;
      if (text.substr(i, end - i) == "-0") out.push_back(ordinal);
      ++ordinal;
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace

Json parse_json(std::string_view text, JsonParseInfo* info) {
  // nlohmann's lexer reads a NUL byte as the end of the input: refuse it instead of
  // silently parsing the text before it.
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(Errc::json_syntax, "malformed JSON: a NUL byte at position " + std::to_string(nul));
  }
  Builder builder(info,
                  info != nullptr ? negative_zero_ordinals(text) : std::vector<std::size_t>{});
  try {
    Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const Json::exception& e) {
    throw Error(Errc::json_syntax, std::string("malformed JSON: ") + e.what());
  }
  return builder.take();
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
    throw Error(Errc::json_value,
                "hex text has an odd length (" + std::to_string(hex.size()) + ")");
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
    case ValueKind::none:
      return nullptr;
    case ValueKind::boolean:
      return v.as_bool();
    case ValueKind::integer:
      return v.as_int();
    case ValueKind::floating: {
      double d = v.as_float();
      if (std::isnan(d)) return Json{{"float", "nan"}};
      if (std::isinf(d)) return Json{{"float", d > 0 ? "inf" : "-inf"}};
      return Json{{"float", d}};
    }
    case ValueKind::string:
      return std::string(v.as_str());
    case ValueKind::bytes:
      return Json{{"bytes", to_hex(v.as_bytes().span())}};
    case ValueKind::bytearray:
      return Json{{"bytearray", to_hex(v.as_bytes().span())}};
    case ValueKind::tensor: {
      const Tensor& t = v.as_tensor();
      Json shape = Json::array();
      for (std::int64_t d : t.shape()) shape.push_back(d);
      return Json{{"tensor", Json{{"dtype", std::string(dtype_wire_name(t.dtype()))},
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
    case Json::value_t::null:
      return Value();
    case Json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
    case Json::value_t::binary:  // an integer beyond 64 bits, refused as written
      if (auto v = json_as_int64(j)) return Value::integer(*v);
      bad("a bare JSON number is an int and must fit in int64 (no fraction, no exponent; a "
          "float is written {\"float\": x})",
          j);
    case Json::value_t::string:
      return Value::string(j.get_ref<const std::string&>());
    case Json::value_t::object:
      break;
    default:
      bad("not a Value (arrays are written {\"list\": [...]} or {\"tuple\": [...]})", j);
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

// --- streaming writer ----------------------------------------------------------
// Writes what dump_json(value_to_json(v)) / dump_json(items_to_json(items)) would, without
// building the JSON tree, or counts it: memo references and overlapping binary ranges
// make the written text far larger than the decoded Value, so it is counted first (a
// shared container once, its size then reused) and refused past the cap before anything
// is allocated for it.
namespace {

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void append(const char* data, std::size_t n) = 0;
  void append(std::string_view s) { append(s.data(), s.size()); }
};

class VectorSink final : public Sink {
 public:
  explicit VectorSink(std::vector<std::uint8_t>& out) : out_(out) {}
  void append(const char* data, std::size_t n) override {
    out_.insert(out_.end(), reinterpret_cast<const std::uint8_t*>(data),
                reinterpret_cast<const std::uint8_t*>(data) + n);
  }

 private:
  std::vector<std::uint8_t>& out_;
};

class StreamSink final : public Sink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  ~StreamSink() override { flush(); }
  void append(const char* data, std::size_t n) override {
    buffer_.append(data, n);
    if (buffer_.size() >= (1u << 16)) flush();
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

 private:
  std::ostream& out_;
  std::string buffer_;
};

struct OverCap {};

class ValueWriter {
 public:
  // Counting: nothing is written; OverCap once the total passes `cap`.
  explicit ValueWriter(std::uint64_t cap) : cap_(cap) {}
  explicit ValueWriter(Sink& sink) : sink_(&sink) {}

  std::uint64_t total() const { return total_; }

  void raw(std::string_view s) {
    if (sink_ != nullptr) {
      sink_->append(s);
    } else {
      add(s.size());
    }
  }

  void string(std::string_view s) {
    scratch_.clear();
    append_json_string(scratch_, s);
    raw(scratch_);
  }

  void hex(std::span<const std::uint8_t> bytes) {
    if (sink_ == nullptr) {
      add(2 * static_cast<std::uint64_t>(bytes.size()) + 2);
      return;
    }
    raw("\"");
    constexpr std::size_t kChunk = 1 << 15;
    for (std::size_t i = 0; i < bytes.size(); i += kChunk) {
      raw(to_hex(bytes.subspan(i, std::min(kChunk, bytes.size() - i))));
    }
    raw("\"");
  }

  void value(const Value& v) {
    const void* id = v.node_identity();
    if (sink_ == nullptr && id != nullptr) {
      if (auto it = sizes_.find(id); it != sizes_.end()) {
        add(it->second);
        return;
      }
      std::uint64_t before = total_;
      body(v);
      sizes_.emplace(id, total_ - before);
      return;
    }
    body(v);
  }

  void key(const Value& key) {
    if (SampleKey::from_value(key)) {
      raw("{\"key\": [");
      value(key.items()[0]);
      raw(", ");
      value(key.items()[1]);
      raw("]}");
      return;
    }
    value(key);
  }

  void items(std::span<const Item> items) {
    raw("[");
    bool first = true;
    for (const Item& item : items) {
      if (!first) raw(", ");
      first = false;
      raw("[");
      key(item.first);
      raw(", ");
      value(item.second);
      raw("]");
    }
    raw("]");
  }

 private:
  void add(std::uint64_t n) {
    total_ = n > cap_ - std::min(cap_, total_) ? cap_ + 1 : total_ + n;
    if (total_ > cap_) throw OverCap{};
  }

  void body(const Value& v) {
    switch (v.kind()) {
      case ValueKind::none:
        raw("null");
        return;
      case ValueKind::boolean:
        raw(v.as_bool() ? "true" : "false");
        return;
      case ValueKind::integer:
        raw(std::to_string(v.as_int()));
        return;
      case ValueKind::floating: {
        double d = v.as_float();
        raw("{\"float\": ");
        if (std::isnan(d)) {
          raw("\"nan\"");
        } else if (std::isinf(d)) {
          raw(d > 0 ? "\"inf\"" : "\"-inf\"");
        } else {
          raw(float_repr(d));
        }
        raw("}");
        return;
      }
      case ValueKind::string:
        string(v.as_str());
        return;
      case ValueKind::bytes:
      case ValueKind::bytearray:
        raw(v.is(ValueKind::bytes) ? "{\"bytes\": " : "{\"bytearray\": ");
        hex(v.as_bytes().span());
        raw("}");
        return;
      case ValueKind::tensor: {
        const Tensor& t = v.as_tensor();
        raw("{\"tensor\": {\"dtype\": ");
        string(dtype_wire_name(t.dtype()));
        raw(", \"shape\": [");
        bool first = true;
        for (std::int64_t d : t.shape()) {
          if (!first) raw(", ");
          first = false;
          raw(std::to_string(d));
        }
        raw("], \"hex\": ");
        hex(t.bytes());
        raw("}}");
        return;
      }
      case ValueKind::tuple:
      case ValueKind::list: {
        raw(v.is(ValueKind::tuple) ? "{\"tuple\": [" : "{\"list\": [");
        bool first = true;
        for (const Value& item : v.items()) {
          if (!first) raw(", ");
          first = false;
          value(item);
        }
        raw("]}");
        return;
      }
      case ValueKind::mapping: {
        raw("{\"dict\": [");
        bool first = true;
        for (const auto& [k, val] : v.entries()) {
          if (!first) raw(", ");
          first = false;
          raw("[");
          value(k);
          raw(", ");
          value(val);
          raw("]");
        }
        raw("]}");
        return;
      }
    }
    throw Error(Errc::internal, "unexpected value kind");
  }

  Sink* sink_ = nullptr;
  std::uint64_t cap_ = 0;
  std::uint64_t total_ = 0;
  std::string scratch_;
  std::unordered_map<const void*, std::uint64_t> sizes_;  // container node -> text size
};

[[noreturn]] void over_cap(std::uint64_t cap) {
  throw Error(Errc::output_limit,
              "the JSON text of the decoded items would be more than " + std::to_string(cap) +
                  " bytes (memo references and overlapping ranges are written out in full); "
                  "raise --max-output-bytes (batch: \"max_output_bytes\") to allow it");
}

template <typename Write>
std::uint64_t checked_size(std::uint64_t cap, Write write) {
  ValueWriter counter(cap);
  try {
    write(counter);
  } catch (const OverCap&) {
    over_cap(cap);
  }
  return counter.total();
}

}  // namespace

std::uint64_t items_json_size(std::span<const Item> items, std::uint64_t cap) {
  return checked_size(cap, [&](ValueWriter& w) { w.items(items); });
}

std::uint64_t value_json_size(const Value& v, std::uint64_t cap) {
  return checked_size(cap, [&](ValueWriter& w) { w.value(v); });
}

void write_items_json(std::ostream& out, std::span<const Item> items) {
  StreamSink sink(out);
  ValueWriter(sink).items(items);
}

Json raw_json(std::vector<std::uint8_t> text) { return Json::binary(std::move(text)); }

Json items_json_checked(std::span<const Item> items, std::uint64_t cap) {
  std::vector<std::uint8_t> text;
  text.reserve(items_json_size(items, cap));
  VectorSink sink(text);
  ValueWriter(sink).items(items);
  return raw_json(std::move(text));
}

Json value_json_checked(const Value& v, std::uint64_t cap) {
  std::vector<std::uint8_t> text;
  text.reserve(value_json_size(v, cap));
  VectorSink sink(text);
  ValueWriter(sink).value(v);
  return raw_json(std::move(text));
}

Json key_to_json(const Value& key) {
  if (auto k = SampleKey::from_value(key)) {
    return Json{
        {"key", Json::array({value_to_json(key.items()[0]), value_to_json(key.items()[1])})}};
  }
  return value_to_json(key);
}

Value key_from_json(const Json& j) {
  std::string form;
  const Json* body = sole_member(j, form);
  if (body != nullptr && form == "key") {
    if (!body->is_array() || body->size() != 2) {
      bad("{\"key\": [sample_id, position]} holds a SampleKey's two fields (the keys of a key "
          "class with other fields are written {\"tuple\": [...]}, one value per field)",
          j);
    }
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
