// Fuzz target received_merge: a received buffer and its split sizes (SPEC 2.5).
// Input layout (see README.md): byte 0 = flags; k = (byte0 & 0x0f) % 9 split sizes
// follow as little-endian u16; the rest is the received buffer. Flag 0x80: the last
// split is set to whatever the others leave of the buffer (so most inputs pass the sum
// check and reach the segments).
// Checks: merging refuses only with hpref::Error; a split-sum refusal happens exactly
// when the sizes do not sum to the buffer; a merge that succeeds equals decoding each
// segment alone and concatenating, holds no key twice (key equality), and merging the
// re-encoded segments gives the same items back.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.hpp"
#include "hpref/codec.hpp"
#include "hpref/value.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

constexpr std::size_t kMaxSplits = 8;
constexpr std::uint8_t kLastTakesRest = 0x80;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RssBound rss("received_merge", size);
  if (size < 1) return 0;
  std::uint8_t flags = data[0];
  std::size_t k = static_cast<std::size_t>(flags & 0x0f) % (kMaxSplits + 1);
  std::size_t header = 1 + 2 * k;
  if (size < header) return 0;
  std::vector<std::uint64_t> splits(k);
  for (std::size_t i = 0; i < k; ++i) {
    splits[i] = std::uint64_t{data[1 + 2 * i]} | (std::uint64_t{data[2 + 2 * i]} << 8);
  }
  std::span<const std::uint8_t> buffer(data + header, size - header);
  if ((flags & kLastTakesRest) && k > 0) {
    std::uint64_t others = 0;
    for (std::size_t i = 0; i + 1 < k; ++i) others += splits[i];
    if (others <= buffer.size()) splits[k - 1] = buffer.size() - others;
  }
  std::uint64_t sum = 0;
  for (std::uint64_t s : splits) sum += s;

  SharedBytes received = SharedBytes::copy_of(buffer);
  auto merged = attempt("merge_received", [&] { return merge_received(received, splits); });
  if (!merged) {
    HPREF_FUZZ_REQUIRE((*merged.error == Errc::split_sum_mismatch) == (sum != buffer.size()),
                       "split_sum_mismatch must be the refusal exactly when the splits do not "
                       "sum to the buffer; got " +
                           kind_text(merged.error));
    return 0;
  }
  HPREF_FUZZ_REQUIRE(sum == buffer.size(), "merged a buffer whose splits do not sum to it");

  // The same items, segment by segment; and no key twice.
  std::vector<Item> concatenated;
  std::vector<std::vector<Item>> per_rank;
  std::size_t cursor = 0;
  for (std::uint64_t s : splits) {
    auto items = attempt("decode_segment", [&] {
      return decode_segment(received.slice(cursor, static_cast<std::size_t>(s)));
    });
    HPREF_FUZZ_REQUIRE(items, "a segment of a merged buffer does not decode alone (" +
                                  kind_text(items.error) + ")");
    concatenated.insert(concatenated.end(), items.value->begin(), items.value->end());
    per_rank.push_back(std::move(*items.value));
    cursor += static_cast<std::size_t>(s);
  }
  HPREF_FUZZ_REQUIRE(items_equal(concatenated, *merged.value),
                     "merge_received differs from decoding each segment and concatenating");
  KeySet keys;
  for (const Item& item : *merged.value) {
    HPREF_FUZZ_REQUIRE(keys.insert(item.first),
                       "merged items hold a key twice: " + repr(item.first));
  }

  // Re-encode each rank's segment and merge those: the same items again.
  if (!small_enough(*merged.value)) return 0;
  std::vector<std::uint8_t> buffer2;
  std::vector<std::uint64_t> splits2;
  for (const auto& items : per_rank) {
    auto encoded = attempt("encode_segment", [&] { return encode_segment(items); });
    if (!encoded) {
      HPREF_FUZZ_REQUIRE(*encoded.error == Errc::depth_limit,
                         "encode_segment refused decoded items with " + kind_text(encoded.error));
      return 0;
    }
    splits2.push_back(encoded.value->size());
    buffer2.insert(buffer2.end(), encoded.value->begin(), encoded.value->end());
  }
  auto merged2 = attempt("merge_received(re-encoded)", [&] {
    return merge_received(SharedBytes::adopt(std::move(buffer2)), splits2);
  });
  HPREF_FUZZ_REQUIRE(merged2,
                     "re-encoded segments do not merge (" + kind_text(merged2.error) + ")");
  HPREF_FUZZ_REQUIRE(items_equal(*merged2.value, *merged.value),
                     "merging re-encoded segments changed the items");
  return 0;
}
