// Tensor (SPEC 1.2): dtype, shape, device and C-contiguous little-endian element bytes.
// The bytes are a SharedBytes view, so a decoded tensor shares the received buffer and
// keeps it alive. Wire offsets carry no alignment: typed access goes through memcpy.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "hpref/dtype.hpp"
#include "hpref/shared_bytes.hpp"

namespace hpref {

enum class DeviceType : unsigned char { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  std::string str() const;                     // "cpu" or "cuda:N"
  static Device parse(std::string_view text);  // throws Error invalid_argument
  bool operator==(const Device&) const = default;
};

// Product of the dims; nullopt when a dim is negative or the product (with no zero
// dim) exceeds int64. A zero dim makes it 0 whatever the others (SPEC 2.4).
std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) noexcept;

class Tensor {
 public:
  // An empty float32 tensor of shape [0].
  Tensor();
  // Views `data` (which must hold exactly numel * element_size bytes: else Error
  // invalid_tensor). `shape` dims must be >= 0.
  Tensor(DType dtype, std::vector<std::int64_t> shape, SharedBytes data, Device device = {});
  Tensor(DType dtype, std::shared_ptr<const std::vector<std::int64_t>> shape, SharedBytes data,
         Device device = {});
  // Copies `bytes` into a fresh buffer.
  static Tensor copy_of(DType dtype, std::vector<std::int64_t> shape,
                        std::span<const std::uint8_t> bytes, Device device = {});

  DType dtype() const noexcept { return dtype_; }
  std::span<const std::int64_t> shape() const noexcept { return *shape_; }
  const std::shared_ptr<const std::vector<std::int64_t>>& shared_shape() const noexcept {
    return shape_;
  }
  std::size_t dim() const noexcept { return shape_->size(); }
  std::int64_t numel() const noexcept { return numel_; }
  std::size_t nbytes() const noexcept { return data_.size(); }
  std::span<const std::uint8_t> bytes() const noexcept { return data_.span(); }
  const SharedBytes& storage() const noexcept { return data_; }
  Device device() const noexcept { return device_; }
  // The same bytes labelled with another device (the reference keeps host bytes).
  Tensor on(Device device) const;

  // Element i as T (sizeof(T) must equal the element size), read with memcpy.
  template <class T>
  T element(std::int64_t i) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T out;
    std::memcpy(&out, data_.data() + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
    return out;
  }

 private:
  DType dtype_;
  std::shared_ptr<const std::vector<std::int64_t>> shape_;
  std::int64_t numel_ = 0;
  SharedBytes data_;
  Device device_;
};

// Structural equality of tensors: dtype, shape and bytes (the device is not compared).
bool operator==(const Tensor& a, const Tensor& b) noexcept;

}  // namespace hpref
