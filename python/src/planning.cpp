// hpref._core: planning (issue 11). Filled in by its owner.
#include "common.hpp"

namespace hpref::py {

void bind_planning(nb::module_&) {}

}  // namespace hpref::py
