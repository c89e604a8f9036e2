// SPEC 7: interval, sliding-window and document-prefix routes, checked in the SPEC's
// order with int64 arithmetic that refuses overflow, and all-rank planners that share
// the O(P + D) work of intervals and owners.
#include "hpref/routes.hpp"

#include <algorithm>
#include <string>

#include "hpref/error.hpp"

namespace hpref {
namespace {

[[noreturn]] void fail(Errc code, const std::string& message) { throw Error(code, message); }

std::string text(const Interval& i) {
  return "(" + std::to_string(i.start) + ", " + std::to_string(i.end) + ")";
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) {
    fail(Errc::route_overflow, std::string(what) + " = " + std::to_string(a) + " * " +
                                   std::to_string(b) + " is beyond int64");
  }
  return out;
}

std::vector<std::int64_t> default_owners(std::int64_t local_length, std::size_t peers) {
  std::vector<std::int64_t> owners(peers + 1);
  for (std::size_t p = 0; p <= peers; ++p) {
    owners[p] =
        checked_mul(static_cast<std::int64_t>(p), local_length, "owner offset p * local_length");
  }
  return owners;
}

// SPEC 7.1 (a) but the rank, then (b): the parts every rank shares.
void check_owners_and_intervals(std::span<const std::int64_t> owners,
                                std::span<const Interval> intervals) {
  std::size_t peers = intervals.size();
  if (owners.size() != peers + 1) {
    fail(Errc::route_owner_count, "owner_offsets has " + std::to_string(owners.size()) +
                                      " entries but " + std::to_string(peers) + " intervals need " +
                                      std::to_string(peers + 1));
  }
  if (peers == 0) fail(Errc::route_no_intervals, "a route needs at least one interval, got none");
  if (owners[0] != 0) {
    fail(Errc::route_owner_start,
         "owner_offsets must start at 0, got " + std::to_string(owners[0]));
  }
}

void check_owner_order(std::span<const std::int64_t> owners) {
  for (std::size_t p = 0; p + 1 < owners.size(); ++p) {
    if (owners[p + 1] < owners[p]) {
      fail(Errc::route_owner_order, "owner_offsets decrease at index " + std::to_string(p + 1) +
                                        ": " + std::to_string(owners[p]) + " then " +
                                        std::to_string(owners[p + 1]));
    }
  }
}

void check_intervals(std::span<const std::int64_t> owners, std::span<const Interval> intervals) {
  std::int64_t total = owners.back();
  for (std::size_t p = 0; p < intervals.size(); ++p) {
    const Interval& i = intervals[p];
    if (!(0 <= i.start && i.start <= owners[p] && owners[p] <= owners[p + 1] &&
          owners[p + 1] <= i.end && i.end <= total)) {
      fail(Errc::route_interval, "interval " + std::to_string(p) + " " + text(i) +
                                     " does not contain owner shard " +
                                     text({owners[p], owners[p + 1]}) +
                                     " within the global bank [0, " + std::to_string(total) + ")");
    }
  }
}

void check_rank(std::int64_t rank, std::size_t peers, const char* what) {
  if (rank < 0 || rank >= static_cast<std::int64_t>(peers)) {
    fail(Errc::route_rank, std::string(what) + " " + std::to_string(rank) + " is outside [0, " +
                               std::to_string(peers) + ")");
  }
}

bool needs_exchange(std::span<const std::int64_t> owners, std::span<const Interval> intervals) {
  for (std::size_t p = 0; p < intervals.size(); ++p) {
    if (intervals[p].start != owners[p] || intervals[p].end != owners[p + 1]) return true;
  }
  return false;
}

// Whether the intervals' starts and ends both never decrease with the peer index (the
// window and prefix intervals' do): then the peers whose interval meets a range of rows are
// consecutive, found by binary search.
bool intervals_ordered(std::span<const Interval> intervals) {
  for (std::size_t p = 1; p < intervals.size(); ++p) {
    if (intervals[p].start < intervals[p - 1].start || intervals[p].end < intervals[p - 1].end)
      return false;
  }
  return true;
}

// The route of `rank` once every check passed, written into `r` (its tables keep their
// memory when they have the room). The tables are zeroed (memset-class stores) and only the
// peers that can have a non-zero entry are visited: those whose owner shard meets the own
// interval (owners never decrease: consecutive) and, with `ordered` intervals, those whose
// interval meets the own shard; otherwise every peer.
void build(std::span<const std::int64_t> owners, std::span<const Interval> intervals,
           std::size_t rank, bool exchange, bool ordered, Route& r) {
  std::size_t peers = intervals.size();
  std::int64_t lo = owners[rank];
  std::int64_t hi = owners[rank + 1];
  const Interval& own = intervals[rank];
  r.local_length = hi - lo;
  r.global_start = own.start;
  r.global_end = own.end;
  r.local_output_start = lo - own.start;
  r.needs_exchange = exchange;
  r.send_offsets.assign(peers, 0);
  r.input_splits.assign(peers, 0);
  r.output_splits.assign(peers, 0);
  // Receives: shards [owners[p], owners[p + 1]) meeting [own.start, own.end).
  auto from = static_cast<std::size_t>(
      std::upper_bound(owners.begin() + 1, owners.end(), own.start) - (owners.begin() + 1));
  auto to = static_cast<std::size_t>(std::lower_bound(owners.begin(), owners.end() - 1, own.end) -
                                     owners.begin());
  for (std::size_t p = from; p < to; ++p) {
    if (p == rank) continue;
    r.output_splits[p] = std::max<std::int64_t>(
        0, std::min(owners[p + 1], own.end) - std::max(owners[p], own.start));
  }
  // Sends: intervals meeting the own shard [lo, hi).
  from = 0;
  to = peers;
  if (ordered) {
    from = static_cast<std::size_t>(
        std::partition_point(intervals.begin(), intervals.end(),
                             [lo](const Interval& i) { return i.end <= lo; }) -
        intervals.begin());
    to = static_cast<std::size_t>(
        std::partition_point(intervals.begin(), intervals.end(),
                             [hi](const Interval& i) { return i.start < hi; }) -
        intervals.begin());
  }
  for (std::size_t p = from; p < to; ++p) {
    std::int64_t first = std::max(lo, intervals[p].start);
    std::int64_t count = std::min(hi, intervals[p].end) - first;
    if (p == rank || count <= 0) continue;
    r.input_splits[p] = count;
    r.send_offsets[p] = first - lo;
  }
}

Route build(std::span<const std::int64_t> owners, std::span<const Interval> intervals,
            std::size_t rank, bool exchange) {
  Route r;
  build(owners, intervals, rank, exchange, intervals_ordered(intervals), r);
  return r;
}

void check_local_length(std::span<const std::int64_t> owners, std::size_t rank,
                        std::int64_t local_length) {
  if (owners[rank + 1] - owners[rank] != local_length) {
    fail(Errc::route_local_length,
         "local_length " + std::to_string(local_length) + " differs from rank " +
             std::to_string(rank) + "'s owner shard " + text({owners[rank], owners[rank + 1]}) +
             " of length " + std::to_string(owners[rank + 1] - owners[rank]));
  }
}

// SPEC 7.2 / 7.4 (a), one error kind naming which argument.
void check_arguments(std::int64_t local_length, std::int64_t size, const std::int64_t* rank,
                     const char* last_name, std::int64_t last, bool ratio) {
  if (ratio && last != 1 && last != 2) {
    fail(Errc::route_arguments, "ratio must be 1 or 2, got " + std::to_string(last));
  }
  if (local_length <= 0) {
    fail(Errc::route_arguments,
         "local_length must be positive, got " + std::to_string(local_length));
  }
  if (size <= 0) fail(Errc::route_arguments, "size must be positive, got " + std::to_string(size));
  if (rank != nullptr && (*rank < 0 || *rank >= size)) {
    fail(Errc::route_arguments,
         "rank " + std::to_string(*rank) + " is outside [0, size = " + std::to_string(size) + ")");
  }
  if (!ratio && last <= 0) {
    fail(Errc::route_arguments,
         std::string(last_name) + " must be positive, got " + std::to_string(last));
  }
}

// SPEC 7.2 / 7.4 (b), then the planner's own cap on `size` (route_too_large): after every
// check the original makes, so that a refusal it shares keeps its kind, and before anything
// of `size` entries is allocated.
void check_boundaries(std::span<const std::int64_t> b, std::int64_t local_length,
                      std::int64_t size) {
  if (b.size() < 2) {
    fail(Errc::route_boundaries,
         "document boundaries need at least 2 entries, got " + std::to_string(b.size()));
  }
  if (b.front() != 0) {
    fail(Errc::route_boundaries,
         "document boundaries must start at 0, got " + std::to_string(b.front()));
  }
  std::int64_t total = checked_mul(local_length, size, "sequence length local_length * size");
  if (b.back() != total) {
    fail(Errc::route_boundaries, "document boundaries must end at local_length * size = " +
                                     std::to_string(total) + ", got " + std::to_string(b.back()));
  }
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    if (b[i + 1] <= b[i]) {
      fail(Errc::route_boundaries, "document boundaries must strictly increase, got " +
                                       std::to_string(b[i]) + " then " + std::to_string(b[i + 1]) +
                                       " at index " + std::to_string(i + 1));
    }
  }
  if (size > kMaxRoutePeers) {
    fail(Errc::route_too_large, "size " + std::to_string(size) + " is beyond the " +
                                    std::to_string(kMaxRoutePeers) +
                                    " ranks whose per-peer route tables this planner builds");
  }
}

// For x_p = p * L, p = 0..count-1: the index of the largest boundary <= x_p (one merge pass).
std::vector<std::size_t> boundary_index_at_shards(std::span<const std::int64_t> b,
                                                  std::int64_t local_length, std::int64_t count) {
  std::vector<std::size_t> out(static_cast<std::size_t>(count));
  std::size_t d = 0;
  for (std::int64_t p = 0; p < count; ++p) {
    std::int64_t x = p * local_length;
    while (d + 1 < b.size() && b[d + 1] <= x) ++d;
    out[static_cast<std::size_t>(p)] = d;
  }
  return out;
}

void all_routes(std::span<const std::int64_t> owners, std::span<const Interval> intervals,
                std::vector<Route>& out) {
  check_owners_and_intervals(owners, intervals);
  check_owner_order(owners);
  check_intervals(owners, intervals);
  if (intervals.size() > static_cast<std::size_t>(kMaxAllRoutesPeers)) {
    fail(Errc::route_too_large,
         "all ranks' routes of " + std::to_string(intervals.size()) + " ranks hold " +
             std::to_string(intervals.size()) + " x " + std::to_string(intervals.size()) +
             " entries per table, beyond the " + std::to_string(kMaxAllRoutesPeers) +
             "-rank limit of the all-ranks planners (plan one rank's route instead)");
  }
  bool exchange = needs_exchange(owners, intervals);
  bool ordered = intervals_ordered(intervals);
  out.resize(intervals.size());
  for (std::size_t r = 0; r < intervals.size(); ++r)
    build(owners, intervals, r, exchange, ordered, out[r]);
}

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> Route::owner_ranges() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::size_t p = 0; p < send_offsets.size() && p < input_splits.size(); ++p) {
    out.emplace_back(send_offsets[p], input_splits[p]);
  }
  return out;
}

std::string Route::problem(std::int64_t self) const {
  auto n = [](std::int64_t v) { return std::to_string(v); };
  std::size_t peers = send_offsets.size();
  if (peers == 0) return "the route has no peers (send_offsets is empty)";
  if (input_splits.size() != peers || output_splits.size() != peers) {
    return "the route's per-peer tables differ in size: send_offsets " + std::to_string(peers) +
           ", input_splits " + std::to_string(input_splits.size()) + ", output_splits " +
           std::to_string(output_splits.size());
  }
  if (local_length < 0) return "local_length " + n(local_length) + " is negative";
  if (global_start < 0) return "global_start " + n(global_start) + " is negative";
  if (global_end < global_start) {
    return "the interval [" + n(global_start) + ", " + n(global_end) + ") ends before it starts";
  }
  if (self >= static_cast<std::int64_t>(peers)) {
    return "rank " + n(self) + " has no entry in a route for " + std::to_string(peers) + " ranks";
  }
  std::int64_t received = 0;
  std::int64_t received_before_self = 0;
  for (std::size_t p = 0; p < peers; ++p) {
    std::string peer = " for peer " + std::to_string(p);
    std::int64_t off = send_offsets[p], count = input_splits[p], m = output_splits[p];
    if (off < 0) return "send_offsets" + peer + " is negative (" + n(off) + ")";
    if (count < 0) return "input_splits" + peer + " is negative (" + n(count) + ")";
    if (m < 0) return "output_splits" + peer + " is negative (" + n(m) + ")";
    if (count == 0 && off != 0)
      return "send_offsets" + peer + " is " + n(off) + " with no rows sent";
    std::int64_t end;
    if (__builtin_add_overflow(off, count, &end) || end > local_length) {
      return "the send range" + peer + " [" + n(off) + ", " + n(off) + " + " + n(count) +
             ") is outside the owner shard of " + n(local_length) + " rows";
    }
    if (__builtin_add_overflow(received, m, &received)) {
      return "the output_splits sum beyond int64 at peer " + std::to_string(p);
    }
    if (!needs_exchange && (count != 0 || m != 0)) {
      return "needs_exchange is false but peer " + std::to_string(p) + " has " + n(count) +
             " rows to send and " + n(m) + " to receive";
    }
    if (static_cast<std::int64_t>(p) == self && (count != 0 || m != 0)) {
      return "rank " + n(self) + " sends itself " + n(count) + " rows and receives " + n(m) +
             " from itself (self entries must be 0)";
    }
    if (static_cast<std::int64_t>(p) < self) received_before_self = received;
  }
  std::int64_t assembled;
  if (__builtin_add_overflow(received, local_length, &assembled) ||
      global_end - global_start != assembled) {
    return "the interval [" + n(global_start) + ", " + n(global_end) + ") does not hold the " +
           n(local_length) + " own rows plus the " + n(received) + " received (output_splits)";
  }
  if (local_output_start < 0 || local_output_start > received) {
    return "local_output_start " + n(local_output_start) + " is outside [0, " + n(received) +
           "] (the rows received)";
  }
  if (self >= 0 && received_before_self != local_output_start) {
    return "local_output_start " + n(local_output_start) + " differs from the " +
           n(received_before_self) + " rows received from ranks before rank " + n(self);
  }
  return {};
}

bool Route::is_valid() const { return problem().empty(); }

Route interval_route(std::int64_t local_length, std::int64_t rank,
                     std::span<const Interval> intervals,
                     std::optional<std::span<const std::int64_t>> owner_offsets) {
  std::vector<std::int64_t> owned;
  std::span<const std::int64_t> owners;
  if (owner_offsets) {
    owners = *owner_offsets;
  } else {
    owned = default_owners(local_length, intervals.size());
    owners = owned;
  }
  check_owners_and_intervals(owners, intervals);
  check_rank(rank, intervals.size(), "rank");
  check_owner_order(owners);
  check_intervals(owners, intervals);
  auto r = static_cast<std::size_t>(rank);
  check_local_length(owners, r, local_length);
  return build(owners, intervals, r, needs_exchange(owners, intervals));
}

std::vector<Interval> sliding_window_intervals(std::span<const std::int64_t> boundaries,
                                               std::int64_t local_length, std::int64_t size,
                                               std::int64_t window) {
  check_arguments(local_length, size, nullptr, "window", window, false);
  check_boundaries(boundaries, local_length, size);
  auto doc = boundary_index_at_shards(boundaries, local_length, size);
  std::vector<Interval> intervals(static_cast<std::size_t>(size));
  for (std::int64_t p = 0; p < size; ++p) {
    std::int64_t x = p * local_length;
    intervals[static_cast<std::size_t>(p)] = {
        std::max(boundaries[doc[static_cast<std::size_t>(p)]], x - window + 1), x + local_length};
  }
  return intervals;
}

Route sliding_window_route(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                           std::int64_t size, std::int64_t rank, std::int64_t window) {
  check_arguments(local_length, size, &rank, "window", window, false);
  auto intervals = sliding_window_intervals(boundaries, local_length, size, window);
  return interval_route(local_length, rank, intervals);
}

std::vector<std::int64_t> compressed_document_offsets(std::span<const std::int64_t> boundaries,
                                                      std::int64_t ratio) {
  if (ratio <= 0)
    fail(Errc::route_arguments, "ratio must be positive, got " + std::to_string(ratio));
  if (boundaries.empty()) fail(Errc::route_boundaries, "document boundaries are empty");
  if (boundaries.front() != 0) {
    fail(Errc::route_boundaries,
         "document boundaries must start at 0, got " + std::to_string(boundaries.front()));
  }
  std::vector<std::int64_t> keys(boundaries.size());
  keys[0] = 0;
  for (std::size_t d = 0; d + 1 < boundaries.size(); ++d) {
    if (boundaries[d + 1] < boundaries[d]) {
      fail(Errc::route_boundaries,
           "document boundaries decrease at index " + std::to_string(d + 1) + ": " +
               std::to_string(boundaries[d]) + " then " + std::to_string(boundaries[d + 1]));
    }
    keys[d + 1] = keys[d] + (boundaries[d + 1] - boundaries[d]) / ratio;
  }
  return keys;
}

namespace {

// SPEC 7.3 owners[p] for p < doc.size(), from the document keys and doc[p] = doc(p L).
std::vector<std::int64_t> owners_at_shards(std::span<const std::int64_t> boundaries,
                                           std::span<const std::int64_t> keys,
                                           std::span<const std::size_t> doc, std::int64_t ratio,
                                           std::int64_t local_length) {
  std::vector<std::int64_t> owners(doc.size());
  for (std::size_t p = 0; p < doc.size(); ++p) {
    std::size_t d = doc[p];
    // Blocks of earlier documents all end before b_d <= x; in document d those ending
    // before x number floor((x - b_d) / ratio), which never exceeds its block count.
    owners[p] = keys[d] + (static_cast<std::int64_t>(p) * local_length - boundaries[d]) / ratio;
  }
  return owners;
}

}  // namespace

std::vector<std::int64_t> compressed_owner_offsets(std::span<const std::int64_t> boundaries,
                                                   std::int64_t ratio, std::int64_t local_length) {
  if (local_length <= 0) {
    fail(Errc::route_arguments,
         "local_length must be positive, got " + std::to_string(local_length));
  }
  auto keys = compressed_document_offsets(boundaries, ratio);
  std::int64_t size = boundaries.back() / local_length;
  // One entry per rank: capped as the window and prefix planners cap `size`, before
  // size + 1 (which overflows at size = INT64_MAX) and the allocation of that many entries.
  if (size > kMaxRoutePeers) {
    fail(Errc::route_too_large, "boundaries end at " + std::to_string(boundaries.back()) + ", " +
                                    std::to_string(size) + " shards of local_length " +
                                    std::to_string(local_length) + ", beyond the " +
                                    std::to_string(kMaxRoutePeers) +
                                    " ranks whose owner offsets compressed_owner_offsets builds");
  }
  auto doc = boundary_index_at_shards(boundaries, local_length, size + 1);
  return owners_at_shards(boundaries, keys, doc, ratio, local_length);
}

namespace {

// SPEC 7.4 after its argument checks: compressed owners and each peer's prefix interval
// (keys[doc(p L)], owners[p + 1]).
struct PrefixPlan {
  std::vector<std::int64_t> owners;
  std::vector<Interval> intervals;
};

PrefixPlan prefix_plan(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                       std::int64_t size, std::int64_t ratio) {
  check_boundaries(boundaries, local_length, size);
  // One pass each for the keys and doc(p L), p = 0..size, shared by owners and intervals.
  auto keys = compressed_document_offsets(boundaries, ratio);
  auto doc = boundary_index_at_shards(boundaries, local_length, size + 1);
  PrefixPlan plan{owners_at_shards(boundaries, keys, doc, ratio, local_length), {}};
  plan.intervals.resize(static_cast<std::size_t>(size));
  for (std::size_t p = 0; p < plan.intervals.size(); ++p) {
    plan.intervals[p] = {keys[doc[p]], plan.owners[p + 1]};
  }
  return plan;
}

}  // namespace

Route document_prefix_route(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                            std::int64_t size, std::int64_t rank, std::int64_t ratio) {
  check_arguments(local_length, size, &rank, "ratio", ratio, true);
  PrefixPlan plan = prefix_plan(boundaries, local_length, size, ratio);
  auto r = static_cast<std::size_t>(rank);
  return interval_route(plan.owners[r + 1] - plan.owners[r], rank, plan.intervals,
                        std::span<const std::int64_t>(plan.owners));
}

void interval_routes(std::int64_t local_length, std::span<const Interval> intervals,
                     std::optional<std::span<const std::int64_t>> owner_offsets,
                     std::vector<Route>& out) {
  if (owner_offsets) return all_routes(*owner_offsets, intervals, out);
  auto owners = default_owners(local_length, intervals.size());
  all_routes(owners, intervals, out);
}

void sliding_window_routes(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                           std::int64_t size, std::int64_t window, std::vector<Route>& out) {
  auto intervals = sliding_window_intervals(boundaries, local_length, size, window);
  all_routes(default_owners(local_length, intervals.size()), intervals, out);
}

void document_prefix_routes(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                            std::int64_t size, std::int64_t ratio, std::vector<Route>& out) {
  check_arguments(local_length, size, nullptr, "ratio", ratio, true);
  PrefixPlan plan = prefix_plan(boundaries, local_length, size, ratio);
  all_routes(plan.owners, plan.intervals, out);
}

std::vector<Route> interval_routes(std::int64_t local_length, std::span<const Interval> intervals,
                                   std::optional<std::span<const std::int64_t>> owner_offsets) {
  std::vector<Route> out;
  interval_routes(local_length, intervals, owner_offsets, out);
  return out;
}

std::vector<Route> sliding_window_routes(std::span<const std::int64_t> boundaries,
                                         std::int64_t local_length, std::int64_t size,
                                         std::int64_t window) {
  std::vector<Route> out;
  sliding_window_routes(boundaries, local_length, size, window, out);
  return out;
}

std::vector<Route> document_prefix_routes(std::span<const std::int64_t> boundaries,
                                          std::int64_t local_length, std::int64_t size,
                                          std::int64_t ratio) {
  std::vector<Route> out;
  document_prefix_routes(boundaries, local_length, size, ratio, out);
  return out;
}

}  // namespace hpref
