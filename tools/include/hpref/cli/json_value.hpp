// The CLI interchange format (ARCHITECTURE.md, "The CLI interchange format"): Values,
// item keys and item lists as JSON, a depth-capped JSON parser, and a writer that
// prints floats with the shortest text that reads back to the same double.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/codec.hpp"
#include "hpref/value.hpp"

namespace hpref::cli {

using Json = nlohmann::ordered_json;

// JSON nesting accepted by parse_json (a Value of the 256-level pickle limit needs at
// most three JSON levels per level).
inline constexpr int kMaxJsonDepth = 1024;

// Parses one JSON document; Error json_syntax (with the position) on bad text or nesting
// deeper than kMaxJsonDepth.
Json parse_json(std::string_view text);
// Compact JSON text; floats shortest round-trip ("1.0", "1e+300", "-0.0").
std::string dump_json(const Json& j);

// Value <-> JSON. Error json_value naming the offending JSON on anything malformed.
Json value_to_json(const Value& v);
Value value_from_json(const Json& j);

// Item keys: {"key": [sample_id, position]} or any hashable Value; written as
// {"key": [...]} when the key is a valid SampleKey 2-tuple.
Json key_to_json(const Value& key);
Value key_from_json(const Json& j);

// [[key, value], ...]
Json items_to_json(std::span<const Item> items);
std::vector<Item> items_from_json(const Json& j);

// The JSON integer as an int64: nullopt for anything else (floats, integers beyond int64,
// non-numbers).
std::optional<std::int64_t> json_as_int64(const Json& j);

// Lowercase hex of bytes; parse accepts either case (Error json_value otherwise).
std::string to_hex(std::span<const std::uint8_t> bytes);
std::vector<std::uint8_t> from_hex(std::string_view hex);

}  // namespace hpref::cli
