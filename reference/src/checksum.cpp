// Send-buffer checksums and checksummed copies (detail/checksum.hpp). The checksum: lanes
// a = {1, 2, 3, 4} plus the sums of 64-bit words 0..3 of every 32-byte block, b the sums of a
// after each block, c the sums of a nonlinear term of each word and a, b (product), then the
// lanes mixed into the length (finish) and FNV-1a over the tail. The AVX2 pass holds the four
// lanes of a, b and c in one register each: the same values.
#include "hpref/detail/checksum.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <utility>

#include "hpref/communicator.hpp"

namespace hpref {
namespace detail {
namespace {

// splitmix64's finalizer: every input bit moves about half the output bits.
std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The nonlinear lane's term for word w after a and b took it in: the low half of w ^ b times
// the high half of w ^ a (what AVX2's mul_epu32 computes). Sums alone miss changes that cancel
// mod 2^64: two float64s negated in one lane move a by 2^63 twice, b by an even multiple.
inline std::uint64_t product(std::uint64_t w, std::uint64_t a, std::uint64_t b) noexcept {
  return (((w ^ b) & 0xffffffffULL) * ((w ^ a) >> 32));
}

// The lanes folded into the length through mix64, then FNV-1a over the tail (the bytes after
// the last whole 32-byte block). Mixed, not xor-multiplied: a change confined to the top bits
// of a lane (a float64's sign) moved a and b alike there, and half of all single negations
// cancelled out.
std::uint64_t finish(const std::uint64_t* a, const std::uint64_t* b, const std::uint64_t* c,
                     std::size_t bytes, const unsigned char* tail) noexcept {
  std::uint64_t h = bytes;
  for (int k = 0; k < 4; ++k) h = mix64(mix64(mix64(h ^ a[k]) ^ b[k]) ^ c[k]);
  return fnv1a64(tail, bytes % 32, h);
}

template <bool Copy>
std::uint64_t checksum_pass(void* dst, const void* src, std::size_t bytes) noexcept {
  const auto* p = static_cast<const unsigned char*>(src);
  auto* q = static_cast<unsigned char*>(dst);
  // The four lanes in named locals: kept in registers (as an array they went through the
  // stack, a store-to-load forward every 32 bytes: 6 GB/s instead of ~20).
  std::uint64_t a0 = 1, a1 = 2, a2 = 3, a3 = 4, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  std::size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    std::uint64_t w[4];
    std::memcpy(w, p + i, 32);
    if constexpr (Copy) std::memcpy(q + i, w, 32);
    a0 += w[0];
    a1 += w[1];
    a2 += w[2];
    a3 += w[3];
    b0 += a0;
    b1 += a1;
    b2 += a2;
    b3 += a3;
    c0 += product(w[0], a0, b0);
    c1 += product(w[1], a1, b1);
    c2 += product(w[2], a2, b2);
    c3 += product(w[3], a3, b3);
  }
  std::uint64_t a[4] = {a0, a1, a2, a3}, b[4] = {b0, b1, b2, b3}, c[4] = {c0, c1, c2, c3};
  if constexpr (Copy) {
    if (bytes > i) std::memcpy(q + i, p + i, bytes - i);
  }
  return finish(a, b, c, bytes, p + i);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HPREF_CHECKSUM_AVX2 1

bool has_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// stream: 32-byte aligned destination; stream16: 16-byte aligned (two 16-byte stores).
enum class Store { none, plain, stream, stream16 };

constexpr std::size_t kPrefetchAhead = 4096;

// Stores w at q + i as `S` says; q is null for Store::none (no pointer arithmetic on it then).
template <Store S>
__attribute__((target("avx2"), always_inline)) inline void put(unsigned char* q, std::size_t i,
                                                               __m256i w) {
  if constexpr (S == Store::plain) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), w);
  if constexpr (S == Store::stream) _mm256_stream_si256(reinterpret_cast<__m256i*>(q + i), w);
  if constexpr (S == Store::stream16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(q + i), _mm256_castsi256_si128(w));
    _mm_stream_si128(reinterpret_cast<__m128i*>(q + i + 16), _mm256_extracti128_si256(w, 1));
  }
}

// One 32-byte block into the lanes: a += w, b += a, c += product(w, a, b) (four lanes each).
__attribute__((target("avx2"), always_inline)) inline void step(__m256i& x, __m256i& y, __m256i& z,
                                                                __m256i w) {
  x = _mm256_add_epi64(x, w);
  y = _mm256_add_epi64(y, x);
  z = _mm256_add_epi64(
      z, _mm256_mul_epu32(_mm256_xor_si256(w, y), _mm256_srli_epi64(_mm256_xor_si256(w, x), 32)));
}

// Adds the n bytes (a multiple of 32) at p to the lanes, storing them at q as `S` says.
template <Store S>
__attribute__((target("avx2"))) void blocks(__m256i& a, __m256i& b, __m256i& c,
                                            const unsigned char* p, unsigned char* q,
                                            std::size_t n) noexcept {
  __m256i x = a, y = b, z = c;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    // 4 KiB ahead (a prefetch never faults, past the end either): the copying pass moved
    // 16-21 GB/s from memory here without it, 20-25 with it (a plain copy: 24-29).
    _mm_prefetch(reinterpret_cast<const char*>(p + i + kPrefetchAhead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + i + kPrefetchAhead + 64), _MM_HINT_T0);
    __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32));
    __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64));
    __m256i w3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96));
    put<S>(q, i, w0);
    put<S>(q, i + 32, w1);
    put<S>(q, i + 64, w2);
    put<S>(q, i + 96, w3);
    step(x, y, z, w0);
    step(x, y, z, w1);
    step(x, y, z, w2);
    step(x, y, z, w3);
  }
  for (; i < n; i += 32) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    put<S>(q, i, w);
    step(x, y, z, w);
  }
  a = x;
  b = y;
  c = z;
}

// The lanes, stored, then finish() with the bytes after the whole blocks.
__attribute__((target("avx2"))) std::uint64_t finish_lanes(__m256i a, __m256i b, __m256i c,
                                                           std::size_t bytes,
                                                           const unsigned char* tail) noexcept {
  alignas(32) std::uint64_t la[4], lb[4], lc[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(la), a);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lb), b);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lc), c);
  return finish(la, lb, lc, bytes, tail);
}

// The whole 32-byte blocks inside [begin, end), of the first `whole` bytes: [first, second).
std::pair<std::size_t, std::size_t> inner_blocks(std::size_t begin, std::size_t end,
                                                 std::size_t whole) noexcept {
  std::size_t b = std::min(whole, (begin + 31) / 32 * 32);
  return {b, std::max(b, std::min(whole, end / 32 * 32))};
}

// The checksum of src (a copy to dst outside [skip_begin, skip_end) when dst is given).
__attribute__((target("avx2"))) std::uint64_t avx2_pass(void* dst, const void* src,
                                                        std::size_t bytes, std::size_t skip_begin,
                                                        std::size_t skip_end) noexcept {
  const auto* p = static_cast<const unsigned char*>(src);
  auto* q = static_cast<unsigned char*>(dst);
  const std::size_t whole = bytes / 32 * 32;
  // Blocks [sb, se) are only summed: the skipped range, shrunk to whole blocks.
  auto [sb, se] = inner_blocks(skip_begin, skip_end, whole);
  __m256i a = _mm256_set_epi64x(4, 3, 2, 1), b = _mm256_setzero_si256(), c = b;
  if (q == nullptr) {
    blocks<Store::none>(a, b, c, p, nullptr, whole);
  } else {
    bool stream = bytes >= kStreamBytes && reinterpret_cast<std::uintptr_t>(q) % 32 == 0;
    auto copy_blocks = stream ? blocks<Store::stream> : blocks<Store::plain>;
    copy_blocks(a, b, c, p, q, sb);
    blocks<Store::none>(a, b, c, p + sb, nullptr, se - sb);
    copy_blocks(a, b, c, p + se, q + se, whole - se);
    if (stream) _mm_sfence();
    if (bytes > whole) std::memcpy(q + whole, p + whole, bytes - whole);
  }
  return finish_lanes(a, b, c, bytes, p + whole);
}

// The checksum of src, and a copy of its bytes [begin, end) to dst (which receives src +
// begin), streamed if `stream` and dst is 16-byte aligned where the whole blocks start.
__attribute__((target("avx2"))) std::uint64_t avx2_range_pass(void* dst, const void* src,
                                                              std::size_t bytes, std::size_t begin,
                                                              std::size_t end,
                                                              bool stream) noexcept {
  const auto* p = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);  // d + (i - begin) receives p + i
  const std::size_t whole = bytes / 32 * 32;
  // Blocks [cb, ce) are copied in the pass (none if ce == cb); the range's other bytes after.
  auto [cb, ce] = inner_blocks(begin, end, whole);
  __m256i a = _mm256_set_epi64x(4, 3, 2, 1), b = _mm256_setzero_si256(), c = b;
  blocks<Store::none>(a, b, c, p, nullptr, cb);
  if (ce > cb) {  // then begin <= cb and ce <= end
    unsigned char* q = d + (cb - begin);
    auto at = reinterpret_cast<std::uintptr_t>(q);
    if (stream && at % 32 == 0) {
      blocks<Store::stream>(a, b, c, p + cb, q, ce - cb);
    } else if (stream && at % 16 == 0) {
      blocks<Store::stream16>(a, b, c, p + cb, q, ce - cb);
    } else {
      blocks<Store::plain>(a, b, c, p + cb, q, ce - cb);
    }
  }
  blocks<Store::none>(a, b, c, p + ce, nullptr, whole - ce);
  if (stream) _mm_sfence();
  if (ce > cb) {
    std::memcpy(d, p + begin, cb - begin);
    std::memcpy(d + (ce - begin), p + ce, end - ce);
  } else {
    std::memcpy(d, p + begin, end - begin);
  }
  return finish_lanes(a, b, c, bytes, p + whole);
}

__attribute__((target("avx2"))) void avx2_stream_copy(unsigned char* q, const unsigned char* p,
                                                      std::size_t bytes) noexcept {
  std::size_t head = (32 - reinterpret_cast<std::uintptr_t>(q) % 32) % 32;
  std::memcpy(q, p, head);
  std::size_t i = head;
  for (; i + 128 <= bytes; i += 128) {
    __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32));
    __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64));
    __m256i w3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(q + i), w0);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(q + i + 32), w1);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(q + i + 64), w2);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(q + i + 96), w3);
  }
  _mm_sfence();
  std::memcpy(q + i, p + i, bytes - i);
}
#endif

}  // namespace

bool checksum_uses_avx2() noexcept {
#ifdef HPREF_CHECKSUM_AVX2
  return has_avx2();
#else
  return false;
#endif
}

std::uint64_t checksum_copy_portable(void* dst, const void* src, std::size_t bytes) noexcept {
  return dst == nullptr ? checksum_pass<false>(nullptr, src, bytes)
                        : checksum_pass<true>(dst, src, bytes);
}

std::uint64_t checksum_copy(void* dst, const void* src, std::size_t bytes, std::size_t skip_begin,
                            std::size_t skip_end) noexcept {
#ifdef HPREF_CHECKSUM_AVX2
  if (has_avx2()) return avx2_pass(dst, src, bytes, skip_begin, skip_end);
#endif
  return checksum_copy_portable(dst, src, bytes);
}

std::uint64_t checksum_copy_range(void* dst, const void* src, std::size_t bytes, std::size_t begin,
                                  std::size_t end, bool stream) noexcept {
  end = std::min(end, bytes);
  begin = std::min(begin, end);
#ifdef HPREF_CHECKSUM_AVX2
  if (has_avx2() && end > begin) return avx2_range_pass(dst, src, bytes, begin, end, stream);
#endif
  std::uint64_t sum = checksum_copy_portable(nullptr, src, bytes);
  std::memcpy(dst, static_cast<const unsigned char*>(src) + begin, end - begin);
  return sum;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes, bool stream) noexcept {
#ifdef HPREF_CHECKSUM_AVX2
  if (stream && bytes >= 4096 && has_avx2()) {
    avx2_stream_copy(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                     bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

std::vector<ByteRun> block_runs(std::span<const std::size_t> counts,
                                std::span<const std::size_t> displs) {
  std::vector<ByteRun> blocks;
  for (std::size_t i = 0; i < counts.size() && i < displs.size(); ++i) {
    if (counts[i]) blocks.push_back({displs[i], displs[i] + counts[i]});
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const ByteRun& a, const ByteRun& b) { return a.begin < b.begin; });
  std::vector<ByteRun> runs;
  for (const ByteRun& b : blocks) {
    if (!runs.empty() && b.begin <= runs.back().end) {
      runs.back().end = std::max(runs.back().end, b.end);
    } else {
      runs.push_back(b);
    }
  }
  return runs;
}

std::uint64_t fold_run_checksum(std::uint64_t folded, std::uint64_t run_sum,
                                std::size_t index) noexcept {
  if (index == 0) return run_sum;
  return mix64((folded ^ (run_sum + 0x9e3779b97f4a7c15ULL + (folded << 6))) +
               static_cast<std::uint64_t>(index));
}

std::vector<std::size_t> packed_displs(std::span<const std::size_t> counts) {
  std::vector<std::size_t> displs(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

bool displs_are_packed(std::span<const std::size_t> counts,
                       std::span<const std::size_t> displs) noexcept {
  std::size_t at = 0;
  for (std::size_t i = 0; i < displs.size() && i < counts.size(); at += counts[i++]) {
    if (counts[i] != 0 && displs[i] != at) return false;
  }
  return true;
}

std::uint64_t runs_checksum(const void* base, std::span<const ByteRun> runs) noexcept {
  const auto* bytes = static_cast<const unsigned char*>(base);
  if (runs.empty()) return checksum_copy(nullptr, bytes, 0);
  std::uint64_t folded = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    std::uint64_t sum = checksum_copy(nullptr, bytes + runs[k].begin, runs[k].end - runs[k].begin);
    folded = fold_run_checksum(folded, sum, k);
  }
  return folded;
}

}  // namespace detail

std::uint64_t buffer_checksum(const void* data, std::size_t bytes) noexcept {
  return detail::checksum_copy(nullptr, data, bytes);
}

std::uint64_t copy_with_checksum(void* dst, const void* src, std::size_t bytes) noexcept {
  return detail::checksum_copy(dst, src, bytes);
}

}  // namespace hpref
