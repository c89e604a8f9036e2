// SampleKey (SPEC 1.4): one sample occurrence, (sample_id, position). Our transports
// write it as the 2-tuple Value (sample_id, position); the Python original pickles its
// own dataclass, which the pickle reader and writer handle through the key-class shim
// described by a KeyClass.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hpref/value.hpp"

namespace hpref {

// The class name the Python original pickles its keys under (SPEC 1.4).
inline constexpr std::string_view kDefaultKeyClass =
    "hyper_parallel.distributed_data.schema.SampleKey";

struct SampleKey {
  std::variant<std::int64_t, std::string> sample_id;  // int >= 0 or non-empty string
  std::int64_t position = 0;                          // >= 0

  // Checked constructors: Error invalid_sample_key naming the bad part.
  static SampleKey make(std::int64_t sample_id, std::int64_t position);
  static SampleKey make(std::string sample_id, std::int64_t position);

  // The 2-tuple Value (sample_id, position).
  Value to_value() const;
  // The key a 2-tuple Value stands for, if it is a valid SampleKey (a bool is not an int).
  static std::optional<SampleKey> from_value(const Value& v);

  bool operator==(const SampleKey&) const = default;
};

// SPEC 1.4 Python peer shim: the user's key class, as its pickle pattern shows it. GLOBAL /
// STACK_GLOBAL of `name`, EMPTY_TUPLE, NEWOBJ, then BUILD with the state: `dict`, a dict of
// exactly `fields` (a plain or frozen dataclass); `values`, the list of the field values
// in field order (a frozen slots=True dataclass). Such an object decodes to the tuple of
// its field values in field order (with the default fields, the SampleKey 2-tuple).
// An empty name turns the shim off. Assignable from a dotted name: default fields, dict.
struct KeyClass {
  enum class State { dict, values };

  std::string name;  // "<module>.<Name>", split at its last dot
  std::vector<std::string> fields{"sample_id", "position"};
  State state = State::dict;

  KeyClass() = default;
  KeyClass(std::string_view dotted_name) : name(dotted_name) {}    // NOLINT: implicit on purpose
  KeyClass(const std::string& dotted_name) : name(dotted_name) {}  // NOLINT
  KeyClass(const char* dotted_name) : name(dotted_name) {}         // NOLINT
  KeyClass(std::string dotted_name, std::vector<std::string> field_names, State state_form)
      : name(std::move(dotted_name)), fields(std::move(field_names)), state(state_form) {}

  bool empty() const noexcept { return name.empty(); }
  // Exactly (sample_id, position): keys are SampleKeys, written only when valid ones.
  bool has_default_fields() const;
  // Refuses (invalid_argument, naming the bad part) a name that is not <module>.<Name> of
  // identifiers, and fields that are not one or more distinct identifiers. An empty
  // KeyClass (shim off) is valid. ASCII identifiers, or any valid UTF-8 beyond ASCII.
  void validate() const;
  // The parts of `name` around its last dot (valid names only).
  std::string_view module() const;
  std::string_view class_name() const;
  // "m.Key(sample_id, position; dict state)", for messages.
  std::string describe() const;

  bool operator==(const KeyClass&) const = default;
};

// "dict" / "values".
std::string_view key_state_name(KeyClass::State state) noexcept;
// The state named `text` ("dict" or "values"); invalid_argument naming it otherwise.
KeyClass::State parse_key_state(std::string_view text);

// Prints (sample_id, position) as Python would.
std::ostream& operator<<(std::ostream& os, const SampleKey& key);

}  // namespace hpref
