// Checksummed copies (see copy.hpp). The checksum is buffer_checksum's (reference/src/
// communicator.cpp): lanes a = {1, 2, 3, 4} plus the sums of 64-bit words 0..3 of every
// 32-byte block, b the sums of a after each block, then the mix and FNV-1a over the tail;
// one AVX2 register holds the four lanes of a, one those of b.
#include "copy.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "hpref/communicator.hpp"

namespace hpref::sim::detail {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
#define HPREF_SIM_AVX2 1

bool has_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

enum class Store { none, plain, stream };

template <Store S>
__attribute__((target("avx2"), always_inline)) inline void put(unsigned char* q, __m256i w) {
  if constexpr (S == Store::plain) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), w);
  if constexpr (S == Store::stream) _mm256_stream_si256(reinterpret_cast<__m256i*>(q), w);
}

// Adds the n bytes (a multiple of 32) at p to the lanes, storing them at q as `S` says.
template <Store S>
__attribute__((target("avx2"))) void blocks(__m256i& a, __m256i& b, const unsigned char* p,
                                            unsigned char* q, std::size_t n) noexcept {
  __m256i x = a, y = b;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32));
    __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64));
    __m256i w3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96));
    put<S>(q + i, w0);
    put<S>(q + i + 32, w1);
    put<S>(q + i + 64, w2);
    put<S>(q + i + 96, w3);
    x = _mm256_add_epi64(x, w0);
    y = _mm256_add_epi64(y, x);
    x = _mm256_add_epi64(x, w1);
    y = _mm256_add_epi64(y, x);
    x = _mm256_add_epi64(x, w2);
    y = _mm256_add_epi64(y, x);
    x = _mm256_add_epi64(x, w3);
    y = _mm256_add_epi64(y, x);
  }
  for (; i < n; i += 32) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    put<S>(q + i, w);
    x = _mm256_add_epi64(x, w);
    y = _mm256_add_epi64(y, x);
  }
  a = x;
  b = y;
}

// The checksum of src (a copy to dst outside [skip_begin, skip_end) when dst is given).
__attribute__((target("avx2"))) std::uint64_t avx2_pass(void* dst, const void* src,
                                                        std::size_t bytes, std::size_t skip_begin,
                                                        std::size_t skip_end) noexcept {
  const auto* p = static_cast<const unsigned char*>(src);
  auto* q = static_cast<unsigned char*>(dst);
  const std::size_t whole = bytes / 32 * 32;
  // Blocks [sb, se) are only summed: the skipped range, shrunk to whole blocks.
  std::size_t sb = std::min(whole, (skip_begin + 31) / 32 * 32);
  std::size_t se = std::max(sb, std::min(whole, skip_end / 32 * 32));
  __m256i a = _mm256_set_epi64x(4, 3, 2, 1), b = _mm256_setzero_si256();
  if (q == nullptr) {
    blocks<Store::none>(a, b, p, nullptr, whole);
  } else {
    bool stream = bytes >= kStreamBytes && reinterpret_cast<std::uintptr_t>(q) % 32 == 0;
    auto copy_blocks = stream ? blocks<Store::stream> : blocks<Store::plain>;
    copy_blocks(a, b, p, q, sb);
    blocks<Store::none>(a, b, p + sb, nullptr, se - sb);
    copy_blocks(a, b, p + se, q + se, whole - se);
    if (stream) _mm_sfence();
    if (bytes > whole) std::memcpy(q + whole, p + whole, bytes - whole);
  }
  alignas(32) std::uint64_t la[4], lb[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(la), a);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lb), b);
  std::uint64_t h = bytes;
  for (int k = 0; k < 4; ++k) h = (h ^ la[k]) * 0x100000001b3ULL ^ lb[k];
  return fnv1a64(p + whole, bytes - whole, h);
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

std::uint64_t checksum_copy(void* dst, const void* src, std::size_t bytes, std::size_t skip_begin,
                            std::size_t skip_end) noexcept {
#ifdef HPREF_SIM_AVX2
  if (has_avx2()) return avx2_pass(dst, src, bytes, skip_begin, skip_end);
#endif
  return copy_with_checksum(dst, src, bytes);
}

std::uint64_t checksum(const void* src, std::size_t bytes) noexcept {
#ifdef HPREF_SIM_AVX2
  if (has_avx2()) return avx2_pass(nullptr, src, bytes, 0, 0);
#endif
  return buffer_checksum(src, bytes);
}

void copy(void* dst, const void* src, std::size_t bytes, bool stream) noexcept {
#ifdef HPREF_SIM_AVX2
  if (stream && bytes >= 4096 && has_avx2()) {
    avx2_stream_copy(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                     bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace hpref::sim::detail
