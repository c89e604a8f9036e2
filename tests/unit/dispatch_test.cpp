// SPEC 8.1-8.3: every refusal of the sequence dispatch, on the product's dispatch
// (reference/src/dispatch.cpp) over the in-process loopback Communicator
// (tests/support/loopback.hpp): dispatch_axis, dispatch_length, dispatch_group,
// dispatch_reused and dispatch_route (a hand-corrupted route, refused on entry before any
// buffer is indexed), forward and backward, plus the accepted edges next to each refusal.
#include <cstring>
#include <limits>

#include "../support/loopback.hpp"
#include "../support/tensors.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/oracle.hpp"
#include "hpref/routes.hpp"
#include "test_util.hpp"

using namespace hpref;
using V = std::vector<std::int64_t>;
using hpref::test::describe;
using hpref::test::run_loopback;

namespace {

// int64 values 0.. of the given shape.
Tensor iota(std::vector<std::int64_t> shape, std::int64_t first = 0) {
  return hpref::test::int64_iota(std::move(shape), first);
}

// The worked example of SPEC 7.2 (routes_test): L = 4, P = 3, documents [0,6) [6,12),
// window 3. Rank 1: interval [2, 8), receives 2 rows from rank 0, sends 2 to rank 2.
std::vector<Route> example() { return sliding_window_routes(V{0, 6, 12}, 4, 3, 3); }

// The error of `fn` run on a one-rank loopback world (whose dispatch needs a 1-rank route).
std::exception_ptr on_one_rank(const std::function<void(Communicator&)>& fn) {
  return run_loopback(1, fn)[0];
}

void expect(const std::exception_ptr& e, Errc kind, const std::string& needle) {
  BOOST_TEST_CONTEXT(describe(e)) {
    BOOST_REQUIRE(e);
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      BOOST_TEST(err.kind() == errc_name(kind));
      BOOST_TEST(std::string(err.what()).find(needle) != std::string::npos,
                 "'" << needle << "' in " << err.what());
    } catch (...) {
      BOOST_TEST(false, "not an hpref::Error");
    }
  }
}

// Forward (and then backward) on 3 loopback ranks of the example with rank 1's route
// replaced by `bad`: rank 1 is refused on entry; ranks 0 and 2, which launched their
// exchange, end with a loopback deadlock naming rank 1 instead of hanging.
void rank1_refused(const Route& bad, const std::string& needle) {
  auto routes = example();
  for (bool backward : {false, true}) {
    BOOST_TEST_CONTEXT((backward ? "backward" : "forward")) {
      auto errors = run_loopback(3, [&](Communicator& c) {
        Route route = c.rank() == 1 ? bad : routes[static_cast<std::size_t>(c.rank())];
        const Route& good = routes[static_cast<std::size_t>(c.rank())];
        if (backward) {
          sequence_dispatch_backward(c, c.world(), iota({good.global_end - good.global_start, 2}),
                                     0, route);
        } else {
          sequence_dispatch(c, c.world(), iota({4, 2}), 0, route);
        }
      });
      expect(errors[1], Errc::dispatch_route, needle);
      expect(errors[1], Errc::dispatch_route, "invalid route for rank 1 of group 0");
      expect(errors[0], Errc::comm_deadlock, "ranks [1]");
      expect(errors[2], Errc::comm_deadlock, "ranks [1]");
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dispatch_refusals)

// SPEC 8.1: sequence_dim outside [-ndim, ndim); -ndim and ndim - 1 are accepted.
BOOST_AUTO_TEST_CASE(axis_out_of_range_spec_8_1) {
  Route one = interval_routes(3, std::vector<Interval>{{0, 3}})[0];
  Tensor t = iota({2, 3});  // the sequence axis is 1 (length 3)
  for (bool backward : {false, true}) {
    auto call = [&](int dim) {
      return on_one_rank([&](Communicator& c) {
        if (backward) {
          sequence_dispatch_backward(c, c.world(), t, dim, one);
        } else {
          sequence_dispatch(c, c.world(), t, dim, one);
        }
      });
    };
    expect(call(2), Errc::dispatch_axis, "sequence_dim 2 is outside [-2, 2) for a 2-d tensor");
    expect(call(-3), Errc::dispatch_axis, "sequence_dim -3 is outside [-2, 2)");
    expect(call(std::numeric_limits<int>::min()), Errc::dispatch_axis, "outside [-2, 2)");
    BOOST_TEST(describe(call(1)) == "ok");
    BOOST_TEST(describe(call(-1)) == "ok");
    // -2 and 0 name axis 0 (length 2, not the route's 3).
    expect(call(-2), Errc::dispatch_length, "sequence axis 0 has 2 rows");
    expect(call(0), Errc::dispatch_length, "has 2 rows");
  }
  // A 0-d tensor has no axis at all.
  Tensor scalar(DType::int64, std::vector<std::int64_t>{},
                SharedBytes::adopt(std::vector<std::uint8_t>(8)));
  expect(on_one_rank([&](Communicator& c) { sequence_dispatch(c, c.world(), scalar, 0, one); }),
         Errc::dispatch_axis, "outside [0, 0)");
}

// SPEC 8.1: an axis length other than the route's local_length; backward: other than the
// route's interval.
BOOST_AUTO_TEST_CASE(axis_length_differs_from_the_route_spec_8_1) {
  auto routes = example();
  auto errors = run_loopback(3, [&](Communicator& c) {
    const Route& r = routes[static_cast<std::size_t>(c.rank())];
    if (c.rank() == 2) {
      sequence_dispatch(c, c.world(), iota({2, 5}), -1, r);  // 5 rows, the route owns 4
    } else {
      sequence_dispatch_backward(c, c.world(), iota({2, 3}), 0, r);  // 2 rows, not the interval's
    }
  });
  expect(errors[2], Errc::dispatch_length,
         "sequence axis 1 has 5 rows but the route's owner shard has 4");
  expect(errors[0], Errc::dispatch_length,
         "gradient sequence axis 0 has 2 rows but the route's interval has 4");
  expect(errors[1], Errc::dispatch_length, "has 2 rows but the route's interval has 6");
}

// A route planned for another number of ranks, or a group this rank is not in.
BOOST_AUTO_TEST_CASE(route_for_another_group_spec_8_1) {
  auto routes = example();  // 3 ranks
  auto errors = run_loopback(2, [&](Communicator& c) {
    sequence_dispatch(c, c.world(), iota({4, 1}), 0, routes[static_cast<std::size_t>(c.rank())]);
  });
  expect(errors[0], Errc::dispatch_group, "a route for 3 ranks cannot run on group 0 of 2 ranks");
  expect(errors[1], Errc::dispatch_group, "of 2 ranks");
  errors = run_loopback(2, [&](Communicator& c) {
    std::vector<int> just0 = {0};
    Group g = c.new_group(just0, "loopback");
    Route one = interval_routes(4, std::vector<Interval>{{0, 4}})[0];
    if (c.rank() == 1) sequence_dispatch_backward(c, g, iota({4, 1}), 0, one);
    if (c.rank() == 0 && !(sequence_dispatch(c, g, iota({4, 1}), 0, one) == iota({4, 1}))) {
      throw Error(Errc::scenario_check, "the one-rank group's dispatch changed its input");
    }
  });
  BOOST_TEST(describe(errors[0]) == "ok");
  expect(errors[1], Errc::dispatch_group, "(this rank is not a member)");
}

// SPEC 8.3: a handle is single-use, with or without an exchange.
BOOST_AUTO_TEST_CASE(second_wait_refused_spec_8_3) {
  auto routes = example();
  std::vector<std::int64_t> rows(3);
  auto errors = run_loopback(3, [&](Communicator& c) {
    const Route& r = routes[static_cast<std::size_t>(c.rank())];
    DispatchHandle h = async_sequence_dispatch(c, c.world(), iota({4, 2}, 8 * c.rank()), 0, r);
    rows[static_cast<std::size_t>(c.rank())] = h.wait().shape()[0];
    h.wait();
  });
  for (auto& e : errors) expect(e, Errc::dispatch_reused, "cannot be waited twice");
  BOOST_TEST(rows == V({4, 6, 6}), boost::test_tools::per_element());
  Route none = interval_routes(2, std::vector<Interval>{{0, 2}})[0];
  BOOST_REQUIRE(!none.needs_exchange);
  expect(on_one_rank([&](Communicator& c) {
           DispatchHandle h = async_sequence_dispatch(c, c.world(), iota({2}), 0, none);
           h.wait();
           h.wait();
         }),
         Errc::dispatch_reused, "SPEC 8.3");
  DispatchHandle never_launched;
  HPREF_CHECK_ERROR(never_launched.wait(), Errc::dispatch_reused, "twice");
}

// The product dispatch itself on the example, against the oracle: the refusals above are
// next to a dispatch that works.
BOOST_AUTO_TEST_CASE(example_matches_the_oracle_spec_8_1_8_2) {
  auto routes = example();
  Tensor bank = iota({12, 2});
  auto want = oracle_forward(bank, routes);
  std::vector<Tensor> grads, got(3), got_back(3);
  for (const Route& r : routes)
    grads.push_back(iota({r.global_end - r.global_start, 2}, 100 * r.global_start));
  auto want_back = oracle_backward(grads, routes);
  auto errors = run_loopback(3, [&](Communicator& c) {
    auto r = static_cast<std::size_t>(c.rank());
    got[r] = sequence_dispatch(c, c.world(), iota({4, 2}, 8 * c.rank()), 0, routes[r]);
    got_back[r] = sequence_dispatch_backward(c, c.world(), grads[r], 0, routes[r]);
  });
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST(describe(errors[r]) == "ok");
    BOOST_TEST((got[r] == want[r]), "forward rank " << r);
    BOOST_TEST((got_back[r] == want_back[r]), "backward rank " << r);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dispatch_route_checks)

// Each corruption of rank 1's route, refused on entry with what is wrong, forward and
// backward (SPEC 8: the route indexes every buffer).
BOOST_AUTO_TEST_CASE(corrupted_routes_refused_on_entry) {
  const Route good = example()[1];
  BOOST_REQUIRE(good.problem(1).empty());
  Route r = good;
  r.send_offsets[2] = 3;  // rows [3, 5) of a 4-row shard
  rank1_refused(r, "the send range for peer 2 [3, 3 + 2) is outside the owner shard of 4 rows");
  r = good;
  r.input_splits[2] = -1;
  rank1_refused(r, "input_splits for peer 2 is negative (-1)");
  r = good;
  r.output_splits.pop_back();
  rank1_refused(r,
                "per-peer tables differ in size: send_offsets 3, input_splits 3, output_splits 2");
  r = good;
  r.send_offsets = {};
  r.input_splits = {};
  r.output_splits = {};
  expect(on_one_rank([&](Communicator& c) { sequence_dispatch(c, c.world(), iota({4}), 0, r); }),
         Errc::dispatch_group, "a route for 0 ranks");  // the group check names it first
  r = good;
  r.global_end += 1;
  rank1_refused(r, "the interval [2, 9) does not hold the 4 own rows plus the 2 received");
  r = good;
  r.needs_exchange = false;
  rank1_refused(r, "needs_exchange is false but peer 0 has 0 rows to send and 2 to receive");
  r = good;
  r.local_length = -4;
  rank1_refused(r, "local_length -4 is negative");
  r = good;
  r.global_start = -1;
  rank1_refused(r, "global_start -1 is negative");
  r = good;
  r.global_end = 1;
  rank1_refused(r, "the interval [2, 1) ends before it starts");
  r = good;
  r.send_offsets[0] = 1;  // an offset with nothing sent
  rank1_refused(r, "send_offsets for peer 0 is 1 with no rows sent");
  r = good;
  r.output_splits[0] = std::numeric_limits<std::int64_t>::max();
  r.output_splits[2] = 1;
  rank1_refused(r, "the output_splits sum beyond int64 at peer 2");
  r = good;
  r.send_offsets[2] = std::numeric_limits<std::int64_t>::max();
  rank1_refused(r, "outside the owner shard");  // offset + count overflows
  r = good;
  r.local_output_start = 3;  // past the 2 rows received
  rank1_refused(r, "local_output_start 3 is outside [0, 2]");
}

// What is_valid() cannot see without a rank: self entries and where the own shard sits.
BOOST_AUTO_TEST_CASE(rank_aware_checks) {
  const Route good = example()[1];
  Route r = good;
  r.output_splits = {0, 2, 0};  // receives from itself instead of from rank 0
  BOOST_TEST(r.is_valid());
  rank1_refused(r,
                "rank 1 sends itself 0 rows and receives 2 from itself (self entries must be 0)");
  r = good;
  r.output_splits = {0, 0, 2};  // from rank 2 (after the own shard) but placed before it
  BOOST_TEST(r.is_valid());
  rank1_refused(r,
                "local_output_start 2 differs from the 0 rows received from ranks before rank 1");
  r = good;
  r.local_output_start = 0;
  BOOST_TEST(r.is_valid());
  rank1_refused(r, "local_output_start 0 differs from the 2 rows received");
  BOOST_TEST(good.problem(5) == "rank 5 has no entry in a route for 3 ranks");
}

// A route whose sizes are consistent but whose rows cannot fit in memory: refused before
// allocating, not wrapped around.
BOOST_AUTO_TEST_CASE(rows_beyond_memory_refused) {
  std::int64_t huge = std::int64_t{1} << 62;
  Route r;
  r.local_length = 2;
  r.global_start = 0;
  r.global_end = huge + 2;
  r.local_output_start = huge;
  r.send_offsets = {0, 0};
  r.input_splits = {0, 0};
  r.output_splits = {huge, 0};
  r.needs_exchange = true;
  BOOST_REQUIRE(r.problem(1).empty());
  auto errors = run_loopback(2, [&](Communicator& c) {
    if (c.rank() == 1) sequence_dispatch(c, c.world(), iota({2, 1}), 0, r);
  });
  expect(errors[1], Errc::dispatch_route,
         "the route's assembled interval of 4611686018427387906 rows of 8 bytes");
}

BOOST_AUTO_TEST_SUITE_END()
