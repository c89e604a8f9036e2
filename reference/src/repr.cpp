// Python-like repr for error messages.
#include "hpref/repr.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <ostream>

#include "hpref/utf8.hpp"
#include "hpref/value.hpp"

namespace hpref {
namespace {

struct CodeRange {
  char32_t first, last;
};
constexpr CodeRange kNonPrintable[] = {
#include "unicode_nonprintable.inc"
};

// str.isprintable() for one code point above U+007F (CPython's table, Unicode version as
// generated).
bool printable(char32_t cp) {
  const CodeRange* end = std::end(kNonPrintable);
  const CodeRange* r = std::upper_bound(std::begin(kNonPrintable), end, cp,
                                        [](char32_t c, const CodeRange& x) { return c < x.first; });
  return r == std::begin(kNonPrintable) || cp > (r - 1)->last;
}

void append_hex(std::string& out, char kind, std::uint32_t value, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '\\';
  out += kind;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += hex[(value >> shift) & 15];
}

// The code point of the valid UTF-8 sequence s[i, i + len).
char32_t decode_one(std::string_view s, std::size_t i, std::size_t len) {
  auto b = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]));
  };
  if (len == 2) return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
  if (len == 3) return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
  return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
}

// Appends one character as repr() writes it inside `quote`; returns bytes consumed.
std::size_t append_char(std::string& out, std::string_view s, std::size_t i, bool text,
                        char quote) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  switch (c) {
    case '\\':
      out += "\\\\";
      return 1;
    case '\n':
      out += "\\n";
      return 1;
    case '\r':
      out += "\\r";
      return 1;
    case '\t':
      out += "\\t";
      return 1;
    default:
      break;
  }
  if (c == static_cast<unsigned char>(quote)) {
    out += '\\';
    out += quote;
    return 1;
  }
  if (c >= 0x20 && c < 0x7f) {
    out += static_cast<char>(c);
    return 1;
  }
  if (text && c >= 0x80) {
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > 1 && i + len <= s.size() && is_valid_utf8(s.substr(i, len))) {
      char32_t cp = decode_one(s, i, len);
      if (printable(cp)) {
        out.append(s.substr(i, len));
      } else if (cp < 0x100) {
        append_hex(out, 'x', cp, 2);
      } else if (cp < 0x10000) {
        append_hex(out, 'u', cp, 4);
      } else {
        append_hex(out, 'U', cp, 8);
      }
      return len;
    }
  }
  append_hex(out, 'x', c, 2);
  return 1;
}

std::string quote(std::string_view s, std::size_t max_chars, bool text) {
  // Python's choice: single quotes unless the text holds ' and no ".
  char q =
      s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out = text ? "" : "b";
  out += q;
  for (std::size_t i = 0; i < s.size();) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    i += append_char(out, s, i, text, q);
  }
  out += q;
  return out;
}

class Printer {
 public:
  explicit Printer(std::size_t budget) : budget_(budget) {}

  void print(const Value& v) {
    if (full()) return;
    switch (v.kind()) {
      case ValueKind::none:
        out_ += "None";
        return;
      case ValueKind::boolean:
        out_ += v.as_bool() ? "True" : "False";
        return;
      case ValueKind::integer:
        out_ += std::to_string(v.as_int());
        return;
      case ValueKind::floating:
        out_ += float_repr(v.as_float());
        return;
      case ValueKind::string:
        out_ += quote_text(v.as_str(), budget_);
        return;
      case ValueKind::bytes:
        out_ += quote_bytes(v.as_bytes().view(), budget_);
        return;
      case ValueKind::bytearray:
        out_ += "bytearray(" + quote_bytes(v.as_bytes().view(), budget_) + ")";
        return;
      case ValueKind::tensor:
        print_tensor(v.as_tensor());
        return;
      case ValueKind::tuple:
        print_seq(v.items(), "(", v.items().size() == 1 ? ",)" : ")");
        return;
      case ValueKind::list:
        print_seq(v.items(), "[", "]");
        return;
      case ValueKind::mapping:
        print_map(v);
        return;
    }
  }

  std::string take() {
    if (out_.size() > budget_) {
      out_.resize(budget_);
      out_ += "...";
    }
    return std::move(out_);
  }

 private:
  bool full() const { return out_.size() > budget_; }

  void print_tensor(const Tensor& t) {
    out_ += "tensor(dtype=torch.";
    out_ += dtype_name(t.dtype());
    out_ += ", shape=(";
    for (std::size_t i = 0; i < t.dim() && !full(); ++i) {
      out_ += (i ? ", " : "") + std::to_string(t.shape()[i]);
    }
    out_ += t.dim() == 1 ? ",))" : "))";
  }

  void print_seq(std::span<const Value> items, const char* open, const char* close) {
    out_ += open;
    for (std::size_t i = 0; i < items.size() && !full(); ++i) {
      if (i) out_ += ", ";
      print(items[i]);
    }
    out_ += close;
  }

  void print_map(const Value& v) {
    out_ += "{";
    bool first = true;
    for (const auto& [key, value] : v.entries()) {
      if (full()) break;
      if (!first) out_ += ", ";
      first = false;
      print(key);
      out_ += ": ";
      print(value);
    }
    out_ += "}";
  }

  std::size_t budget_;
  std::string out_;
};

}  // namespace

std::string quote_text(std::string_view text, std::size_t max_chars) {
  return quote(text, max_chars, true);
}

std::string quote_bytes(std::string_view bytes, std::size_t max_chars) {
  return quote(bytes, max_chars, false);
}

std::string repr(const Value& v, std::size_t max_chars) {
  Printer printer(max_chars);
  printer.print(v);
  return printer.take();
}

std::ostream& operator<<(std::ostream& os, const Value& v) { return os << repr(v, 400); }

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that read back to d, as d.ddd...e+XX; then Python's layout (repr
  // of a float, 'r' format): positional when the exponent is in [-4, 16), else d.ddde+XX
  // with at least two exponent digits.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(end - buf));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  std::size_t e_pos = sci.find('e');
  std::string digits(sci.substr(0, e_pos));
  if (digits.size() > 1) digits.erase(1, 1);  // the '.'
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(),
                  exponent);
  auto n = static_cast<int>(digits.size());
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    int a = exponent < 0 ? -exponent : exponent;
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else if (exponent + 1 >= n) {
    out += digits + std::string(static_cast<std::size_t>(exponent + 1 - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exponent + 1)) + "." +
           digits.substr(static_cast<std::size_t>(exponent + 1));
  }
  return out;
}

}  // namespace hpref
