// Names of error kinds and the internal-check failure path.
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

namespace detail {
void check_failed(const char* file, int line, const std::string& what) {
  throw Error(Errc::internal, std::string("internal check failed at ") + file + ":" +
                                  std::to_string(line) + ": " + what);
}
}  // namespace detail

}  // namespace hpref
