// Helpers shared by the unit tests: byte strings from literals and hex, and a check
// that an expression throws hpref::Error of one kind whose message names a value.
#pragma once

#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/error.hpp"

namespace hpref::test {

// Bytes of a string literal that may contain \0: bytes_of("ab\0c"sv).
inline std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

inline std::vector<std::uint8_t> unhex(std::string_view hex) {
  std::vector<std::uint8_t> out;
  auto digit = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(digit(hex[i]) * 16 + digit(hex[i + 1])));
  }
  return out;
}

inline std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char d[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out.push_back(d[b >> 4]);
    out.push_back(d[b & 15]);
  }
  return out;
}

inline std::string hex(std::string_view bytes) {
  return hex(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                           bytes.size()));
}

}  // namespace hpref::test

// Checks that `expr` throws hpref::Error with code `errc` whose message contains `needle`.
#define HPREF_CHECK_ERROR(expr, errc, needle)                                                    \
  do {                                                                                           \
    bool hpref_thrown_ = false;                                                                  \
    try {                                                                                        \
      (void)(expr);                                                                              \
    } catch (const ::hpref::Error& e) {                                                          \
      hpref_thrown_ = true;                                                                      \
      BOOST_CHECK_MESSAGE(e.code() == (errc), "expected kind " << ::hpref::errc_name(errc)       \
                                                               << ", got " << e.kind() << ": "   \
                                                               << e.what());                     \
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos,               \
                          "message '" << e.what() << "' does not name '" << (needle) << "'");    \
    }                                                                                            \
    BOOST_CHECK_MESSAGE(hpref_thrown_,                                                           \
                        "expected hpref::Error " << ::hpref::errc_name(errc) << " from " #expr); \
  } while (0)
