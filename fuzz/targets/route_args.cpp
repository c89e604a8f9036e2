// Fuzz target route_args: route arguments decoded from bytes (SPEC 7). Checks: every call
// gives a route that is_valid() or an hpref::Error (never another exception or an internal
// check); a route equals the all-ranks planner's entry for its rank, and the planner's
// routes agree pairwise (rows r sends p == rows p receives from r) and pass problem(r).
// Every route of an accepted interval plan (with or without owner offsets) and of a
// sliding-window plan equals SPEC 7.1 written out here from the intervals (SPEC 7.2's
// for the window); a plan the planner accepts is accepted rank by rank; a ratio-1
// document-prefix route equals the sliding-window route whose window is the whole
// sequence (SPEC 7.4).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "byte_reader.hpp"
#include "fuzz_check.hpp"
#include "hpref/routes.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

std::vector<std::int64_t> ints(ByteReader& in, std::size_t max) {
  std::vector<std::int64_t> out(in.count(max));
  for (auto& v : out) v = in.integer();
  return out;
}

// Sorted-ish boundaries often: a running sum of small steps from 0.
std::vector<std::int64_t> boundaries(ByteReader& in) {
  if (in.byte() & 1) return ints(in, 66);
  std::vector<std::int64_t> b = {0};
  std::size_t n = in.count(40);
  for (std::size_t i = 0; i < n; ++i) b.push_back(b.back() + (in.byte() % 9));
  return b;
}

// SPEC 7.1 written out: rank r's route from every peer's interval and the owner offsets
// (P + 1 entries), for arguments the planner accepted (so every check of 7.1 (a)-(c)
// held and nothing overflows). Empty when `route` equals it, else what differs.
std::string spec_71_mismatch(const std::vector<Interval>& intervals,
                             const std::vector<std::int64_t>& owners, std::size_t r,
                             const Route& route) {
  const std::size_t peers = intervals.size();
  if (owners.size() != peers + 1) return "owners has " + std::to_string(owners.size()) + " entries";
  if (route.input_splits.size() != peers || route.send_offsets.size() != peers ||
      route.output_splits.size() != peers) {
    return "tables are not one entry per peer";
  }
  bool exchange = false;  // some interval differs from its owner shard
  for (std::size_t p = 0; p < peers; ++p) {
    exchange = exchange || intervals[p].start != owners[p] || intervals[p].end != owners[p + 1];
  }
  if (route.needs_exchange != exchange) return "needs_exchange";
  if (route.global_start != intervals[r].start || route.global_end != intervals[r].end) {
    return "global_start/global_end are not the rank's interval";
  }
  if (route.local_output_start != owners[r] - intervals[r].start) return "local_output_start";
  for (std::size_t p = 0; p < peers; ++p) {
    std::int64_t send = 0, offset = 0, recv = 0;  // self entries 0
    if (p != r) {
      // Rows r owns inside p's interval, and where they start in r's shard.
      send = std::max<std::int64_t>(
          0, std::min(owners[r + 1], intervals[p].end) - std::max(owners[r], intervals[p].start));
      if (send > 0) offset = std::max(owners[r], intervals[p].start) - owners[r];
      // Rows p owns inside r's interval.
      recv = std::max<std::int64_t>(
          0, std::min(owners[p + 1], intervals[r].end) - std::max(owners[p], intervals[r].start));
    }
    if (route.input_splits[p] != send || route.send_offsets[p] != offset ||
        route.output_splits[p] != recv) {
      return "peer " + std::to_string(p) + ": (send, offset, recv) = (" +
             std::to_string(route.input_splits[p]) + ", " + std::to_string(route.send_offsets[p]) +
             ", " + std::to_string(route.output_splits[p]) + "), SPEC 7.1 says (" +
             std::to_string(send) + ", " + std::to_string(offset) + ", " + std::to_string(recv) +
             ")";
    }
  }
  return "";
}

void check_spec_71(const std::vector<Interval>& intervals, const std::vector<std::int64_t>& owners,
                   const std::vector<Route>& routes) {
  HPREF_FUZZ_REQUIRE(routes.size() == intervals.size(),
                     "the planner gave " + std::to_string(routes.size()) + " routes for " +
                         std::to_string(intervals.size()) + " intervals");
  for (std::size_t r = 0; r < routes.size(); ++r) {
    std::string why = spec_71_mismatch(intervals, owners, r, routes[r]);
    HPREF_FUZZ_REQUIRE(why.empty(), "route " + std::to_string(r) + " is not SPEC 7.1's: " + why);
  }
}

// Default owners (SPEC 7.1): p * local_length, P + 1 entries.
std::vector<std::int64_t> default_owners(std::int64_t local_length, std::size_t peers) {
  std::vector<std::int64_t> owners(peers + 1);
  for (std::size_t p = 0; p <= peers; ++p) owners[p] = static_cast<std::int64_t>(p) * local_length;
  return owners;
}

// SPEC 7.2: peer p's interval (max(doc_start(p L), p L - window + 1), (p + 1) L), with
// doc_start(x) the largest boundary <= x; for arguments the planner accepted (boundaries
// from 0 to L * size, strictly increasing: no overflow).
std::vector<Interval> window_intervals(const std::vector<std::int64_t>& b,
                                       std::int64_t local_length, std::int64_t size,
                                       std::int64_t window) {
  std::vector<Interval> out;
  for (std::int64_t p = 0; p < size; ++p) {
    std::int64_t x = p * local_length;
    std::int64_t doc_start = 0;
    for (std::int64_t boundary : b) {
      if (boundary <= x) doc_start = std::max(doc_start, boundary);
    }
    out.push_back({std::max(doc_start, x - window + 1), x + local_length});
  }
  return out;
}

void check_planner(const std::vector<Route>& routes) {
  for (std::size_t r = 0; r < routes.size(); ++r) {
    HPREF_FUZZ_REQUIRE(routes[r].is_valid(),
                       "planner route " + std::to_string(r) + " is not valid");
    HPREF_FUZZ_REQUIRE(routes[r].problem(static_cast<std::int64_t>(r)).empty(),
                       "planner route " + std::to_string(r) + " fails its own-rank check: " +
                           routes[r].problem(static_cast<std::int64_t>(r)));
    for (std::size_t p = 0; p < routes.size(); ++p) {
      HPREF_FUZZ_REQUIRE(routes[r].input_splits[p] == routes[p].output_splits[r],
                         "send " + std::to_string(r) + "->" + std::to_string(p) + " != receive");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  std::uint8_t op = in.byte() % 3;
  if (op == 0) {
    std::int64_t local_length = in.integer();
    std::int64_t rank = in.integer();
    std::vector<Interval> intervals(in.count(32));
    for (auto& i : intervals) i = {in.integer(), in.integer()};
    bool with_owners = in.byte() & 1;
    std::vector<std::int64_t> owners = ints(in, 34);
    std::optional<std::span<const std::int64_t>> own;
    if (with_owners) own = owners;
    auto route = attempt("interval_route",
                         [&] { return interval_route(local_length, rank, intervals, own); });
    auto all =
        attempt("interval_routes", [&] { return interval_routes(local_length, intervals, own); });
    if (route) {
      HPREF_FUZZ_REQUIRE(route.value->is_valid(), "interval_route gave an invalid route");
      HPREF_FUZZ_REQUIRE(all, "the planner refused what one rank accepted");
      HPREF_FUZZ_REQUIRE((*all.value)[static_cast<std::size_t>(rank)] == *route.value,
                         "the planner's route differs");
    }
    if (!all) return 0;
    check_planner(*all.value);
    check_spec_71(intervals, with_owners ? owners : default_owners(local_length, intervals.size()),
                  *all.value);
    // The planner checked every rank's interval and the owners; one rank adds only 7.1 (c),
    // its shard's length (the default owners always satisfy it).
    if (rank >= 0 && static_cast<std::size_t>(rank) < intervals.size()) {
      HPREF_FUZZ_REQUIRE(route || (with_owners && *route.error == Errc::route_local_length),
                         "the planner accepted but rank " + std::to_string(rank) +
                             " was refused with " + kind_text(route.error));
    }
    return 0;
  }
  auto b = boundaries(in);
  std::int64_t local_length = in.integer();
  std::int64_t ranks = in.integer();
  std::int64_t rank = in.integer();
  std::int64_t last = in.integer();  // window or ratio
  if (ranks > 256) ranks = 256;      // keep the all-ranks planner cheap
  Outcome<Route> route;
  Outcome<std::vector<Route>> all;
  if (op == 1) {
    route = attempt("sliding_window_route",
                    [&] { return sliding_window_route(b, local_length, ranks, rank, last); });
    all = attempt("sliding_window_routes",
                  [&] { return sliding_window_routes(b, local_length, ranks, last); });
  } else {
    route = attempt("document_prefix_route",
                    [&] { return document_prefix_route(b, local_length, ranks, rank, last); });
    all = attempt("document_prefix_routes",
                  [&] { return document_prefix_routes(b, local_length, ranks, last); });
  }
  if (route) {
    HPREF_FUZZ_REQUIRE(route.value->is_valid(), "route is not valid");
    HPREF_FUZZ_REQUIRE(all, "the planner refused what one rank accepted");
    HPREF_FUZZ_REQUIRE((*all.value)[static_cast<std::size_t>(rank)] == *route.value,
                       "the planner's route differs");
  }
  if (!all) return 0;
  check_planner(*all.value);
  // The planner checks the same arguments for every rank: each one in range is accepted.
  if (rank >= 0 && rank < ranks) {
    HPREF_FUZZ_REQUIRE(route, "the planner accepted but rank " + std::to_string(rank) +
                                  " was refused with " + kind_text(route.error));
  }
  if (op == 1) {
    check_spec_71(window_intervals(b, local_length, ranks, last),
                  default_owners(local_length, static_cast<std::size_t>(ranks)), *all.value);
  } else if (last == 1 && route) {
    // SPEC 7.4: with ratio 1 it equals the sliding-window route with a window >= the
    // whole sequence (L * size, which the boundaries' check keeps within int64).
    auto window = attempt("sliding_window_route(whole sequence)", [&] {
      return sliding_window_route(b, local_length, ranks, rank, local_length * ranks);
    });
    HPREF_FUZZ_REQUIRE(window,
                       "the sliding-window route with the whole sequence as window "
                       "refused a ratio-1 document-prefix configuration: " +
                           kind_text(window.error));
    HPREF_FUZZ_REQUIRE(*window.value == *route.value,
                       "a ratio-1 document-prefix route differs from the sliding-window route "
                       "with the whole sequence as window");
  }
  return 0;
}
