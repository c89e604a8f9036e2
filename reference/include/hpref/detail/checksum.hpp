// The passes over payload bytes behind buffer_checksum / copy_with_checksum (communicator.hpp),
// for the simulator's staging (docs/simulator.md, "Cost model") and the tests: AVX2 where the
// CPU has it (checked at run time), else portable C++, with the same values either way;
// streaming (non-temporal) stores for large copies, whose destination is read next by another
// process or much later, so that filling the cache with it only evicts what is read next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hpref::detail {

// buffer_checksum(src, bytes); when dst is not null, also a copy to dst of every byte of src
// outside [skip_begin, skip_end) (bytes inside it may be copied too: the portable pass
// copies them all). Copies of kStreamBytes or more to a 32-byte aligned dst stream.
std::uint64_t checksum_copy(void* dst, const void* src, std::size_t bytes,
                            std::size_t skip_begin = 0, std::size_t skip_end = 0) noexcept;
// buffer_checksum(src, bytes), and a copy of src's bytes [begin, end) (clipped to bytes) to
// dst, which receives src + begin: one read of src where a checksum and a memcpy of the range
// are two (all_to_all_v's own block at the simulator's wait). dst must not overlap src.
// Streaming stores if `stream`, where dst is 16-byte aligned relative to src's 32-byte blocks.
std::uint64_t checksum_copy_range(void* dst, const void* src, std::size_t bytes, std::size_t begin,
                                  std::size_t end, bool stream) noexcept;
// memcpy (the ranges do not overlap), with streaming stores if `stream` (and AVX2).
void copy_bytes(void* dst, const void* src, std::size_t bytes, bool stream) noexcept;

// all_to_all_v's sent bytes when its blocks have displacements: the union of the blocks
// [displs[i], displs[i] + counts[i]) as maximal runs, in ascending order (blocks that overlap
// or touch make one run; empty blocks none). The sizes are checked (check_all_to_all_v).
struct ByteRun {
  std::size_t begin, end;
};
std::vector<ByteRun> block_runs(std::span<const std::size_t> counts,
                                std::span<const std::size_t> displs);
// The displacements of blocks back to back from 0: counts' prefix sums.
std::vector<std::size_t> packed_displs(std::span<const std::size_t> counts);
// Whether `displs` (none: yes) put every non-empty block where packed_displs would: the
// packed call, whose bytes are the first sum(counts) of the buffer, one run.
bool displs_are_packed(std::span<const std::size_t> counts,
                       std::span<const std::size_t> displs) noexcept;
// The checksum of bytes sent as runs: each run's buffer_checksum, folded in order by
// fold_run_checksum (run 0's value is its own checksum, so a single run from offset 0 checks
// as the packed buffer does); no run: buffer_checksum of no bytes.
std::uint64_t fold_run_checksum(std::uint64_t folded, std::uint64_t run_sum,
                                std::size_t index) noexcept;
std::uint64_t runs_checksum(const void* base, std::span<const ByteRun> runs) noexcept;

// Copies of at least this many bytes use streaming stores (when AVX2 is there).
inline constexpr std::size_t kStreamBytes = std::size_t{2} << 20;

// For tests: whether checksum_copy takes the AVX2 pass here, and the portable pass itself
// (what every CPU without AVX2 computes).
bool checksum_uses_avx2() noexcept;
std::uint64_t checksum_copy_portable(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace hpref::detail
