// SampleKey validation and its 2-tuple form (SPEC 1.4).
#include "hpref/sample_key.hpp"

#include <ostream>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"

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

}  // namespace hpref
