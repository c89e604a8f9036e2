#include "tensors.hpp"

#include <cstring>

#include "hpref/shared_bytes.hpp"

namespace hpref::test {

Tensor int64_iota(std::vector<std::int64_t> shape, std::int64_t first) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n) * 8);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t v = first + i;
    std::memcpy(bytes.data() + i * 8, &v, 8);
  }
  return Tensor(DType::int64, std::move(shape), SharedBytes::adopt(std::move(bytes)));
}

}  // namespace hpref::test
