// The CLI interchange format (ARCHITECTURE.md, "The CLI interchange format"): Values,
// item keys and item lists as JSON, a depth-capped JSON parser, and a writer that
// prints floats with the shortest text that reads back to the same double.
#pragma once

#include <cstdint>
#include <iosfwd>
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
// A NUL byte anywhere is refused (json_syntax). Objects keep their key order; a repeated
// key keeps its first position and its last value. Linear in the text.
struct JsonParseInfo {
  // The top-level object's "id" holds a number whose text the writer would not reproduce
  // (1.50, -0, an integer beyond 64 bits). One beyond a double (1e400) is refused by
  // parse_json itself, Error invalid_request, when an info is given.
  bool id_inexact = false;
  std::string id_inexact_number;  // the first such number, as written ("1.50", "-0")
};
// An integer beyond 64 bits (99999999999999999999) is kept as its text, so that messages
// show it as written, not as the double it rounds to ("1e+20"): json_as_int64 and every
// integer field refuse it, {"float": ...} reads it as a double, dump_json writes the text.
Json parse_json(std::string_view text, JsonParseInfo* info = nullptr);
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

// ``text`` (UTF-8) as a message shows it: whole up to ``keep`` bytes, else its first ``keep``
// bytes (cut back to a character's start) and "... (N characters)", N its whole length in
// characters, so that no message grows with what it quotes.
std::string shortened(std::string_view text, std::size_t keep);

// The JSON integer as an int64: nullopt for anything else (floats, integers beyond int64,
// non-numbers).
std::optional<std::int64_t> json_as_int64(const Json& j);

// The default cap on the JSON text of decoded items (--max-output-bytes).
inline constexpr std::uint64_t kDefaultMaxOutputBytes = std::uint64_t{1} << 30;

// The size of dump_json(items_to_json(items)) / dump_json(value_to_json(v)), counted
// without building it (a shared subtree's size is reused); Error output_limit as soon as
// it passes `cap`. Memo references and overlapping binary ranges make this text far
// larger than the decoded items: check it before writing.
std::uint64_t items_json_size(std::span<const Item> items, std::uint64_t cap);
std::uint64_t value_json_size(const Value& v, std::uint64_t cap);
// Streams dump_json(items_to_json(items)) to `out` without building the JSON tree.
void write_items_json(std::ostream& out, std::span<const Item> items);
// A Json node holding already-written JSON text, written verbatim by dump_json.
Json raw_json(std::vector<std::uint8_t> text);
// items_to_json / value_to_json as such a node, after the size check against `cap`.
Json items_json_checked(std::span<const Item> items, std::uint64_t cap);
Json value_json_checked(const Value& v, std::uint64_t cap);

// Lowercase hex of bytes; parse accepts either case (Error json_value otherwise).
std::string to_hex(std::span<const std::uint8_t> bytes);
std::vector<std::uint8_t> from_hex(std::string_view hex);

}  // namespace hpref::cli
