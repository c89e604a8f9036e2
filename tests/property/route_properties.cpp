// Properties of SPEC 7-8: the route algebra on random configurations (P <= 64, random
// documents, windows, ratios, owner offsets), checked against the global oracle; the
// dispatch theorems run the product's dispatch over a loopback Communicator.
#define BOOST_TEST_DYN_LINK
#include <rapidcheck/boost_test.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "../support/loopback.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/error.hpp"
#include "hpref/oracle.hpp"
#include "hpref/routes.hpp"

using namespace hpref;
using V = std::vector<std::int64_t>;

namespace {

struct Docs {
  V boundaries;
  std::int64_t local_length;
  std::int64_t size;
};

// Random documents over size * local_length tokens.
rc::Gen<Docs> docs() {
  return rc::gen::exec([] {
    Docs d;
    d.size = *rc::gen::inRange<std::int64_t>(1, 65);
    d.local_length = *rc::gen::inRange<std::int64_t>(1, 12);
    std::int64_t total = d.size * d.local_length;
    d.boundaries = {0};
    std::int64_t mean = *rc::gen::element<std::int64_t>(1, 3, 7, 20, 100);
    while (d.boundaries.back() < total) {
      std::int64_t len = *rc::gen::inRange<std::int64_t>(1, 2 * mean + 1);
      d.boundaries.push_back(std::min(total, d.boundaries.back() + len));
    }
    return d;
  });
}

struct Config {
  std::vector<Route> routes;  // the all-ranks planner's
  const char* kind;
  std::vector<Route> singles;  // each rank's route from the single-rank function
};

// Random owner offsets (zero-length shards included) and intervals holding each shard.
rc::Gen<Config> interval_config() {
  return rc::gen::exec([] {
    auto peers = *rc::gen::inRange<std::size_t>(1, 65);
    V owners = {0};
    for (std::size_t p = 0; p < peers; ++p) {
      owners.push_back(owners.back() + *rc::gen::weightedOneOf<std::int64_t>(
                                           {{1, rc::gen::just<std::int64_t>(0)},
                                            {4, rc::gen::inRange<std::int64_t>(1, 10)}}));
    }
    std::vector<Interval> intervals(peers);
    for (std::size_t p = 0; p < peers; ++p) {
      intervals[p] = {*rc::gen::inRange<std::int64_t>(0, owners[p] + 1),
                      *rc::gen::inRange<std::int64_t>(owners[p + 1], owners.back() + 1)};
      if (*rc::gen::inRange(0, 4) == 0) intervals[p] = {owners[p], owners[p + 1]};
    }
    std::span<const std::int64_t> own(owners);
    Config c{interval_routes(0, intervals, own), "interval", {}};
    for (std::size_t r = 0; r < peers; ++r) {
      c.singles.push_back(
          interval_route(owners[r + 1] - owners[r], static_cast<std::int64_t>(r), intervals, own));
    }
    return c;
  });
}

rc::Gen<Config> any_config() {
  return rc::gen::oneOf(
      interval_config(), rc::gen::exec([] {
        Docs d = *docs();
        auto window = *rc::gen::weightedOneOf<std::int64_t>(
            {{3, rc::gen::inRange<std::int64_t>(1, 30)},
             {1, rc::gen::just(d.local_length * d.size + 5)}});
        Config c{sliding_window_routes(d.boundaries, d.local_length, d.size, window), "window", {}};
        for (std::int64_t r = 0; r < d.size; ++r) {
          c.singles.push_back(
              sliding_window_route(d.boundaries, d.local_length, d.size, r, window));
        }
        return c;
      }),
      rc::gen::exec([] {
        Docs d = *docs();
        auto ratio = *rc::gen::element<std::int64_t>(1, 2);
        Config c{document_prefix_routes(d.boundaries, d.local_length, d.size, ratio), "prefix", {}};
        for (std::int64_t r = 0; r < d.size; ++r) {
          c.singles.push_back(
              document_prefix_route(d.boundaries, d.local_length, d.size, r, ratio));
        }
        return c;
      }));
}

// A bank of `rows` x `width` values seeded per element: int64 (the mixed bits), or float64
// rows of mixed magnitudes and signs (so that sums depend on their order).
Tensor bank(std::int64_t rows, std::int64_t width, std::uint64_t seed, DType dtype = DType::int64) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * width) * 8);
  for (std::int64_t i = 0; i < rows * width; ++i) {
    std::uint64_t v = (seed + static_cast<std::uint64_t>(i)) * 0x9e3779b97f4a7c15ULL;
    v ^= v >> 29;
    if (dtype == DType::float64) {
      double x = std::ldexp(static_cast<double>(v >> 11) / 9007199254740992.0 - 0.5,
                            static_cast<int>(v % 60) - 30);
      std::memcpy(bytes.data() + i * 8, &x, 8);
    } else {
      std::memcpy(bytes.data() + i * 8, &v, 8);
    }
  }
  return Tensor(dtype, {rows, width}, SharedBytes::adopt(std::move(bytes)));
}

// bank() in `dtype`: int64, float64, or float32 (the float64 values rounded).
Tensor typed_bank(std::int64_t rows, std::int64_t width, std::uint64_t seed, DType dtype) {
  if (dtype != DType::float32) return bank(rows, width, seed, dtype);
  Tensor wide = bank(rows, width, seed, DType::float64);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * width) * 4);
  for (std::int64_t i = 0; i < rows * width; ++i) {
    auto x = static_cast<float>(wide.element<double>(i));
    std::memcpy(bytes.data() + i * 4, &x, 4);
  }
  return Tensor(dtype, {rows, width}, SharedBytes::adopt(std::move(bytes)));
}

Tensor rows_of(const Tensor& t, std::int64_t start, std::int64_t count) {
  std::size_t width = static_cast<std::size_t>(t.shape()[1]) * 8;
  return Tensor(t.dtype(), {count, t.shape()[1]},
                t.storage().slice(static_cast<std::size_t>(start) * width,
                                  static_cast<std::size_t>(count) * width));
}

// SPEC 8.1 and 8.2 run by the product (reference/src/dispatch.cpp) on one loopback rank
// per route (tests/support/loopback.hpp): every rank launches its forward, waits, then
// runs its backward. Returns each rank's output and input gradient.
struct Dispatched {
  std::vector<Tensor> forward, backward;
};

Dispatched run_dispatch(const std::vector<Route>& routes, const std::vector<Tensor>& shards,
                        const std::vector<Tensor>& grads, int sequence_dim) {
  std::size_t peers = routes.size();
  Dispatched d{std::vector<Tensor>(peers), std::vector<Tensor>(peers)};
  auto errors = hpref::test::run_loopback(static_cast<int>(peers), [&](Communicator& c) {
    auto r = static_cast<std::size_t>(c.rank());
    d.forward[r] = async_sequence_dispatch(c, c.world(), shards[r], sequence_dim, routes[r]).wait();
    if (!grads.empty())
      d.backward[r] = sequence_dispatch_backward(c, c.world(), grads[r], sequence_dim, routes[r]);
  });
  for (std::size_t r = 0; r < peers; ++r) {
    if (errors[r]) RC_FAIL("rank " + std::to_string(r) + ": " + hpref::test::describe(errors[r]));
  }
  return d;
}

std::uint64_t dot(const Tensor& a, const Tensor& b) {  // over Z / 2^64, exact
  std::uint64_t sum = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    sum += static_cast<std::uint64_t>(a.element<std::int64_t>(i)) *
           static_cast<std::uint64_t>(b.element<std::int64_t>(i));
  }
  return sum;
}

}  // namespace

RC_BOOST_PROP(theorem1_send_recv_symmetric_spec_7_1, ()) {
  Config c = *any_config();
  RC_TAG(c.kind);
  std::int64_t sent = 0, received = 0;
  for (std::size_t r = 0; r < c.routes.size(); ++r) {
    RC_ASSERT(c.routes[r].is_valid());
    for (std::size_t p = 0; p < c.routes.size(); ++p) {
      RC_ASSERT(c.routes[r].input_splits[p] == c.routes[p].output_splits[r]);
      sent += c.routes[r].input_splits[p];
      received += c.routes[r].output_splits[p];
    }
  }
  RC_ASSERT(sent == received);
}

// Every rank computes its route alone (the single-rank functions, as each process does):
// needs_exchange is the same on every rank, and it is the SPEC's definition, "some
// interval differs from its owner shard", read from all ranks' intervals; and each single
// route equals the all-ranks planner's entry, so the planners are held to the same.
RC_BOOST_PROP(theorem2_needs_exchange_agrees_spec_7_1, ()) {
  Config c = *any_config();
  RC_TAG(c.kind);
  RC_ASSERT(c.singles.size() == c.routes.size());
  bool differs = false;
  for (const Route& r : c.singles) {
    std::int64_t owner_start = r.global_start + r.local_output_start;
    differs =
        differs || owner_start != r.global_start || r.global_end != owner_start + r.local_length;
  }
  RC_TAG(differs ? "exchange" : "no exchange");
  for (std::size_t r = 0; r < c.singles.size(); ++r) {
    RC_ASSERT(c.singles[r].needs_exchange == differs);
    RC_ASSERT(c.routes[r].needs_exchange == differs);
    RC_ASSERT(c.singles[r] == c.routes[r]);
  }
}

// The product's dispatch over P loopback ranks assembles exactly the oracle's rows, with
// the sequence dim given positive or negative.
RC_BOOST_PROP(theorem3_assembly_exact_spec_8_1, ()) {
  Config c = *any_config();
  RC_TAG(c.kind);
  auto owners = route_owner_offsets(c.routes);
  std::int64_t width = *rc::gen::inRange<std::int64_t>(1, 4);
  Tensor global = bank(owners.back(), width, *rc::gen::arbitrary<std::uint64_t>());
  std::vector<Tensor> shards;
  for (std::size_t r = 0; r < c.routes.size(); ++r) {
    shards.push_back(rows_of(global, owners[r], c.routes[r].local_length));
  }
  int dim = *rc::gen::element(0, -2);
  auto assembled = run_dispatch(c.singles, shards, {}, dim).forward;
  auto expected = oracle_forward(global, c.routes);
  for (std::size_t r = 0; r < c.routes.size(); ++r) RC_ASSERT(assembled[r] == expected[r]);
}

// The product's backward: <F x, g> == <x, B g> exactly over Z / 2^64, B equals the
// oracle's fixed-order sums bit for bit over int64 and over float64 (where the order of
// the sums shows), SPEC 8.2.
RC_BOOST_PROP(theorem5_backward_adjoint_spec_8_2, ()) {
  Config c = *any_config();
  RC_TAG(c.kind);
  auto owners = route_owner_offsets(c.routes);
  std::int64_t width = *rc::gen::inRange<std::int64_t>(1, 3);
  auto seed = *rc::gen::arbitrary<std::uint64_t>();
  Tensor global = bank(owners.back(), width, seed);
  std::vector<Tensor> shards, grads, float_grads;
  for (std::size_t r = 0; r < c.routes.size(); ++r) {
    shards.push_back(rows_of(global, owners[r], c.routes[r].local_length));
    std::int64_t rows = c.routes[r].global_end - c.routes[r].global_start;
    grads.push_back(bank(rows, width, seed * 31 + r + 1));
    float_grads.push_back(bank(rows, width, seed * 37 + r + 1, DType::float64));
  }
  auto ints = run_dispatch(c.singles, shards, grads, 0);
  auto oracle = oracle_backward(grads, c.routes);
  std::uint64_t lhs = 0, rhs = 0;
  for (std::size_t r = 0; r < c.routes.size(); ++r) {
    lhs += dot(ints.forward[r], grads[r]);
    rhs += dot(shards[r], ints.backward[r]);
    RC_ASSERT(ints.backward[r] == oracle[r]);
  }
  RC_ASSERT(lhs == rhs);
  std::vector<Tensor> float_shards;
  for (const Tensor& s : shards)
    float_shards.push_back(bank(s.shape()[0], width, seed, DType::float64));
  auto floats = run_dispatch(c.singles, float_shards, float_grads, -2);
  auto float_oracle = oracle_backward(float_grads, c.routes);
  for (std::size_t r = 0; r < c.routes.size(); ++r) {
    RC_ASSERT(floats.backward[r].bytes().size() == float_oracle[r].bytes().size());
    RC_ASSERT(std::equal(floats.backward[r].bytes().begin(), floats.backward[r].bytes().end(),
                         float_oracle[r].bytes().begin()));
  }
}

// DispatchBuffers (dispatch.hpp): a rank that keeps one across steps of changing row
// widths and dtypes gets, every step, exactly the fresh calls' forward and backward, which
// equal the oracle's (the backward bit for bit over float32 and float64, where the order of
// the sums shows), forward by the blocking call or by two async dispatches in flight at
// once; and the outputs it kept from earlier steps are never written again.
RC_BOOST_PROP(dispatch_with_reused_buffers_equals_fresh_dispatch_spec_8, ()) {
  Config c = *any_config();
  RC_TAG(c.kind);
  auto owners = route_owner_offsets(c.routes);
  struct Step {
    DType dtype;
    std::int64_t width;
    std::uint64_t seed;
    bool async, keep;
    std::vector<Tensor> shards, grads;
  };
  std::vector<Step> steps(*rc::gen::inRange<std::size_t>(1, 6));
  for (Step& s : steps) {
    s.dtype = *rc::gen::element(DType::int64, DType::float64, DType::float32);
    s.width = *rc::gen::inRange<std::int64_t>(1, 4);
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    s.async = *rc::gen::arbitrary<bool>();
    s.keep = *rc::gen::arbitrary<bool>();
    for (std::size_t r = 0; r < c.routes.size(); ++r) {
      std::int64_t rows = c.routes[r].global_end - c.routes[r].global_start;
      s.shards.push_back(typed_bank(c.routes[r].local_length, s.width, s.seed + r, s.dtype));
      s.grads.push_back(typed_bank(rows, s.width, s.seed * 31 + r + 1, s.dtype));
    }
  }
  std::size_t peers = c.routes.size();
  // [rank][step]: reused forward, a second async forward, reused backward, and fresh ones.
  std::vector<std::vector<std::array<Tensor, 5>>> got(
      peers, std::vector<std::array<Tensor, 5>>(steps.size()));
  std::vector<std::vector<std::string>> kept_bytes(peers);
  auto errors = hpref::test::run_loopback(static_cast<int>(peers), [&](Communicator& c_) {
    auto r = static_cast<std::size_t>(c_.rank());
    const Route& route = c.singles[r];
    DispatchBuffers buffers;
    std::vector<Tensor> kept;
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      auto& out = got[r][k];
      if (s.async) {  // two in flight on one DispatchBuffers: each its own send and output
        DispatchHandle a = async_sequence_dispatch(c_, c_.world(), s.shards[r], 0, route, buffers);
        DispatchHandle b = async_sequence_dispatch(c_, c_.world(), s.shards[r], -2, route, buffers);
        out[0] = a.wait();
        out[1] = b.wait();
      } else {
        out[0] = sequence_dispatch(c_, c_.world(), s.shards[r], 0, route, buffers);
        out[1] = out[0];
      }
      out[2] = sequence_dispatch_backward(c_, c_.world(), s.grads[r], 0, route, buffers);
      out[3] = sequence_dispatch(c_, c_.world(), s.shards[r], 0, route);
      out[4] = sequence_dispatch_backward(c_, c_.world(), s.grads[r], 0, route);
      if (s.keep) {
        for (int i : {0, 2}) {
          kept.push_back(out[i]);
          kept_bytes[r].emplace_back(out[i].bytes().begin(), out[i].bytes().end());
        }
      }
      for (int i : {0, 1, 2}) {  // copies: the step's outputs are released but for the kept
        std::vector<std::int64_t> shape(out[i].shape().begin(), out[i].shape().end());
        out[i] = Tensor::copy_of(out[i].dtype(), std::move(shape), out[i].bytes());
      }
      if (buffers.count() > DispatchBuffers::kMaxBuffers) {
        throw Error(Errc::internal, std::to_string(buffers.count()) + " buffers kept");
      }
    }
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (std::string(kept[i].bytes().begin(), kept[i].bytes().end()) != kept_bytes[r][i]) {
        throw Error(Errc::internal, "a kept output was written again");
      }
    }
  });
  for (std::size_t r = 0; r < peers; ++r) {
    if (errors[r]) RC_FAIL("rank " + std::to_string(r) + ": " + hpref::test::describe(errors[r]));
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    std::vector<std::uint8_t> bytes;  // the shards in rank order
    for (const Tensor& shard : steps[k].shards)
      bytes.insert(bytes.end(), shard.bytes().begin(), shard.bytes().end());
    Tensor global(steps[k].dtype, {owners.back(), steps[k].width},
                  SharedBytes::adopt(std::move(bytes)));
    auto forward = oracle_forward(global, c.routes);
    auto backward = oracle_backward(steps[k].grads, c.routes);
    for (std::size_t r = 0; r < peers; ++r) {
      const auto& out = got[r][k];
      RC_ASSERT(out[0] == out[3]);
      RC_ASSERT(out[1] == out[3]);
      RC_ASSERT(out[2] == out[4]);
      RC_ASSERT(out[3] == forward[r]);
      RC_ASSERT(out[4] == backward[r]);
    }
  }
}

RC_BOOST_PROP(theorem6_ratio1_prefix_is_window_spec_7_4, ()) {
  Docs d = *docs();
  std::int64_t window = d.local_length * d.size + *rc::gen::inRange<std::int64_t>(0, 100);
  auto rank = *rc::gen::inRange<std::int64_t>(0, d.size);
  RC_ASSERT(document_prefix_route(d.boundaries, d.local_length, d.size, rank, 1) ==
            sliding_window_route(d.boundaries, d.local_length, d.size, rank, window));
}

// Theorem 4 (proofs/coq): the sliding-window intervals meet every validity condition of
// 7.1 for any valid arguments: 0 <= start <= owners[p] <= owners[p+1] <= end <= owners[P],
// with owners p * L.
RC_BOOST_PROP(theorem4_window_intervals_valid_spec_7_2, ()) {
  Docs d = *docs();
  auto window =
      *rc::gen::weightedOneOf<std::int64_t>({{4, rc::gen::inRange<std::int64_t>(1, 40)},
                                             {1, rc::gen::inRange<std::int64_t>(1, 1 << 20)}});
  auto intervals = sliding_window_intervals(d.boundaries, d.local_length, d.size, window);
  RC_ASSERT(intervals.size() == static_cast<std::size_t>(d.size));
  std::int64_t total = d.local_length * d.size;
  for (std::size_t p = 0; p < intervals.size(); ++p) {
    std::int64_t own = static_cast<std::int64_t>(p) * d.local_length;
    RC_ASSERT(0 <= intervals[p].start);
    RC_ASSERT(intervals[p].start <= own);
    RC_ASSERT(own + d.local_length <= intervals[p].end);
    RC_ASSERT(intervals[p].end <= total);
    RC_ASSERT(intervals[p].start >= own - window + 1);  // the window, and no further back
  }
  // And so the route over them is built without an error on every rank.
  for (std::int64_t r = 0; r < d.size; ++r) {
    RC_ASSERT(sliding_window_route(d.boundaries, d.local_length, d.size, r, window).is_valid());
  }
}

// Theorem 4b: the same for the document-prefix intervals over the 7.3 owners, which start
// at 0 and never decrease.
RC_BOOST_PROP(theorem4b_prefix_intervals_valid_spec_7_4, ()) {
  Docs d = *docs();
  auto ratio = *rc::gen::element<std::int64_t>(1, 2);
  auto keys = compressed_document_offsets(d.boundaries, ratio);
  auto owners = compressed_owner_offsets(d.boundaries, ratio, d.local_length);
  RC_ASSERT(owners.size() == static_cast<std::size_t>(d.size) + 1);
  RC_ASSERT(owners.front() == 0);
  RC_ASSERT(owners.back() == keys.back());  // every block has an owner
  for (std::size_t p = 0; p + 1 < owners.size(); ++p) RC_ASSERT(owners[p] <= owners[p + 1]);
  // The closed form equals the definition Coq proves it against (theorem 4b, second
  // part): owners[p] counts the complete blocks whose last raw token is below p * L.
  for (std::size_t p = 0; p < owners.size(); ++p) {
    std::int64_t x = static_cast<std::int64_t>(p) * d.local_length, below = 0;
    for (std::size_t k = 0; k + 1 < d.boundaries.size(); ++k) {
      for (std::int64_t last = d.boundaries[k] + ratio - 1; last < d.boundaries[k + 1];
           last += ratio) {
        below += last < x ? 1 : 0;
      }
    }
    RC_ASSERT(owners[p] == below);
  }
  auto routes = document_prefix_routes(d.boundaries, d.local_length, d.size, ratio);
  for (std::size_t p = 0; p < routes.size(); ++p) {
    RC_ASSERT(0 <= routes[p].global_start);
    RC_ASSERT(routes[p].global_start <= owners[p]);
    RC_ASSERT(owners[p + 1] == routes[p].global_end);
    RC_ASSERT(routes[p].global_end <= owners.back());
    RC_ASSERT(routes[p].local_length == owners[p + 1] - owners[p]);
  }
}

// One rank's route equals the all-ranks planner's entry for it.
RC_BOOST_PROP(single_route_equals_the_planner_entry_spec_7, ()) {
  Docs d = *docs();
  auto rank = *rc::gen::inRange<std::int64_t>(0, d.size);
  auto window = *rc::gen::inRange<std::int64_t>(1, 40);
  auto ratio = *rc::gen::element<std::int64_t>(1, 2);
  RC_ASSERT(sliding_window_route(d.boundaries, d.local_length, d.size, rank, window) ==
            sliding_window_routes(d.boundaries, d.local_length, d.size,
                                  window)[static_cast<std::size_t>(rank)]);
  RC_ASSERT(document_prefix_route(d.boundaries, d.local_length, d.size, rank, ratio) ==
            document_prefix_routes(d.boundaries, d.local_length, d.size,
                                   ratio)[static_cast<std::size_t>(rank)]);
}

// Planning into a vector that holds another configuration's routes (more ranks, fewer,
// other tables, scribbled over) gives exactly the fresh planner's routes; a refused request leaves
// the vector as it was (every check runs before it is touched).
RC_BOOST_PROP(planning_into_reused_routes_equals_fresh_planning_spec_7, ()) {
  Docs old = *docs();
  Docs d = *docs();
  auto window = *rc::gen::inRange<std::int64_t>(1, 40);
  auto ratio = *rc::gen::element<std::int64_t>(1, 2);
  bool prefix = *rc::gen::arbitrary<bool>();
  RC_TAG(prefix ? "prefix" : "window", d.size < old.size ? "shrinks" : "grows or same");
  std::vector<Route> out =
      prefix ? document_prefix_routes(old.boundaries, old.local_length, old.size, ratio)
             : sliding_window_routes(old.boundaries, old.local_length, old.size, window);
  for (Route& r : out) {  // what the caller left there need not be a route at all
    for (auto* table : {&r.send_offsets, &r.input_splits, &r.output_splits}) {
      std::fill(table->begin(), table->end(), -7);
    }
    r.needs_exchange = !r.needs_exchange;
  }
  std::vector<Route> before = out;
  if (prefix) {
    RC_ASSERT_THROWS_AS(document_prefix_routes(d.boundaries, d.local_length, d.size, 3, out),
                        Error);
    RC_ASSERT(out == before);
    document_prefix_routes(d.boundaries, d.local_length, d.size, ratio, out);
    RC_ASSERT(out == document_prefix_routes(d.boundaries, d.local_length, d.size, ratio));
  } else {
    RC_ASSERT_THROWS_AS(sliding_window_routes(d.boundaries, d.local_length, d.size, 0, out), Error);
    RC_ASSERT(out == before);
    sliding_window_routes(d.boundaries, d.local_length, d.size, window, out);
    RC_ASSERT(out == sliding_window_routes(d.boundaries, d.local_length, d.size, window));
  }
  std::vector<Interval> shards(static_cast<std::size_t>(d.size));
  for (std::int64_t p = 0; p < d.size; ++p)
    shards[static_cast<std::size_t>(p)] = {p * 3, p * 3 + 3};
  interval_routes(3, shards, std::nullopt, out);
  RC_ASSERT(out == interval_routes(3, shards));
}

// Random (often invalid) arguments: a valid route or an hpref::Error, never anything else.
RC_BOOST_PROP(route_arguments_give_a_valid_route_or_an_error_spec_7, ()) {
  auto small = rc::gen::inRange<std::int64_t>(-3, 20);
  V boundaries = *rc::gen::container<V>(small);
  if (*rc::gen::arbitrary<bool>()) {  // often well-formed documents, so routes get built too
    Docs d = *docs();
    boundaries = d.boundaries;
    if (*rc::gen::arbitrary<bool>()) {
      auto rank = *rc::gen::inRange<std::int64_t>(-1, d.size + 1);
      auto window = *rc::gen::inRange<std::int64_t>(-1, 30);
      auto ratio = *rc::gen::inRange<std::int64_t>(0, 4);
      Route r = *rc::gen::arbitrary<bool>()
                    ? [&] { try { return sliding_window_route(boundaries, d.local_length, d.size, rank, window); }
                            catch (const Error& e) { RC_ASSERT(e.code() != Errc::internal); return Route{}; } }()
                    : [&] { try { return document_prefix_route(boundaries, d.local_length, d.size, rank, ratio); }
                            catch (const Error& e) { RC_ASSERT(e.code() != Errc::internal); return Route{}; } }();
      RC_TAG(r.send_offsets.empty() ? "refused" : "route");
      if (!r.send_offsets.empty()) RC_ASSERT(r.is_valid());
      return;
    }
  }
  try {
    Route r;
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        r = sliding_window_route(boundaries, *small, *small, *small, *small);
        break;
      case 1:
        r = document_prefix_route(boundaries, *small, *small, *small, *small);
        break;
      default: {
        auto ends = *rc::gen::container<V>(small);
        std::vector<Interval> intervals;
        for (std::size_t i = 0; i + 1 < ends.size(); i += 2)
          intervals.push_back({ends[i], ends[i + 1]});
        r = *rc::gen::arbitrary<bool>() ? interval_route(*small, *small, intervals)
                                        : interval_route(*small, *small, intervals,
                                                         std::span<const std::int64_t>(boundaries));
      }
    }
    RC_TAG("route");
    RC_ASSERT(r.is_valid());
  } catch (const Error& e) {
    RC_TAG(std::string(e.kind()));
    RC_ASSERT(e.code() != Errc::internal);
  }
}
