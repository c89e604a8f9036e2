// Tensor construction checks and device names (SPEC 1.2).
#include "hpref/tensor.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "hpref/error.hpp"

namespace hpref {

std::string Device::str() const {
  return type == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return {};
  if (text.substr(0, 5) == "cuda:") {
    std::string_view digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
        index >= 0) {
      return {DeviceType::cuda, index};
    }
  }
  throw Error(Errc::invalid_argument,
              "device '" + std::string(text) + "' is not 'cpu' or 'cuda:<index>'");
}

std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) noexcept {
  // One pass: a negative dim refuses, a zero dim makes 0 even past an overflow.
  std::int64_t product = 1;
  bool zero = false, overflow = false;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
    overflow |= __builtin_mul_overflow(product, d, &product);
  }
  if (zero) return 0;
  if (overflow) return std::nullopt;
  return product;
}

namespace {

// `shape` as Python writes a tuple ("(2, -1)", "(5,)"), the first 8 dims then a count.
std::string shape_text(std::span<const std::int64_t> shape) {
  constexpr std::size_t kShown = 8;
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size() && i < kShown; ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  if (shape.size() > kShown) out += ", ... " + std::to_string(shape.size()) + " dims";
  if (shape.size() == 1) out += ",";
  return out + ")";
}

}  // namespace

Tensor::Tensor() : Tensor(DType::float32, std::vector<std::int64_t>{0}, SharedBytes()) {}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, SharedBytes data, Device device)
    : Tensor(dtype, std::make_shared<const std::vector<std::int64_t>>(std::move(shape)),
             std::move(data), device) {}

Tensor::Tensor(DType dtype, std::shared_ptr<const std::vector<std::int64_t>> shape,
               SharedBytes data, Device device)
    : dtype_(dtype), shape_(std::move(shape)), data_(std::move(data)), device_(device) {
  HPREF_CHECK(shape_ != nullptr);
  auto numel = checked_numel(*shape_);
  std::int64_t nbytes = 0;
  if (!numel) {
    auto negative = std::ranges::find_if(*shape_, [](std::int64_t d) { return d < 0; });
    throw Error(
        Errc::invalid_tensor,
        "tensor shape " + shape_text(*shape_) +
            (negative != shape_->end() ? " has a negative dim (" + std::to_string(*negative) + ")"
                                       : std::string(" has more elements than int64 can count")));
  }
  if (__builtin_mul_overflow(*numel, static_cast<std::int64_t>(element_size(dtype)), &nbytes)) {
    throw Error(Errc::invalid_tensor, "tensor shape " + shape_text(*shape_) + " of dtype " +
                                          std::string(dtype_name(dtype)) +
                                          " has more bytes than int64 can count");
  }
  if (static_cast<std::uint64_t>(nbytes) != data_.size()) {
    throw Error(Errc::invalid_tensor, "tensor of dtype " + std::string(dtype_name(dtype)) +
                                          " needs " + std::to_string(nbytes) + " bytes, got " +
                                          std::to_string(data_.size()));
  }
  numel_ = *numel;
}

Tensor Tensor::copy_of(DType dtype, std::vector<std::int64_t> shape,
                       std::span<const std::uint8_t> bytes, Device device) {
  return Tensor(dtype, std::move(shape), SharedBytes::copy_of(bytes), device);
}

Tensor Tensor::on(Device device) const {
  Tensor copy = *this;
  copy.device_ = device;
  return copy;
}

bool operator==(const Tensor& a, const Tensor& b) noexcept {
  return a.dtype() == b.dtype() && std::ranges::equal(a.shape(), b.shape()) &&
         a.storage() == b.storage();
}

}  // namespace hpref
