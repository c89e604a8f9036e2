// SampleKey validation and its 2-tuple form, and the key-class description (SPEC 1.4).
#include "hpref/sample_key.hpp"

#include <ostream>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/utf8.hpp"

namespace hpref {

SampleKey SampleKey::make(std::int64_t sample_id, std::int64_t position) {
  if (sample_id < 0) {
    throw Error(Errc::invalid_sample_key,
                "sample_id " + std::to_string(sample_id) + " is negative");
  }
  if (position < 0) {
    throw Error(Errc::invalid_sample_key, "position " + std::to_string(position) + " is negative");
  }
  return SampleKey{sample_id, position};
}

SampleKey SampleKey::make(std::string sample_id, std::int64_t position) {
  if (sample_id.empty()) throw Error(Errc::invalid_sample_key, "sample_id '' is empty");
  if (position < 0) {
    throw Error(Errc::invalid_sample_key, "position " + std::to_string(position) + " is negative");
  }
  Value::string(sample_id);  // validates UTF-8
  return SampleKey{std::move(sample_id), position};
}

std::ostream& operator<<(std::ostream& os, const SampleKey& key) { return os << key.to_value(); }

Value SampleKey::to_value() const {
  Value id = std::holds_alternative<std::int64_t>(sample_id)
                 ? Value::integer(std::get<std::int64_t>(sample_id))
                 : Value::string(std::get<std::string>(sample_id));
  return Value::tuple({std::move(id), Value::integer(position)});
}

std::optional<SampleKey> SampleKey::from_value(const Value& v) {
  if (!v.is(ValueKind::tuple) || v.items().size() != 2) return std::nullopt;
  const Value& id = v.items()[0];
  const Value& pos = v.items()[1];
  if (!pos.is(ValueKind::integer) || pos.as_int() < 0) return std::nullopt;
  if (id.is(ValueKind::integer) && id.as_int() >= 0) return SampleKey{id.as_int(), pos.as_int()};
  if (id.is(ValueKind::string) && !id.as_str().empty()) {
    return SampleKey{std::string(id.as_str()), pos.as_int()};
  }
  return std::nullopt;
}

namespace {

// A Python identifier, near enough: ASCII letters, digits and '_' (not a digit first), or
// any non-ASCII character (the whole name is checked as UTF-8 by the caller).
bool is_identifier(std::string_view s) noexcept {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    bool ok = u >= 0x80 || u == '_' || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') ||
              (u >= 'A' && u <= 'Z');
    if (!ok) return false;
  }
  return true;
}

// Python's repr of the text, or of its bytes when it is not UTF-8.
std::string quoted(std::string_view s) { return is_valid_utf8(s) ? quote_text(s) : quote_bytes(s); }

}  // namespace

bool KeyClass::has_default_fields() const {
  return fields.size() == 2 && fields[0] == "sample_id" && fields[1] == "position";
}

void KeyClass::validate() const {
  if (name.empty()) return;
  if (!is_valid_utf8(name)) {
    throw Error(Errc::invalid_argument, "key class " + quoted(name) + " is not valid UTF-8");
  }
  auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) {
    throw Error(Errc::invalid_argument,
                "key class '" + name + "' is not a dotted name <module>.<Name>");
  }
  for (std::size_t start = 0;;) {
    std::size_t end = name.find('.', start);
    std::string_view part = std::string_view(name).substr(start, end - start);
    if (!is_identifier(part)) {
      throw Error(Errc::invalid_argument, "key class '" + name + "' is not a dotted name " +
                                              "<module>.<Name>: " + quoted(part) +
                                              " is not a Python identifier");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (fields.empty()) {
    throw Error(Errc::invalid_argument, "key class '" + name +
                                            "' has no fields; SPEC 1.4 keys "
                                            "are the tuple of one or more field values");
  }
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (!is_valid_utf8(fields[i]) || !is_identifier(fields[i])) {
      throw Error(Errc::invalid_argument, "key class '" + name + "' field " + quoted(fields[i]) +
                                              " is not a Python identifier");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (fields[j] == fields[i]) {
        throw Error(Errc::invalid_argument,
                    "key class '" + name + "' names field " + quoted(fields[i]) + " twice");
      }
    }
  }
}

std::string_view KeyClass::module() const {
  return std::string_view(name).substr(0, name.rfind('.'));
}

std::string_view KeyClass::class_name() const {
  return std::string_view(name).substr(name.rfind('.') + 1);
}

std::string KeyClass::describe() const {
  std::string out = name + "(";
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? ", " : "") + fields[i];
  return out + "; " + std::string(key_state_name(state)) + " state)";
}

std::string_view key_state_name(KeyClass::State state) noexcept {
  return state == KeyClass::State::values ? "values" : "dict";
}

KeyClass::State parse_key_state(std::string_view text) {
  if (text == "dict") return KeyClass::State::dict;
  if (text == "values") return KeyClass::State::values;
  throw Error(Errc::invalid_argument,
              "key class state " + quote_text(text) + " is neither 'dict' nor 'values' (SPEC 1.4)");
}

}  // namespace hpref
