// Tensors the dispatch tests build (unit and simulator suites alike).
#pragma once

#include <cstdint>
#include <vector>

#include "hpref/tensor.hpp"

namespace hpref::test {

// An int64 tensor of `shape` holding first, first + 1, ... in row-major order.
Tensor int64_iota(std::vector<std::int64_t> shape, std::int64_t first = 0);

}  // namespace hpref::test
