// Fuzz target route_args: route arguments decoded from bytes (SPEC 7). Checks: every call
// gives a route that is_valid() or an hpref::Error (never another exception or an internal
// check); a route equals the all-ranks planner's entry for its rank, and the planner's
// routes agree pairwise (rows r sends p == rows p receives from r) and on needs_exchange.
#include <cstddef>
#include <cstdint>
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

void check_planner(const std::vector<Route>& routes) {
  for (std::size_t r = 0; r < routes.size(); ++r) {
    HPREF_FUZZ_REQUIRE(routes[r].is_valid(),
                       "planner route " + std::to_string(r) + " is not valid");
    HPREF_FUZZ_REQUIRE(routes[r].needs_exchange == routes[0].needs_exchange,
                       "needs_exchange differs");
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
      if (!with_owners) {
        HPREF_FUZZ_REQUIRE(all, "the planner refused what one rank accepted");
        HPREF_FUZZ_REQUIRE((*all.value)[static_cast<std::size_t>(rank)] == *route.value,
                           "the planner's route differs");
      }
    }
    if (all) check_planner(*all.value);
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
  if (all) check_planner(*all.value);
  return 0;
}
