// Python-like text of values for error messages: every refusal names the offending
// value the way a Python user would recognise it, shortened when long.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hpref {

class Value;

// 'text' as Python's repr writes it: its choice of quotes, its escapes (non-printable code
// points as \xNN, \uNNNN or \UNNNNNNNN by CPython's isprintable table, see
// tools/gen/unicode_printable.py), invalid UTF-8 bytes as \xNN. Once `max_chars` characters
// are written, the rest is replaced by "..." and the closing quote (so the result may pass
// max_chars by the last escape, the "..." and the quote).
std::string quote_text(std::string_view text, std::size_t max_chars = 80);
// b'...' as Python's repr writes bytes, shortened as quote_text is.
std::string quote_bytes(std::string_view bytes, std::size_t max_chars = 80);
// repr(v) as Python prints it (tensors as tensor(dtype=..., shape=(...))); past
// `max_chars` characters it is cut to max_chars and "..." is appended (it never walks more
// of a huge value than it prints).
std::string repr(const Value& v, std::size_t max_chars = 120);
// Shortest text that reads back to the same double, laid out as Python's repr writes it:
// positional for decimal exponents in [-4, 16) ("1000000000000000.0", "0.0001"), else
// "1e+16", "1.5e-05"; "nan", "inf", "-0.0".
std::string float_repr(double d);

}  // namespace hpref
