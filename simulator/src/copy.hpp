// The passes over payload bytes a rank makes (see docs/simulator.md, "Cost model"): the copy
// into staging with its checksum at launch, the checksum again at wait, the copies out of
// staging. Same values as hpref::buffer_checksum / copy_with_checksum (reference/), with
// AVX2 where the CPU has it, and streaming (non-temporal) stores for large copies: their
// destination is read next by another process, or by the program much later, so filling
// the cache with it only evicts what is read next.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpref::sim::detail {

// buffer_checksum(src, bytes), and a copy to dst of every byte of src outside
// [skip_begin, skip_end) (a few bytes inside it may be copied too).
std::uint64_t checksum_copy(void* dst, const void* src, std::size_t bytes,
                            std::size_t skip_begin = 0, std::size_t skip_end = 0) noexcept;
// buffer_checksum(src, bytes).
std::uint64_t checksum(const void* src, std::size_t bytes) noexcept;
// memcpy (the ranges do not overlap), with streaming stores if `stream` (and AVX2).
void copy(void* dst, const void* src, std::size_t bytes, bool stream) noexcept;

// Copies of at least this many bytes use streaming stores (when AVX2 is there); a wait's
// copies out of staging do when they add up to that much.
inline constexpr std::size_t kStreamBytes = std::size_t{2} << 20;

}  // namespace hpref::sim::detail
