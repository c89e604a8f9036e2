// Python-like repr for error messages.
#include "hpref/repr.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "hpref/utf8.hpp"
#include "hpref/value.hpp"

namespace hpref {
namespace {

void append_escaped_byte(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

// Appends one escaped character; returns bytes consumed.
std::size_t append_char(std::string& out, std::string_view s, std::size_t i, bool text) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  switch (c) {
    case '\\': out += "\\\\"; return 1;
    case '\'': out += "\\'"; return 1;
    case '\n': out += "\\n"; return 1;
    case '\r': out += "\\r"; return 1;
    case '\t': out += "\\t"; return 1;
    default: break;
  }
  if (c >= 0x20 && c < 0x7f) {
    out += static_cast<char>(c);
    return 1;
  }
  if (text && c >= 0x80) {
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > 1 && i + len <= s.size() && is_valid_utf8(s.substr(i, len))) {
      out.append(s.substr(i, len));
      return len;
    }
  }
  append_escaped_byte(out, c);
  return 1;
}

std::string quote(std::string_view s, std::size_t max_chars, bool text) {
  std::string out = text ? "'" : "b'";
  for (std::size_t i = 0; i < s.size();) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    i += append_char(out, s, i, text);
  }
  out += "'";
  return out;
}

class Printer {
 public:
  explicit Printer(std::size_t budget) : budget_(budget) {}

  void print(const Value& v) {
    if (full()) return;
    switch (v.kind()) {
      case ValueKind::none: out_ += "None"; return;
      case ValueKind::boolean: out_ += v.as_bool() ? "True" : "False"; return;
      case ValueKind::integer: out_ += std::to_string(v.as_int()); return;
      case ValueKind::floating: out_ += float_repr(v.as_float()); return;
      case ValueKind::string: out_ += quote_text(v.as_str(), budget_); return;
      case ValueKind::bytes: out_ += quote_bytes(v.as_bytes().view(), budget_); return;
      case ValueKind::bytearray:
        out_ += "bytearray(" + quote_bytes(v.as_bytes().view(), budget_) + ")";
        return;
      case ValueKind::tensor: print_tensor(v.as_tensor()); return;
      case ValueKind::tuple: print_seq(v.items(), "(", v.items().size() == 1 ? ",)" : ")"); return;
      case ValueKind::list: print_seq(v.items(), "[", "]"); return;
      case ValueKind::mapping: print_map(v); return;
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
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace hpref
