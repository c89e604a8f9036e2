// Reads small structured arguments from fuzz bytes: each call consumes a few bytes and
// returns 0 once the input is exhausted, so every input decodes to some arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hpref::fuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  // Mostly small signed values, sometimes extremes: one selector byte then 2 or 8 bytes.
  std::int64_t integer() {
    std::uint8_t sel = byte();
    if (sel < 0xf0) {
      std::int16_t v = static_cast<std::int16_t>(byte() | (byte() << 8));
      return (sel & 1) ? v : (v & 0x3f);  // half of them in [0, 64)
    }
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return static_cast<std::int64_t>(v);
  }

  std::size_t count(std::size_t max) { return byte() % (max + 1); }
  bool done() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace hpref::fuzz
