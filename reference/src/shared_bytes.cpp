// SharedBytes construction: copies go to one uninitialised allocation (no zero fill).
#include "hpref/shared_bytes.hpp"

#include <cstring>

#include "hpref/error.hpp"

namespace hpref {

SharedBytes SharedBytes::copy_of(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return {};
  std::shared_ptr<std::uint8_t[]> storage(new std::uint8_t[bytes.size()]);
  std::memcpy(storage.get(), bytes.data(), bytes.size());
  std::span<const std::uint8_t> view(storage.get(), bytes.size());
  return SharedBytes(std::shared_ptr<const void>(storage, storage.get()), view);
}

SharedBytes SharedBytes::copy_of(std::string_view bytes) {
  return copy_of(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                               bytes.size()));
}

SharedBytes SharedBytes::adopt(std::vector<std::uint8_t>&& bytes) {
  auto owner = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  std::span<const std::uint8_t> view(owner->data(), owner->size());
  return SharedBytes(owner, view);
}

SharedBytes SharedBytes::slice(std::size_t offset, std::size_t length) const {
  HPREF_CHECK(offset <= bytes_.size() && length <= bytes_.size() - offset);
  return SharedBytes(owner_, bytes_.subspan(offset, length));
}

bool operator==(const SharedBytes& a, const SharedBytes& b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.data() == b.data() || a.empty()) return true;
  return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hpref
