// SampleKey (SPEC 1.4): one sample occurrence, (sample_id, position). Our transports
// write it as the 2-tuple Value (sample_id, position); the Python original pickles its
// own dataclass, which the pickle reader and writer handle through the key-class shim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

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

// Prints (sample_id, position) as Python would.
std::ostream& operator<<(std::ostream& os, const SampleKey& key);

}  // namespace hpref
