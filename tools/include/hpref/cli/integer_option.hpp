// A CLI11 check for integer options. CLI11 2.1 converts integers with strtoll and keeps
// the clamped value of an out-of-range one: this check runs on the text first and refuses
// anything that is not a decimal integer within T's range, naming it (never a silent clamp).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <limits>
#include <string>

namespace hpref::cli {

// integer_of<T>() or integer_of(variable): the variable only names T.
template <typename T>
CLI::Validator integer_of(const T& = T{}) {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T v{};
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (!text.empty() && ec == std::errc() && ptr == end) return {};
        return "'" + text + "' is not an integer in [" +
               std::to_string(std::numeric_limits<T>::min()) + ", " +
               std::to_string(std::numeric_limits<T>::max()) + "]";
      },
      "");
}

}  // namespace hpref::cli
