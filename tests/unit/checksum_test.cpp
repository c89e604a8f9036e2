// The send-buffer checksum (SPEC 9.3's mutation check, every backend): the AVX2 pass and the
// portable pass give the same values, a checksummed copy copies what it says, streaming
// copies included, and the checksum sees a change of any one byte.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/detail/checksum.hpp"
#include "hpref/splitmix64.hpp"

using namespace hpref;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng.next());
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checksum)

BOOST_AUTO_TEST_CASE(every_pass_gives_the_portable_value_and_copies_outside_the_skip) {
  BOOST_TEST_MESSAGE("checksum_copy takes the AVX2 pass here: " << detail::checksum_uses_avx2());
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= 300; ++n) sizes.push_back(n);
  for (std::size_t n : {4095, 4096, 4097, 65536 + 7, 1 << 20}) sizes.push_back(n);
  std::vector<unsigned char> src = random_bytes((1 << 20) + 64, 7);
  for (std::size_t size : sizes) {
    for (std::size_t align : {0, 1, 8, 31}) {
      const unsigned char* p = src.data() + align;
      std::uint64_t want = detail::checksum_copy_portable(nullptr, p, size);
      BOOST_TEST_CONTEXT("size " << size << " alignment " << align) {
        BOOST_TEST(buffer_checksum(p, size) == want);
        std::vector<unsigned char> dst(size + 64, 0xa5);
        BOOST_TEST(copy_with_checksum(dst.data() + 3, p, size) == want);
        BOOST_TEST(std::memcmp(dst.data() + 3, p, size) == 0);
        BOOST_TEST(dst[size + 3] == 0xa5);  // nothing written past the end
        // A skipped range: every byte outside it copied, the checksum still of everything.
        std::size_t skip_begin = size / 3, skip_end = size - size / 4;
        std::vector<unsigned char> out(size + 1, 0);
        BOOST_TEST(detail::checksum_copy(out.data(), p, size, skip_begin, skip_end) == want);
        BOOST_TEST(std::memcmp(out.data(), p, skip_begin) == 0);
        BOOST_TEST(std::memcmp(out.data() + skip_end, p + skip_end, size - skip_end) == 0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(streaming_copies_are_exact) {
  std::size_t size = detail::kStreamBytes + 1000;
  std::vector<unsigned char> src = random_bytes(size + 64, 11);
  alignas(32) static unsigned char dst[(std::size_t{2} << 20) + 2048];
  for (std::size_t align : {0, 1, 17}) {
    BOOST_TEST_CONTEXT("alignment " << align) {
      std::memset(dst, 0, sizeof dst);
      std::uint64_t want = detail::checksum_copy_portable(nullptr, src.data() + align, size);
      // 32-byte aligned destination: the AVX2 pass streams.
      BOOST_TEST(detail::checksum_copy(dst, src.data() + align, size) == want);
      BOOST_TEST(std::memcmp(dst, src.data() + align, size) == 0);
      std::memset(dst, 0, sizeof dst);
      detail::copy_bytes(dst + align, src.data(), size, /*stream=*/true);
      BOOST_TEST(std::memcmp(dst + align, src.data(), size) == 0);
      BOOST_TEST(dst[align + size] == 0);
    }
  }
}

// The simulator's wait for all_to_all_v: the mutation check's pass copies the own block.
BOOST_AUTO_TEST_CASE(a_range_pass_gives_the_checksum_and_copies_exactly_the_range) {
  std::vector<unsigned char> src = random_bytes((std::size_t{3} << 20) + 64, 13);
  std::vector<std::size_t> sizes;
  for (std::size_t n = 1; n <= 200; n += 7) sizes.push_back(n);
  for (std::size_t n : {std::size_t{4096}, std::size_t{65543}, std::size_t{3} << 20}) {
    sizes.push_back(n);
  }
  for (std::size_t size : sizes) {
    for (std::size_t align : {0, 1, 16}) {
      const unsigned char* p = src.data() + align;
      std::uint64_t want = detail::checksum_copy_portable(nullptr, p, size);
      for (std::size_t dst_align : {0, 8, 16, 32}) {
        std::vector<std::pair<std::size_t, std::size_t>> ranges = {
            {0, size}, {size / 3, size - size / 4}, {size - 1, size}, {size / 2, size / 2 + 33}};
        for (auto [begin, end] : ranges) {
          for (bool stream : {false, true}) {
            BOOST_TEST_CONTEXT("size " << size << " alignment " << align << " dst " << dst_align
                                       << " range " << begin << ".." << end << " stream "
                                       << stream) {
              std::vector<unsigned char> out(size + 160, 0x5a);
              unsigned char* d = out.data() + 32 + dst_align +
                                 (32 - reinterpret_cast<std::uintptr_t>(out.data()) % 32) % 32;
              BOOST_TEST(detail::checksum_copy_range(d, p, size, begin, end, stream) == want);
              std::size_t e = std::min(end, size);
              BOOST_TEST(std::memcmp(d, p + begin, e - begin) == 0);
              BOOST_TEST(d[e - begin] == 0x5a);  // nothing written past the range
              BOOST_TEST(*(d - 1) == 0x5a);      // nor before it
            }
          }
        }
      }
    }
  }
}

// all_to_all_v's sent bytes with displacements: the blocks' union as maximal runs, and their
// checksum: one run's is its buffer_checksum; several are each run's, folded in order.
BOOST_AUTO_TEST_CASE(blocks_merge_into_runs_and_runs_check_their_bytes_only) {
  using detail::ByteRun;
  auto runs = [](std::vector<std::size_t> counts, std::vector<std::size_t> displs) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (ByteRun r : detail::block_runs(counts, displs)) out.emplace_back(r.begin, r.end);
    return out;
  };
  using Runs = std::vector<std::pair<std::size_t, std::size_t>>;
  BOOST_TEST((runs({4, 0, 2}, {10, 3, 0}) == Runs{{0, 2}, {10, 14}}));  // sorted, empty dropped
  BOOST_TEST((runs({4, 4}, {2, 4}) == Runs{{2, 8}}));                   // overlapping
  BOOST_TEST((runs({4, 4}, {4, 0}) == Runs{{0, 8}}));                   // touching
  BOOST_TEST((runs({2, 8}, {3, 1}) == Runs{{1, 9}}));                   // one inside another
  BOOST_TEST(runs({0, 0}, {5, 6}).empty());

  std::vector<std::uint8_t> bytes(300);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 13);
  std::vector<ByteRun> one = {{20, 120}}, two = {{0, 100}, {150, 300}};
  BOOST_TEST(detail::runs_checksum(bytes.data(), one) == buffer_checksum(bytes.data() + 20, 100));
  BOOST_TEST(detail::runs_checksum(bytes.data(), {}) == buffer_checksum(bytes.data(), 0));
  std::uint64_t folded = detail::runs_checksum(bytes.data(), two);
  BOOST_TEST(folded == detail::fold_run_checksum(buffer_checksum(bytes.data(), 100),
                                                 buffer_checksum(bytes.data() + 150, 150), 1));
  // The same bytes split at another place are other runs: the fold is not their whole checksum.
  std::vector<ByteRun> split = {{0, 150}, {150, 300}};
  BOOST_TEST(detail::runs_checksum(bytes.data(), split) != buffer_checksum(bytes.data(), 300));
  bytes[120] ^= 1;  // between the runs: unchecked
  BOOST_TEST(detail::runs_checksum(bytes.data(), two) == folded);
  for (std::size_t at : {0ul, 99ul, 150ul, 299ul}) {
    bytes[at] ^= 4;
    BOOST_TEST(detail::runs_checksum(bytes.data(), two) != folded, "byte " << at);
    bytes[at] ^= 4;
  }
}

BOOST_AUTO_TEST_CASE(a_change_of_any_one_bit_changes_the_checksum) {
  std::vector<unsigned char> buf = random_bytes(1000, 3);
  std::uint64_t before = buffer_checksum(buf.data(), buf.size());
  int missed = 0;
  for (std::size_t i = 0; i < buf.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      buf[i] ^= static_cast<unsigned char>(1 << bit);
      if (buffer_checksum(buf.data(), buf.size()) == before) ++missed;
      buf[i] ^= static_cast<unsigned char>(1 << bit);
    }
  }
  BOOST_TEST(missed == 0);
  BOOST_TEST(buffer_checksum(buf.data(), buf.size()) == before);
}

// What a program does to a tensor it should have left alone: negating elements. With the
// first mix (lanes xor-multiplied into the hash) half of all single float64 negations went
// unseen: a and b moved by 2^63 alike and cancelled.
BOOST_AUTO_TEST_CASE(negating_one_or_two_float64s_changes_the_checksum) {
  std::vector<double> v(256);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.37 * static_cast<double>(i) + 1.0;
  const std::size_t bytes = v.size() * sizeof(double);
  std::uint64_t before = buffer_checksum(v.data(), bytes);
  int missed = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = -v[i];
    if (buffer_checksum(v.data(), bytes) == before) ++missed;
    for (std::size_t j = i + 4; j < v.size(); j += 4) {  // a second one in the same lane
      v[j] = -v[j];
      if (buffer_checksum(v.data(), bytes) == before) ++missed;
      v[j] = -v[j];
    }
    v[i] = -v[i];
  }
  BOOST_TEST(missed == 0);
  BOOST_TEST(buffer_checksum(v.data(), bytes) == before);
}

BOOST_AUTO_TEST_SUITE_END()
