// Shared pieces of the fuzz targets: the one rule that only hpref::Error may escape the
// library (anything else, and an Error of kind `internal`, is our bug and aborts with a
// message), structural comparisons of items, and a size budget that keeps a round trip
// cheap when a memo-shared value would expand on re-encoding.
#pragma once

#include <sys/resource.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "hpref/codec.hpp"
#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/value.hpp"

namespace hpref::fuzz {

// Work a round trip may do, in nodes plus bytes of strings and leaves: values larger
// than this (possible through memo sharing) are decoded but not re-encoded.
inline constexpr std::int64_t kRoundTripBudget = std::int64_t{1} << 18;

[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "\n*** hpref fuzz check failed: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::fflush(stderr);
  std::abort();
}

#define HPREF_FUZZ_REQUIRE(cond, what)                                           \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ::hpref::fuzz::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + \
                          ": REQUIRE(" #cond ") " + std::string(what));          \
    }                                                                            \
  } while (0)

// The outcome of one library call: the result, or the kind of the Error it refused with.
template <class T>
struct Outcome {
  std::optional<T> value;
  std::optional<Errc> error;
  explicit operator bool() const noexcept { return value.has_value(); }
};

// Runs `f`; an hpref::Error (other than `internal`) is a refusal, anything else aborts.
template <class F>
auto attempt(const char* what, F&& f) -> Outcome<decltype(f())> {
  Outcome<decltype(f())> out;
  try {
    out.value.emplace(f());
  } catch (const Error& e) {
    if (e.code() == Errc::internal) {
      fail(std::string(what) + " hit an internal check: " + e.what());
    }
    out.error = e.code();
  } catch (const std::exception& e) {
    fail(std::string(what) + " let a non-hpref exception escape (" + typeid(e).name() +
         "): " + e.what());
  } catch (...) {
    fail(std::string(what) + " let a non-std exception escape");
  }
  return out;
}

// SPEC 2.4: decoding never allocates more than a small multiple of the input. Each decoder
// target holds an RssBound while it runs one input: the growth of the process's peak RSS
// (getrusage's ru_maxrss, a high-water mark) during the input may not exceed
// kRssPerInputByte bytes per input byte plus kRssSlackKb. That growth is at most the
// input's own peak, so a correct decoder never fails it (it can miss an input whose peak
// stays under an earlier one's, never wrongly blame one); libFuzzer's -rss_limit_mb bounds
// the whole process. The factor is what a legitimate worst case needs: a tuple of 1 Mi
// empty dicts from 1 MB (each dict a container node) peaks near 172 bytes per input byte;
// the stack attack of issue 10 (one-byte pushes until STOP) took 238 and grew with the
// input, and now stops at the stack limit (SPEC 2.3) near 145 MB whatever the input.
#if defined(__SANITIZE_ADDRESS__)
#define HPREF_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HPREF_FUZZ_ASAN 1
#endif
#endif
#ifdef HPREF_FUZZ_ASAN
inline constexpr long kRssPerInputByte = 3 * 192;  // redzones and quarantine
inline constexpr long kRssSlackKb = 3 * 64 * 1024;
#else
inline constexpr long kRssPerInputByte = 192;
inline constexpr long kRssSlackKb = 64 * 1024;
#endif

inline long max_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

class RssBound {
 public:
  RssBound(const char* target, std::size_t input_size)
      : target_(target),
        limit_kb_(kRssSlackKb + static_cast<long>(input_size / 1024 + 1) * kRssPerInputByte),
        start_kb_(max_rss_kb()),
        input_size_(input_size) {}
  RssBound(const RssBound&) = delete;
  RssBound& operator=(const RssBound&) = delete;
  ~RssBound() {
    long grown = max_rss_kb() - start_kb_;
    if (grown > limit_kb_) {
      fail(std::string(target_) + ": peak RSS grew by " + std::to_string(grown) +
           " KiB on an input of " + std::to_string(input_size_) + " bytes, over the bound of " +
           std::to_string(limit_kb_) + " KiB (SPEC 2.4: a small multiple of the input)");
    }
  }

 private:
  const char* target_;
  long limit_kb_;
  long start_kb_;
  std::size_t input_size_;
};

inline std::string kind_text(const std::optional<Errc>& e) {
  return e ? std::string(errc_name(*e)) : std::string("no error");
}

// Subtracts v's expanded size (memo-shared children counted per use) from `budget`;
// false once it is spent. Stops walking as soon as it is, so it costs at most `budget`.
inline bool spend(const Value& v, std::int64_t& budget) {
  budget -= 1;
  switch (v.kind()) {
    case ValueKind::string:
      budget -= static_cast<std::int64_t>(v.as_str().size());
      break;
    case ValueKind::bytes:
    case ValueKind::bytearray:
      budget -= static_cast<std::int64_t>(v.as_bytes().size());
      break;
    case ValueKind::tensor:
      budget -= static_cast<std::int64_t>(v.as_tensor().nbytes() + v.as_tensor().dim());
      break;
    case ValueKind::tuple:
    case ValueKind::list:
      for (const Value& child : v.items()) {
        if (!spend(child, budget)) return false;
      }
      break;
    case ValueKind::mapping:
      for (const auto& [key, child] : v.entries()) {
        if (!spend(key, budget) || !spend(child, budget)) return false;
      }
      break;
    default:
      break;
  }
  return budget >= 0;
}

inline bool small_enough(const Value& v, std::int64_t budget = kRoundTripBudget) {
  if (v.node_count() > static_cast<std::uint64_t>(budget)) return false;
  return spend(v, budget);
}

inline bool small_enough(std::span<const Item> items, std::int64_t budget = kRoundTripBudget) {
  for (const Item& item : items) {
    if (!spend(item.first, budget) || !spend(item.second, budget)) return false;
  }
  return true;
}

// Whether a tensor appears anywhere in v (keys included): such Values cannot be pickled.
inline bool holds_tensor(const Value& v) {
  if (v.is(ValueKind::tensor)) return true;
  if (v.is(ValueKind::tuple) || v.is(ValueKind::list)) {
    for (const Value& child : v.items()) {
      if (holds_tensor(child)) return true;
    }
  }
  if (v.is(ValueKind::mapping)) {
    for (const auto& [key, child] : v.entries()) {
      if (holds_tensor(key) || holds_tensor(child)) return true;
    }
  }
  return false;
}

inline bool items_equal(std::span<const Item> a, std::span<const Item> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].first == b[i].first) || !(a[i].second == b[i].second)) return false;
  }
  return true;
}

// Structural equality, except that any two NaN floats are equal (a text format that
// writes "nan" cannot keep the payload bits).
inline bool equal_nan_blind(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::floating:
      if (std::isnan(a.as_float()) && std::isnan(b.as_float())) return true;
      return a == b;
    case ValueKind::tuple:
    case ValueKind::list: {
      auto x = a.items();
      auto y = b.items();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal_nan_blind(x[i], y[i])) return false;
      }
      return true;
    }
    case ValueKind::mapping: {
      auto x = a.entries();
      auto y = b.entries();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal_nan_blind(x[i].first, y[i].first) ||
            !equal_nan_blind(x[i].second, y[i].second)) {
          return false;
        }
      }
      return true;
    }
    default:
      return a == b;
  }
}

inline bool items_equal_nan_blind(std::span<const Item> a, std::span<const Item> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!equal_nan_blind(a[i].first, b[i].first) || !equal_nan_blind(a[i].second, b[i].second)) {
      return false;
    }
  }
  return true;
}

inline std::string items_repr(std::span<const Item> items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size() && out.size() < 400; ++i) {
    if (i) out += ", ";
    out += "(" + repr(items[i].first, 80) + ", " + repr(items[i].second, 160) + ")";
  }
  return out + "]";
}

// SPEC 2.6 for an item list that encodes: the encoder's bytes decode (strictly) to equal
// items and re-encode to the same bytes. Returns the bytes, or nullopt when the encoder
// refused with `allowed` (a Value the format cannot carry).
inline std::optional<std::vector<std::uint8_t>> check_encode_round_trip(
    std::span<const Item> items, std::initializer_list<Errc> allowed,
    const EncodeOptions& encode_options = {}) {
  auto encoded = attempt("encode_segment", [&] { return encode_segment(items, encode_options); });
  if (!encoded) {
    bool ok = false;
    for (Errc e : allowed) ok = ok || *encoded.error == e;
    HPREF_FUZZ_REQUIRE(ok, "encode_segment refused decodable items with " +
                               kind_text(encoded.error) + ": " + items_repr(items));
    return std::nullopt;
  }
  DecodeOptions strict;
  strict.strict = true;
  auto again = attempt("decode_segment(encoded)", [&] {
    return decode_segment(std::span<const std::uint8_t>(*encoded.value), strict);
  });
  HPREF_FUZZ_REQUIRE(again, "the encoder's output does not decode strictly (" +
                                kind_text(again.error) + "): " + items_repr(items));
  HPREF_FUZZ_REQUIRE(
      items_equal(*again.value, items),
      "decode(encode(items)) != items: " + items_repr(items) + " vs " + items_repr(*again.value));
  auto re_encoded = attempt("encode_segment(again)",
                            [&] { return encode_segment(*again.value, encode_options); });
  HPREF_FUZZ_REQUIRE(re_encoded, "re-encoding decoded encoder output failed (" +
                                     kind_text(re_encoded.error) + ")");
  HPREF_FUZZ_REQUIRE(*re_encoded.value == *encoded.value,
                     "encode(decode(s)) != s for an encoder output s");
  return std::move(*encoded.value);
}

}  // namespace hpref::fuzz
