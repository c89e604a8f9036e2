// hpref._core: oracle (issue 11). Filled in by its owner.
#include "common.hpp"

namespace hpref::py {

void bind_oracle(nb::module_&) {}

}  // namespace hpref::py
