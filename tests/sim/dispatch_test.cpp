// SPEC 8.1-8.3 on the simulator: every refusal of the product's sequence dispatch on
// forked simulated ranks (dispatch_axis, dispatch_length, dispatch_group, dispatch_reused,
// dispatch_route), forward and backward, and what the other ranks see when one rank is
// refused while its peers exchange: an error naming it, never a hang.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <functional>
#include <limits>

#include "../support/tensors.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/oracle.hpp"
#include "hpref/routes.hpp"
#include "hpref/sim/cluster.hpp"
#include "support.hpp"

using namespace hpref;
using namespace hpref::sim;
using hpref::sim::testing::describe;
using V = std::vector<std::int64_t>;

namespace {

Tensor iota(std::vector<std::int64_t> shape, std::int64_t first = 0) {
  return hpref::test::int64_iota(std::move(shape), first);
}

// SPEC 7.2's worked example: L = 4, P = 3, documents [0,6) [6,12), window 3.
std::vector<Route> example() { return sliding_window_routes(V{0, 6, 12}, 4, 3, 3); }

RunResult run(int ranks, std::uint64_t seed, const std::function<std::string(Communicator&)>& fn) {
  Options o;
  o.seed = seed;
  return Cluster::run(ranks, o, fn);
}

void expect(const RunResult& r, std::size_t rank, const std::string& kind,
            const std::string& needle) {
  BOOST_REQUIRE(rank < r.outcomes.size());
  const auto& o = r.outcomes[rank];
  BOOST_TEST(o.kind == kind, "rank " << rank << describe(r));
  BOOST_TEST(o.message.find(needle) != std::string::npos,
             "'" << needle << "' in rank " << rank << describe(r));
}

// Forward, or backward, of the example on 3 simulated ranks, rank `bad_rank`'s route
// replaced by `bad` (every rank's when bad_rank < 0).
RunResult corrupted(const Route& bad, int bad_rank, bool backward, std::uint64_t seed) {
  auto routes = example();
  return run(3, seed, [&](Communicator& c) {
    const Route& good = routes[static_cast<std::size_t>(c.rank())];
    const Route& route = bad_rank < 0 || c.rank() == bad_rank ? bad : good;
    Tensor out = backward
                     ? sequence_dispatch_backward(
                           c, c.world(), iota({good.global_end - good.global_start, 2}), 0, route)
                     : sequence_dispatch(c, c.world(), iota({4, 2}), 0, route);
    return "rows " + std::to_string(out.shape()[0]);
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sim_dispatch)

// SPEC 8.1: sequence_dim outside [-ndim, ndim), on every rank, forward and backward.
BOOST_AUTO_TEST_CASE(axis_out_of_range) {
  auto routes = example();
  for (int dim : {3, -4, 7}) {
    for (bool backward : {false, true}) {
      auto r = run(3, 1 + static_cast<std::uint64_t>(dim + 10), [&](Communicator& c) {
        const Route& route = routes[static_cast<std::size_t>(c.rank())];
        Tensor t = iota(
            {2, backward ? route.global_end - route.global_start : 4, 1});  // 3-d, sequence axis 1
        Tensor out = backward ? sequence_dispatch_backward(c, c.world(), t, dim, route)
                              : sequence_dispatch(c, c.world(), t, dim, route);
        return std::to_string(out.shape()[1]);
      });
      BOOST_TEST_CONTEXT("dim " << dim << (backward ? " backward" : " forward")) {
        for (std::size_t i = 0; i < 3; ++i) {
          expect(r, i, "dispatch_axis",
                 "sequence_dim " + std::to_string(dim) + " is outside [-3, 3) for a 3-d tensor");
        }
      }
    }
  }
  // The edges inside the range work: 1 and -2 name the sequence axis.
  for (int dim : {1, -2}) {
    auto r = run(3, 5, [&](Communicator& c) {
      const Route& route = routes[static_cast<std::size_t>(c.rank())];
      Tensor out = sequence_dispatch(c, c.world(), iota({2, 4, 1}, 100 * c.rank()), dim, route);
      return std::to_string(out.shape()[1]);
    });
    BOOST_TEST(r.failure() == Failure::none, describe(r));
    BOOST_TEST(r.outcomes[1].value == "6");
  }
}

// SPEC 8.1: an axis length other than the route's; the backward: other than its interval.
BOOST_AUTO_TEST_CASE(axis_length_differs) {
  auto routes = example();
  auto r = run(3, 2, [&](Communicator& c) {
    Tensor out = sequence_dispatch(c, c.world(), iota({5, 2}), 0,
                                   routes[static_cast<std::size_t>(c.rank())]);
    return std::to_string(out.shape()[0]);
  });
  for (std::size_t i = 0; i < 3; ++i)
    expect(r, i, "dispatch_length", "sequence axis 0 has 5 rows but the route's owner shard has 4");
  r = run(3, 3, [&](Communicator& c) {
    Tensor out = sequence_dispatch_backward(c, c.world(), iota({2, 5}), -1,
                                            routes[static_cast<std::size_t>(c.rank())]);
    return std::to_string(out.shape()[1]);
  });
  expect(r, 0, "dispatch_length",
         "gradient sequence axis 1 has 5 rows but the route's interval has 4");
  expect(r, 1, "dispatch_length",
         "gradient sequence axis 1 has 5 rows but the route's interval has 6");
  expect(r, 2, "dispatch_length", "the route's interval has 6");
}

// A route planned for another number of ranks, or a group this rank is not in.
BOOST_AUTO_TEST_CASE(route_for_another_group) {
  auto routes = example();
  auto r = run(2, 4, [&](Communicator& c) {
    return std::to_string(
        sequence_dispatch(c, c.world(), iota({4}), 0, routes[static_cast<std::size_t>(c.rank())])
            .numel());
  });
  for (std::size_t i = 0; i < 2; ++i)
    expect(r, i, "dispatch_group", "a route for 3 ranks cannot run on group 0 of 2 ranks");
  Route one = interval_routes(4, std::vector<Interval>{{0, 4}})[0];
  r = run(3, 5, [&](Communicator& c) {
    std::vector<int> first = {0};
    Group g = c.new_group(first, c.world_backend());
    return std::to_string(sequence_dispatch(c, g, iota({4}), 0, one).numel());
  });
  BOOST_TEST(r.outcomes[0].status == RankOutcome::Status::ok, describe(r));
  expect(r, 1, "dispatch_group", "(this rank is not a member)");
  expect(r, 2, "dispatch_group", "(this rank is not a member)");
}

// SPEC 8.3: a second wait() on a handle, after a real exchange.
BOOST_AUTO_TEST_CASE(second_wait_refused) {
  auto routes = example();
  auto r = run(3, 6, [&](Communicator& c) {
    DispatchHandle h = async_sequence_dispatch(c, c.world(), iota({4, 2}), 0,
                                               routes[static_cast<std::size_t>(c.rank())]);
    h.wait();
    h.wait();
    return std::string("second wait accepted");
  });
  for (std::size_t i = 0; i < 3; ++i) expect(r, i, "dispatch_reused", "cannot be waited twice");
}

// A corrupted route is refused on entry, forward and backward. Corrupted on every rank:
// every rank names what is wrong. On rank 1 alone: rank 1 names it, and its peers, which
// launched the exchange, end with an error naming rank 1 (it exited without launching),
// over several schedules.
BOOST_AUTO_TEST_CASE(corrupted_route_refused) {
  Route bad = example()[1];
  bad.send_offsets[2] = 3;  // rows [3, 5) of a 4-row shard
  for (bool backward : {false, true}) {
    BOOST_TEST_CONTEXT((backward ? "backward" : "forward")) {
      auto everyone = example()[0];
      everyone.output_splits[0] = -1;
      auto r = corrupted(everyone, -1, backward, 7);
      for (std::size_t i = 0; i < 3; ++i) {
        expect(r, i, "dispatch_route",
               "invalid route for rank " + std::to_string(i) + " of group 0");
      }
      expect(r, 0, "dispatch_route", "output_splits for peer 0 is negative (-1)");
      expect(r, 2, "dispatch_route", "output_splits for peer 0 is negative (-1)");
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        r = corrupted(bad, 1, backward, seed);
        expect(r, 1, "dispatch_route",
               "the send range for peer 2 [3, 3 + 2) is outside the owner shard of 4 rows");
        for (std::size_t i : {0u, 2u}) {
          BOOST_TEST(r.outcomes[i].status == RankOutcome::Status::error, describe(r));
          BOOST_TEST(r.outcomes[i].kind.rfind("comm_", 0) == 0, describe(r));
          BOOST_TEST(r.outcomes[i].message.find("1") != std::string::npos, describe(r));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
