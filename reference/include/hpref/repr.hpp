// Python-like text of values for error messages: every refusal names the offending
// value the way a Python user would recognise it, shortened when long.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hpref {

class Value;

// 'text' with Python's escapes; invalid UTF-8 bytes as \xNN. At most `max_chars`.
std::string quote_text(std::string_view text, std::size_t max_chars = 80);
// b'...' with Python's escapes. At most `max_chars`.
std::string quote_bytes(std::string_view bytes, std::size_t max_chars = 80);
// repr(v) as Python prints it (tensors as tensor(dtype=..., shape=(...))), shortened
// with "..." past `max_chars` (it never walks more of a huge value than it prints).
std::string repr(const Value& v, std::size_t max_chars = 120);
// Shortest text that reads back to the same double, as Python's repr writes it
// ("1.0", "1e+300", "nan", "inf", "-0.0").
std::string float_repr(double d);

}  // namespace hpref
