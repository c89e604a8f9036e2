// SPEC 8 oracle: forward slices of the global bank and backward sums in the fixed order.
#include "hpref/oracle.hpp"

#include <bit>
#include <complex>
#include <cstring>
#include <string>

#include "hpref/error.hpp"

namespace hpref {
namespace {

[[noreturn]] void mismatch(const std::string& what) { throw Error(Errc::oracle_mismatch, what); }

// dst[i] = a[i] + b[i] for `count` elements of T (float, double, or an unsigned integer:
// wrapping sums, as torch ints do), 64 bytes a step in GCC's generic vectors: each lane is
// the scalar sum, so the result is bitwise the scalar loop's. dst may be a (in place).
template <class T>
void add_as(std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b, std::size_t count) {
  typedef T Lanes __attribute__((vector_size(64)));
  constexpr std::size_t kLanes = 64 / sizeof(T);
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    Lanes x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof x);
    std::memcpy(&y, b + i * sizeof(T), sizeof y);
    x += y;
    std::memcpy(dst + i * sizeof(T), &x, sizeof x);
  }
  for (; i < count; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof x);
    std::memcpy(&y, b + i * sizeof(T), sizeof y);
    x = static_cast<T>(x + y);
    std::memcpy(dst + i * sizeof(T), &x, sizeof x);
  }
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    float f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

std::uint16_t float_to_half(float f) {  // round to nearest even
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);  // nan, inf
  if (abs >= 0x477ff000u) return sign | 0x7c00;                                 // overflow
  if (abs < 0x38800000u) {  // subnormal or zero: scale to units of 2^-24 and round
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  std::uint32_t mant = abs + 0xc8000fffu + ((abs >> 13) & 1);  // rebias and round
  return sign | static_cast<std::uint16_t>(mant >> 13);
}

float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

template <float (*Load)(std::uint16_t), std::uint16_t (*Store)(float)>
void add_narrow(std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b,
                std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t x, y;
    std::memcpy(&x, a + 2 * i, 2);
    std::memcpy(&y, b + 2 * i, 2);
    std::uint16_t c = Store(Load(x) + Load(y));
    std::memcpy(dst + 2 * i, &c, 2);
  }
}

std::int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? -1 : t.shape()[0]; }

}  // namespace

std::size_t row_bytes(const Tensor& t) {
  std::int64_t rows = rows_of(t);
  if (rows <= 0) {
    std::size_t elems = 1;
    for (std::size_t i = 1; i < t.dim(); ++i) elems *= static_cast<std::size_t>(t.shape()[i]);
    return elems * element_size(t.dtype());
  }
  return t.nbytes() / static_cast<std::size_t>(rows);
}

Tensor rows_like(const Tensor& t, std::int64_t rows, std::vector<std::uint8_t> bytes) {
  std::vector<std::int64_t> shape(t.shape().begin(), t.shape().end());
  shape[0] = rows;
  return Tensor(t.dtype(), std::move(shape), SharedBytes::adopt(std::move(bytes)), t.device());
}

void add_elements(DType dtype, std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b,
                  std::size_t count) {
  switch (dtype) {
    case DType::float64:
      return add_as<double>(dst, a, b, count);
    case DType::float32:
      return add_as<float>(dst, a, b, count);
    case DType::float16:
      return add_narrow<half_to_float, float_to_half>(dst, a, b, count);
    case DType::bfloat16:
      return add_narrow<bf16_to_float, float_to_bf16>(dst, a, b, count);
    case DType::complex128:
      return add_as<double>(dst, a, b, 2 * count);
    case DType::complex64:
      return add_as<float>(dst, a, b, 2 * count);
    case DType::complex32:
      return add_narrow<half_to_float, float_to_half>(dst, a, b, 2 * count);
    case DType::int64:
    case DType::uint64:
      return add_as<std::uint64_t>(dst, a, b, count);
    case DType::int32:
    case DType::uint32:
      return add_as<std::uint32_t>(dst, a, b, count);
    case DType::int16:
    case DType::uint16:
      return add_as<std::uint16_t>(dst, a, b, count);
    case DType::int8:
    case DType::uint8:
      return add_as<std::uint8_t>(dst, a, b, count);
    case DType::boolean:
      for (std::size_t i = 0; i < count; ++i) dst[i] = (a[i] | b[i]) ? 1 : 0;
      return;
    default:
      throw Error(
          Errc::unsupported_arithmetic,
          "summing gradients of dtype " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

void add_elements(DType dtype, std::uint8_t* dst, const std::uint8_t* src, std::size_t count) {
  add_elements(dtype, dst, dst, src, count);
}

std::vector<std::int64_t> route_owner_offsets(std::span<const Route> routes) {
  std::vector<std::int64_t> owners(routes.size() + 1, 0);
  for (std::size_t r = 0; r < routes.size(); ++r) {
    owners[r] = routes[r].global_start + routes[r].local_output_start;
    owners[r + 1] = owners[r] + routes[r].local_length;
  }
  return owners;
}

std::vector<Tensor> oracle_forward(const Tensor& bank, std::span<const Route> routes) {
  if (bank.dim() == 0) mismatch("the global bank must have a sequence axis 0");
  std::int64_t rows = bank.shape()[0];
  std::size_t width = row_bytes(bank);
  std::vector<Tensor> out;
  for (std::size_t r = 0; r < routes.size(); ++r) {
    const Route& route = routes[r];
    if (route.global_start < 0 || route.global_end < route.global_start ||
        route.global_end > rows) {
      mismatch("rank " + std::to_string(r) + "'s interval [" + std::to_string(route.global_start) +
               ", " + std::to_string(route.global_end) + ") lies outside the bank of " +
               std::to_string(rows) + " rows");
    }
    auto view = bank.storage().slice(
        static_cast<std::size_t>(route.global_start) * width,
        static_cast<std::size_t>(route.global_end - route.global_start) * width);
    std::vector<std::int64_t> shape(bank.shape().begin(), bank.shape().end());
    shape[0] = route.global_end - route.global_start;
    out.emplace_back(bank.dtype(), std::move(shape), std::move(view), bank.device());
  }
  return out;
}

std::vector<Tensor> oracle_backward(std::span<const Tensor> grads, std::span<const Route> routes) {
  if (grads.size() != routes.size() || grads.empty()) {
    mismatch("oracle_backward needs one output gradient per route, got " +
             std::to_string(grads.size()) + " for " + std::to_string(routes.size()));
  }
  const Tensor& first = grads[0];
  if (first.dim() == 0) mismatch("output gradients must have a sequence axis 0");
  std::size_t width = row_bytes(first);
  for (std::size_t r = 0; r < grads.size(); ++r) {
    const Tensor& g = grads[r];
    bool same_rows = g.dim() == first.dim() && g.dtype() == first.dtype() &&
                     std::equal(g.shape().begin() + 1, g.shape().end(), first.shape().begin() + 1);
    if (!same_rows || rows_of(g) != routes[r].global_end - routes[r].global_start) {
      // What it is and what rank 0's gradient sets, so the caller sees which part is off.
      auto dims = [](std::span<const std::int64_t> shape, std::size_t from) {
        std::string out = "[";
        for (std::size_t i = from; i < shape.size(); ++i) {
          out += (i > from ? ", " : "") + std::to_string(shape[i]);
        }
        return out + "]";
      };
      mismatch("rank " + std::to_string(r) + "'s output gradient does not have " +
               std::to_string(routes[r].global_end - routes[r].global_start) +
               " rows of the common row shape and dtype (rank 0's rows: " + dims(first.shape(), 1) +
               " " + std::string(dtype_name(first.dtype())) + "; rank " + std::to_string(r) +
               "'s gradient: shape " + dims(g.shape(), 0) + " " +
               std::string(dtype_name(g.dtype())) + ")");
    }
  }
  auto owners = route_owner_offsets(routes);
  std::size_t elems = width / element_size(first.dtype());
  std::vector<Tensor> out;
  for (std::size_t r = 0; r < routes.size(); ++r) {
    const Route& route = routes[r];
    std::vector<std::uint8_t> grad(static_cast<std::size_t>(route.local_length) * width);
    if (!grad.empty()) {  // own block first
      std::memcpy(
          grad.data(),
          grads[r].bytes().data() + static_cast<std::size_t>(route.local_output_start) * width,
          grad.size());
    }
    for (std::size_t q = 0; q < routes.size(); ++q) {  // then peers ascending
      if (q == r) continue;
      std::int64_t lo = std::max(owners[r], routes[q].global_start);
      std::int64_t hi = std::min(owners[r + 1], routes[q].global_end);
      if (hi > lo) {  // rows [lo, hi) are contiguous on both sides: one add per peer
        add_elements(
            first.dtype(), grad.data() + static_cast<std::size_t>(lo - owners[r]) * width,
            grads[q].bytes().data() + static_cast<std::size_t>(lo - routes[q].global_start) * width,
            static_cast<std::size_t>(hi - lo) * elems);
      }
    }
    out.push_back(rows_like(first, route.local_length, std::move(grad)));
  }
  return out;
}

}  // namespace hpref
