// SharedBytes: a read-only byte span together with the owner that keeps it alive.
// Decoded tensors and byte strings are such views into the received buffer (SPEC 1.2),
// so decoding copies nothing and the buffer lives as long as any view of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace hpref {

class SharedBytes {
 public:
  SharedBytes() = default;
  SharedBytes(std::shared_ptr<const void> owner, std::span<const std::uint8_t> bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}

  // One fresh allocation holding a copy of `bytes`.
  static SharedBytes copy_of(std::span<const std::uint8_t> bytes);
  static SharedBytes copy_of(std::string_view bytes);
  // Takes ownership of a vector without copying its bytes.
  static SharedBytes adopt(std::vector<std::uint8_t>&& bytes);

  std::span<const std::uint8_t> span() const noexcept { return bytes_; }
  const std::uint8_t* data() const noexcept { return bytes_.data(); }
  std::size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }
  std::string_view view() const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  // A view of [offset, offset + length) sharing the owner; the range must lie inside.
  SharedBytes slice(std::size_t offset, std::size_t length) const;
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  std::span<const std::uint8_t> bytes_;
};

// Byte-wise equality of the viewed bytes.
bool operator==(const SharedBytes& a, const SharedBytes& b) noexcept;

}  // namespace hpref
