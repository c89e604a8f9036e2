// A CLI11 check for text options whose empty value would mean "not given": `--trace ""`,
// `--key-class ""` are refused naming the option ("--trace: the file name is empty"),
// never run as if the option were absent.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace hpref::cli {

// `what` names the value: "file name" -> "the file name is empty".
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        return text.empty() ? "the " + what + " is empty" : std::string();
      },
      "");
}

}  // namespace hpref::cli
