// Strict UTF-8 validation: no overlong forms, no surrogates, nothing above U+10FFFF.
// And the JSON string writer every JSON producer of the project shares (the CLI's answers,
// the simulator's Chrome trace), so that all of them escape text the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hpref {

bool is_valid_utf8(std::string_view text) noexcept;

// The length (1-4) of the well-formed UTF-8 sequence starting at text[i], or 0 where none
// starts there (a stray continuation byte, an overlong form, a surrogate, a code point past
// U+10FFFF, a sequence cut off by the end). Requires i < text.size().
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept;

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a
// UTF-8 sequence (a cut message stays valid UTF-8: Python refuses to make a str of one
// that is not).
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) noexcept;

// Appends `text` as a JSON string, quotes included: `"` and `\` escaped, control characters
// as \n \r \t \b \f or \u00XX, bytes that are not well-formed UTF-8 as \ufffd (one per byte),
// so the output is valid UTF-8 JSON whatever the input (an error message quoting peer bytes).
void append_json_string(std::string& out, std::string_view text);

}  // namespace hpref
