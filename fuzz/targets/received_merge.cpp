// Fuzz target received_merge: a received buffer and its split sizes (SPEC 2.5).
// Input layout (see README.md): byte 0 = flags; k = (byte0 & 0x0f) % 9 split sizes
// follow as little-endian u16; the rest is the received buffer. Flag 0x80: the last
// split is set to whatever the others leave of the buffer (so most inputs pass the sum
// check and reach the segments).
// Checks: merging refuses only with hpref::Error; a split-sum refusal happens exactly
// when the sizes do not sum to the buffer; otherwise an independent model of SPEC 2.5
// (decode each segment in order, compare each key pairwise with key_equal against those
// before it) says whether the merge must succeed or which kind it must refuse with (the
// first failing segment's decode error, or duplicate_payload_key), and merge_received
// agrees (pickle_node_limit exactly at the first key that takes the keys' work past the
// merge's budget, the node limit plus the buffer size, SPEC 2.4); a
// merge that succeeds equals decoding each segment alone and concatenating, and merging
// the re-encoded segments gives the same items back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "hpref/codec.hpp"
#include "hpref/value.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

constexpr std::size_t kMaxSplits = 8;
constexpr std::uint8_t kLastTakesRest = 0x80;
// Keys the model compares pairwise, and the work (key_work_units of the smaller key per
// comparison) it spends on them; past either it stops looking for duplicates (the
// comparisons grow as the square: 200 memo-doubled tuple keys once took 20 s) and only
// bounds the merge's outcome.
constexpr std::size_t kModelKeys = 1024;
constexpr std::uint64_t kModelCompareUnits = std::uint64_t{1} << 22;

// SPEC 2.5 written out without merge_received's KeySet (whose hashing a key-equality bug,
// 1 vs 1.0 or 0.0 vs -0.0, would share): segments decoded in rank order, each key compared
// with key_equal against every key before it. `splits` must sum to the buffer.
struct MergeModel {
  std::optional<Errc> refusal;  // the first error in merge order; none: the merge succeeds
  bool complete = true;         // false: past kModelKeys keys or kModelCompareUnits of comparing,
                                // duplicates not searched further
  std::vector<std::vector<Item>> per_rank;  // each segment's items, up to `refusal`
};

MergeModel model_merge(const SharedBytes& received, std::span<const std::uint64_t> splits) {
  MergeModel model;
  std::vector<std::pair<Value, std::uint64_t>> seen;  // each key with its work units
  std::uint64_t compared = 0;
  const std::uint64_t budget = DecodeOptions{}.pickle.limits.max_nodes + received.size();
  std::uint64_t work = 0;
  std::size_t cursor = 0;
  for (std::uint64_t s : splits) {
    auto items = attempt("decode_segment", [&] {
      return decode_segment(received.slice(cursor, static_cast<std::size_t>(s)));
    });
    cursor += static_cast<std::size_t>(s);
    if (!items) {
      model.refusal = *items.error;
      return model;
    }
    for (const Item& item : *items.value) {
      // The merge streams: each key's work is counted before it is looked up.
      const std::uint64_t units = key_work_units(item.first);
      if (units > budget - work) {
        model.refusal = Errc::pickle_node_limit;
        return model;
      }
      work += units;
      if (!model.complete) continue;
      std::uint64_t cost = 0;
      for (const auto& [key, key_units] : seen) cost += std::min(key_units, units);
      if (seen.size() == kModelKeys || cost > kModelCompareUnits - compared) {
        model.complete = false;
        continue;
      }
      compared += cost;
      for (const auto& [key, key_units] : seen) {
        if (key_equal(key, item.first)) {
          model.refusal = Errc::duplicate_payload_key;
          return model;
        }
      }
      seen.emplace_back(item.first, units);
    }
    model.per_rank.push_back(std::move(*items.value));
  }
  return model;
}

// merge_received's outcome on a buffer whose splits sum to it, held to the model.
void check_against_model(const MergeModel& model, const Outcome<std::vector<Item>>& merged) {
  if (merged) {
    // (Once incomplete, the later keys go unchecked for duplicates.)
    HPREF_FUZZ_REQUIRE(!model.refusal, "merge_received accepted what the model refuses with " +
                                           kind_text(model.refusal));
    return;
  }
  Errc got = *merged.error;
  if (model.complete) {
    HPREF_FUZZ_REQUIRE(model.refusal && got == *model.refusal,
                       "merge_received refused with " + kind_text(merged.error) +
                           ", the model says " +
                           (model.refusal ? kind_text(model.refusal) : std::string("succeed")));
  } else {
    // Once incomplete, a duplicate may come before the model's refusal, or stand alone.
    HPREF_FUZZ_REQUIRE(
        got == Errc::duplicate_payload_key || (model.refusal && got == *model.refusal),
        "merge_received refused with " + kind_text(merged.error) +
            ", the model allows duplicate_payload_key or " + kind_text(model.refusal));
  }
}

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
  } else {
    HPREF_FUZZ_REQUIRE(sum == buffer.size(), "merged a buffer whose splits do not sum to it");
  }
  if (sum != buffer.size()) return 0;

  // The model's verdict; a merge that succeeds gives the same items, segment by segment.
  MergeModel model = model_merge(received, splits);
  check_against_model(model, merged);
  if (!merged) return 0;
  const std::vector<std::vector<Item>>& per_rank = model.per_rank;
  std::vector<Item> concatenated;
  for (const auto& items : per_rank)
    concatenated.insert(concatenated.end(), items.begin(), items.end());
  HPREF_FUZZ_REQUIRE(items_equal(concatenated, *merged.value),
                     "merge_received differs from decoding each segment and concatenating");

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
