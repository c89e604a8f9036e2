// Names of error kinds, the messages of errors and the internal-check failure path.
#include "hpref/error.hpp"

namespace hpref {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
#define HPREF_ERRC_NAME(name) \
  case Errc::name:            \
    return #name;
    HPREF_ERROR_KINDS(HPREF_ERRC_NAME)
#undef HPREF_ERRC_NAME
  }
  return "unknown";
}

std::string Error::visible(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  out.reserve(message.size() + 8);
  for (char c : message) {
    if (c == '\0') {
      out += "\\x00";
    } else {
      out += c;
    }
  }
  return out;
}

namespace detail {

void check_failed(const char* file, int line, const std::string& what) {
  throw Error(Errc::internal, std::string("internal check failed at ") + file + ":" +
                                  std::to_string(line) + ": " + what);
}
}  // namespace detail

}  // namespace hpref
