// SPEC 7: every check of 7.1-7.4 provoked on its own (kind and message), worked examples
// computed by hand, the compressed-document offsets of 7.3, and the SPEC 8 oracle.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "../support/loopback.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/oracle.hpp"
#include "hpref/routes.hpp"
#include "test_util.hpp"

using namespace hpref;
using V = std::vector<std::int64_t>;
using I = std::vector<Interval>;

namespace {

void check_route(const Route& r, std::int64_t local_length, std::int64_t gs, std::int64_t ge,
                 std::int64_t los, V offsets, V sends, V receives, bool exchange) {
  BOOST_TEST(r.local_length == local_length);
  BOOST_TEST(r.global_start == gs);
  BOOST_TEST(r.global_end == ge);
  BOOST_TEST(r.local_output_start == los);
  BOOST_TEST(r.send_offsets == offsets, boost::test_tools::per_element());
  BOOST_TEST(r.input_splits == sends, boost::test_tools::per_element());
  BOOST_TEST(r.output_splits == receives, boost::test_tools::per_element());
  BOOST_TEST(r.needs_exchange == exchange);
  BOOST_TEST(r.is_valid());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(routes_worked_examples)

// L=4, P=3, documents [0,6) [6,12), window 3: rank 2's halo stops at its document start 6,
// rank 1's reaches back 2 rows into rank 0.
BOOST_AUTO_TEST_CASE(window_clipped_by_a_document_start_spec_7_2) {
  V b = {0, 6, 12};
  check_route(sliding_window_route(b, 4, 3, 0, 3), 4, 0, 4, 0, {0, 2, 0}, {0, 2, 0}, {0, 0, 0},
              true);
  check_route(sliding_window_route(b, 4, 3, 1, 3), 4, 2, 8, 2, {0, 0, 2}, {0, 0, 2}, {2, 0, 0},
              true);
  check_route(sliding_window_route(b, 4, 3, 2, 3), 4, 6, 12, 2, {0, 0, 0}, {0, 0, 0}, {0, 2, 0},
              true);
}

// Owner offsets [0,3,3,7]: rank 1 owns nothing but needs rows 1..3 of rank 0.
BOOST_AUTO_TEST_CASE(zero_length_owner_shard_spec_7_1) {
  V owners = {0, 3, 3, 7};
  I intervals = {{0, 3}, {1, 3}, {3, 7}};
  check_route(interval_route(0, 1, intervals, owners), 0, 1, 3, 2, {0, 0, 0}, {0, 0, 0}, {2, 0, 0},
              true);
  check_route(interval_route(3, 0, intervals, owners), 3, 0, 3, 0, {0, 1, 0}, {0, 2, 0}, {0, 0, 0},
              true);
  check_route(interval_route(4, 2, intervals, owners), 4, 3, 7, 0, {0, 0, 0}, {0, 0, 0}, {0, 0, 0},
              true);
}

// A window of 100 over a 6-row sequence: every rank needs everything before it.
BOOST_AUTO_TEST_CASE(window_longer_than_the_sequence_spec_7_2) {
  V b = {0, 6};
  check_route(sliding_window_route(b, 2, 3, 0, 100), 2, 0, 2, 0, {0, 0, 0}, {0, 2, 2}, {0, 0, 0},
              true);
  check_route(sliding_window_route(b, 2, 3, 2, 100), 2, 0, 6, 4, {0, 0, 0}, {0, 0, 0}, {2, 2, 0},
              true);
}

// Documents of 5, 7 and 4 raw tokens, ratio 2: blocks [0,2) [2,4) | [5,7) [7,9) [9,11) |
// [12,14) [14,16); tokens 4 and 11 belong to no block. keys [0,2,5,7], owners [0,2,3,5,7].
BOOST_AUTO_TEST_CASE(ratio_two_with_odd_documents_spec_7_3_7_4) {
  V b = {0, 5, 12, 16};
  BOOST_TEST(compressed_document_offsets(b, 2) == V({0, 2, 5, 7}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_owner_offsets(b, 2, 4) == V({0, 2, 3, 5, 7}),
             boost::test_tools::per_element());
  check_route(document_prefix_route(b, 4, 4, 1, 2), 1, 0, 3, 2, {0, 0, 0, 0}, {0, 0, 1, 0},
              {2, 0, 0, 0}, true);
  check_route(document_prefix_route(b, 4, 4, 2, 2), 2, 2, 5, 1, {0, 0, 0, 0}, {0, 0, 0, 0},
              {0, 1, 0, 0}, true);
  check_route(document_prefix_route(b, 4, 4, 0, 2), 2, 0, 2, 0, {0, 0, 0, 0}, {0, 2, 0, 0},
              {0, 0, 0, 0}, true);
}

// Every document inside one shard and a window of 1: nobody exchanges, on every rank.
BOOST_AUTO_TEST_CASE(no_exchange_when_intervals_are_the_shards_spec_7_1) {
  V b = {0, 2, 4, 8};
  for (std::int64_t r = 0; r < 2; ++r) {
    check_route(sliding_window_route(b, 4, 2, r, 1), 4, 4 * r, 4 * r + 4, 0, {0, 0}, {0, 0}, {0, 0},
                false);
  }
  // ...but a single interval that differs makes every rank exchange.
  I intervals = {{0, 4}, {3, 8}};
  BOOST_TEST(interval_route(4, 0, intervals).needs_exchange);
  BOOST_TEST(interval_route(4, 1, intervals).needs_exchange);
}

BOOST_AUTO_TEST_CASE(gaps_between_documents_in_compressed_space_spec_7_4) {
  // Ratio 2, documents of 3, 3 and 2 tokens: blocks [0,2) | [3,5) | [6,8), whose last
  // tokens 1, 4, 7 sit on ranks 0, 2, 3 (L = 2); tokens 2 and 5 are gaps in no block.
  V b = {0, 3, 6, 8};
  BOOST_TEST(compressed_document_offsets(b, 2) == V({0, 1, 2, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_owner_offsets(b, 2, 2) == V({0, 1, 1, 2, 3}),
             boost::test_tools::per_element());
  // Rank 1 owns no block but its document's prefix (block 0) lives on rank 0.
  check_route(document_prefix_route(b, 2, 4, 0, 2), 1, 0, 1, 0, {0, 0, 0, 0}, {0, 1, 0, 0},
              {0, 0, 0, 0}, true);
  check_route(document_prefix_route(b, 2, 4, 1, 2), 0, 0, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0},
              {1, 0, 0, 0}, true);
  check_route(document_prefix_route(b, 2, 4, 2, 2), 1, 1, 2, 0, {0, 0, 0, 0}, {0, 0, 0, 0},
              {0, 0, 0, 0}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(routes_checks)

BOOST_AUTO_TEST_CASE(interval_route_checks_in_spec_order_7_1) {
  I two = {{0, 4}, {4, 8}};
  V three = {0, 4, 8};
  HPREF_CHECK_ERROR(interval_route(4, 0, two, V{0, 4}), Errc::route_owner_count, "2 entries");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{}), Errc::route_no_intervals, "at least one");
  HPREF_CHECK_ERROR(interval_route(4, 0, two, V{1, 4, 8}), Errc::route_owner_start, "got 1");
  HPREF_CHECK_ERROR(interval_route(4, 2, two, three), Errc::route_rank, "rank 2");
  HPREF_CHECK_ERROR(interval_route(4, -1, two, three), Errc::route_rank, "rank -1");
  HPREF_CHECK_ERROR(interval_route(4, 0, two, V{0, 5, 4}), Errc::route_owner_order, "5 then 4");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{0, 4}, {5, 8}}, three), Errc::route_interval,
                    "interval 1 (5, 8) does not contain owner shard (4, 8)");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{-1, 4}, {4, 8}}, three), Errc::route_interval,
                    "(-1, 4)");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{0, 3}, {4, 8}}, three), Errc::route_interval, "(0, 3)");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{0, 4}, {4, 9}}, three), Errc::route_interval, "[0, 8)");
  HPREF_CHECK_ERROR(interval_route(3, 0, two, three), Errc::route_local_length, "local_length 3");
  // Order: the owner count is checked before the rank, the rank before the intervals.
  HPREF_CHECK_ERROR(interval_route(4, 9, two, V{0}), Errc::route_owner_count, "1 entries");
  HPREF_CHECK_ERROR(interval_route(4, 9, I{{5, 8}, {4, 8}}, three), Errc::route_rank, "rank 9");
  // Default owners p * L beyond int64.
  HPREF_CHECK_ERROR(
      interval_route(std::numeric_limits<std::int64_t>::max() / 2, 0, I{{0, 1}, {1, 2}, {2, 3}}),
      Errc::route_overflow, "beyond int64");
}

BOOST_AUTO_TEST_CASE(sliding_window_argument_checks_7_2) {
  V b = {0, 8};
  HPREF_CHECK_ERROR(sliding_window_route(b, 0, 2, 0, 1), Errc::route_arguments, "local_length");
  HPREF_CHECK_ERROR(sliding_window_route(b, 4, 0, 0, 1), Errc::route_arguments, "size");
  HPREF_CHECK_ERROR(sliding_window_route(b, 4, 2, 2, 1), Errc::route_arguments, "rank 2");
  HPREF_CHECK_ERROR(sliding_window_route(b, 4, 2, -1, 1), Errc::route_arguments, "rank -1");
  HPREF_CHECK_ERROR(sliding_window_route(b, 4, 2, 0, 0), Errc::route_arguments, "window");
  // (a) before (b)
  HPREF_CHECK_ERROR(sliding_window_route(V{}, 4, 2, 0, 0), Errc::route_arguments, "window");
}

BOOST_AUTO_TEST_CASE(boundary_checks_7_2_7_4) {
  for (int prefix = 0; prefix < 2; ++prefix) {
    auto route = [prefix](V b) {
      return prefix ? document_prefix_route(b, 4, 2, 0, 1) : sliding_window_route(b, 4, 2, 0, 3);
    };
    HPREF_CHECK_ERROR(route(V{0}), Errc::route_boundaries, "at least 2 entries");
    HPREF_CHECK_ERROR(route(V{1, 8}), Errc::route_boundaries, "start at 0");
    HPREF_CHECK_ERROR(route(V{0, 7}), Errc::route_boundaries, "local_length * size = 8, got 7");
    HPREF_CHECK_ERROR(route(V{0, 4, 4, 8}), Errc::route_boundaries, "strictly increase");
    HPREF_CHECK_ERROR(route(V{0, 5, 3, 8}), Errc::route_boundaries, "5 then 3");
  }
  std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
  HPREF_CHECK_ERROR(sliding_window_route(V{0, 4}, big, 3, 0, 1), Errc::route_overflow,
                    "beyond int64");
}

BOOST_AUTO_TEST_CASE(document_prefix_argument_checks_7_4) {
  V b = {0, 8};
  HPREF_CHECK_ERROR(document_prefix_route(b, 4, 2, 0, 3), Errc::route_arguments,
                    "ratio must be 1 or 2, got 3");
  HPREF_CHECK_ERROR(document_prefix_route(b, 4, 2, 0, 0), Errc::route_arguments, "got 0");
  HPREF_CHECK_ERROR(document_prefix_route(b, 0, 2, 0, 1), Errc::route_arguments, "local_length");
  HPREF_CHECK_ERROR(document_prefix_route(b, 4, -2, 0, 1), Errc::route_arguments, "size");
  HPREF_CHECK_ERROR(document_prefix_route(b, 4, 2, 5, 1), Errc::route_arguments, "rank 5");
  // ratio is checked first, as the original does
  HPREF_CHECK_ERROR(document_prefix_route(b, 0, 0, 9, 7), Errc::route_arguments, "ratio");
}

BOOST_AUTO_TEST_CASE(compressed_helpers_checks_7_3) {
  HPREF_CHECK_ERROR(compressed_document_offsets(V{0, 4}, 0), Errc::route_arguments, "ratio");
  HPREF_CHECK_ERROR(compressed_document_offsets(V{0, 4, 2}, 1), Errc::route_boundaries, "index 2");
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{0, 4}, 1, 0), Errc::route_arguments, "local_length");
}

// SPEC 7.3's size = b.back() / L ranks, capped as the planners cap theirs: size + 1 at
// INT64_MAX overflowed and 2^40 ranks were allocated before this check.
BOOST_AUTO_TEST_CASE(compressed_owner_offsets_caps_the_rank_count_7_3) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{0, kMax}, 1, 1), Errc::route_too_large,
                    "boundaries end at " + std::to_string(kMax));
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{0, std::int64_t{1} << 40}, 1, 1),
                    Errc::route_too_large, "1099511627776 shards of local_length 1");
  // The cap itself is accepted: kMaxRoutePeers shards, kMaxRoutePeers + 1 entries.
  BOOST_TEST(compressed_owner_offsets(V{0, kMaxRoutePeers}, 1, 1).size() ==
             static_cast<std::size_t>(kMaxRoutePeers + 1));
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{0, 2 * (kMaxRoutePeers + 1)}, 2, 2),
                    Errc::route_too_large, std::to_string(kMaxRoutePeers + 1) + " shards");
}

BOOST_AUTO_TEST_CASE(is_valid_rejects_broken_routes) {
  Route good = sliding_window_route(V{0, 6, 12}, 4, 3, 1, 3);
  BOOST_TEST(good.is_valid());
  Route r = good;
  r.input_splits.pop_back();
  BOOST_TEST(!r.is_valid());
  r = good;
  r.send_offsets[2] = 3;  // 3 + 2 rows past the 4-row shard
  BOOST_TEST(!r.is_valid());
  r = good;
  r.global_end += 1;  // interval no longer the shard plus what is received
  BOOST_TEST(!r.is_valid());
  r = good;
  r.needs_exchange = false;
  BOOST_TEST(!r.is_valid());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(oracle)

Tensor int64_rows(std::vector<std::int64_t> values, std::int64_t width = 1) {
  std::vector<std::uint8_t> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor(DType::int64, {static_cast<std::int64_t>(values.size()) / width, width},
                SharedBytes::adopt(std::move(bytes)));
}

std::vector<std::int64_t> values(const Tensor& t) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    out[static_cast<std::size_t>(i)] = t.element<std::int64_t>(i);
  return out;
}

BOOST_AUTO_TEST_CASE(forward_is_the_interval_of_the_global_bank_spec_8_1) {
  auto routes = sliding_window_routes(V{0, 6, 12}, 4, 3, 3);
  Tensor bank = int64_rows({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto out = oracle_forward(bank, routes);
  BOOST_TEST(values(out[1]) == V({2, 3, 4, 5, 6, 7}), boost::test_tools::per_element());
  BOOST_TEST(values(out[2]) == V({6, 7, 8, 9, 10, 11}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(backward_sums_own_block_then_peers_ascending_spec_8_2) {
  // Window 100 over 6 rows, 3 ranks of 2: rank 0's rows are used by all three ranks.
  auto routes = sliding_window_routes(V{0, 6}, 2, 3, 100);
  std::vector<Tensor> grads = {int64_rows({1, 2}), int64_rows({10, 20, 30, 40}),
                               int64_rows({100, 200, 300, 400, 500, 600})};
  auto g = oracle_backward(grads, routes);
  BOOST_TEST(values(g[0]) == V({111, 222}), boost::test_tools::per_element());
  BOOST_TEST(values(g[1]) == V({330, 440}), boost::test_tools::per_element());
  BOOST_TEST(values(g[2]) == V({500, 600}), boost::test_tools::per_element());
}

// An independent reading of IEEE binary formats for the sums below (not the product's
// add_elements): `precision` significand bits, smallest normal exponent `emin`, values
// at or past 2^emax overflow. Exact sums of two such values fit a double.
struct Format {
  DType dtype;
  int precision, emin, emax;
};
constexpr Format kF32{DType::float32, 24, -126, 128};
constexpr Format kF16{DType::float16, 11, -14, 16};
constexpr Format kBF16{DType::bfloat16, 8, -126, 128};

// x rounded to the format, ties to even (std::nearbyint in the default rounding mode).
double round_to(double x, const Format& f) {
  if (x == 0) return x;
  int e = std::ilogb(x);
  double quantum = std::ldexp(1.0, std::max(e, f.emin) - f.precision + 1);
  double r = std::nearbyint(x / quantum) * quantum;
  return std::fabs(r) >= std::ldexp(1.0, f.emax) ? std::copysign(INFINITY, x) : r;
}

// Bytes of an exactly representable value, and back.
std::vector<std::uint8_t> encode(const Format& f, double x) {
  BOOST_REQUIRE(round_to(x, f) == x);
  std::vector<std::uint8_t> out(f.dtype == DType::float32 ? 4 : 2);
  if (f.dtype == DType::float32) {
    float v = static_cast<float>(x);
    std::memcpy(out.data(), &v, 4);
    return out;
  }
  std::uint16_t bits = 0;
  if (f.dtype == DType::bfloat16) {
    float v = static_cast<float>(x);
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    bits = static_cast<std::uint16_t>(b >> 16);
  } else {
    std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    double a = std::fabs(x);
    if (a < std::ldexp(1.0, -14)) {
      bits = sign | static_cast<std::uint16_t>(a / std::ldexp(1.0, -24));
    } else {
      int e = std::ilogb(a);
      bits = sign | static_cast<std::uint16_t>((e + 15) << 10) |
             static_cast<std::uint16_t>((a / std::ldexp(1.0, e) - 1) * 1024);
    }
  }
  std::memcpy(out.data(), &bits, 2);
  return out;
}

double decode(const Format& f, const std::uint8_t* p) {
  if (f.dtype == DType::float32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  if (f.dtype == DType::bfloat16) {
    std::uint32_t b = std::uint32_t{bits} << 16;
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
  int exp = (bits >> 10) & 0x1f, man = bits & 0x3ff;
  BOOST_REQUIRE(exp != 31);
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return bits & 0x8000 ? -v : v;
}

double fold(const std::vector<double>& v, const Format& f) {
  double acc = v[0];
  for (std::size_t i = 1; i < v.size(); ++i) acc = round_to(acc + v[i], f);
  return acc;
}

// SPEC 8.2: four contributions to one owner row (its own block, then ranks 1, 2, 3),
// chosen so that every other order of the sums gives other bits, in every float type.
// Only swapping the first two is the same computation (IEEE a + b == b + a), checked too.
BOOST_AUTO_TEST_CASE(backward_order_is_observable_in_float_spec_8_2) {
  struct Case {
    Format format;
    std::vector<double> values;  // own block, then ranks 1, 2, 3 (exact in the format)
  };
  std::vector<Case> cases = {
      {kF32, {-0x1.f175dap+0, -0x1.31c8ep-1, -0x1.0cd59cp+3, 0x1.486a8ap-19}},
      {kF16, {0x1.7d8p+0, 0x1.61p+2, -0x1.65cp-8, -0x1.ac8p+1}},
      {kBF16, {0x1.1ap-3, -0x1.fcp-2, 0x1.b6p+2, 0x1.bap-3}},
  };
  // Window 100 over 4 rows, 4 ranks of 1: rank p's interval is [0, p + 1), so owner 0's
  // row is in every rank's output gradient.
  auto routes = sliding_window_routes(V{0, 4}, 1, 4, 100);
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(dtype_name(c.format.dtype)) {
      const Format& f = c.format;
      double spec = fold(c.values, f);
      std::vector<std::size_t> order = {0, 1, 2, 3};
      int others = 0;
      do {
        std::vector<double> v;
        for (std::size_t i : order) v.push_back(c.values[i]);
        bool same_tree = order[2] == 2 && order[3] == 3;  // (0 1 2 3) or (1 0 2 3)
        BOOST_TEST((fold(v, f) == spec) == same_tree,
                   "order " << order[0] << order[1] << order[2] << order[3]);
        others += same_tree ? 0 : 1;
      } while (std::next_permutation(order.begin(), order.end()));
      BOOST_TEST(others == 22);
      for (auto [a, b, x, y] :
           {std::array{0, 1, 2, 3}, {0, 2, 1, 3}, {0, 3, 1, 2}}) {  // pairwise trees
        auto v = [&](int i) { return c.values[static_cast<std::size_t>(i)]; };
        BOOST_TEST(round_to(round_to(v(a) + v(b), f) + round_to(v(x) + v(y), f), f) != spec);
      }
      // The product: the oracle and the dispatch's backward over 4 loopback ranks.
      std::size_t elem = element_size(f.dtype);
      std::vector<Tensor> grads;
      for (std::int64_t p = 0; p < 4; ++p) {
        std::vector<std::uint8_t> bytes(static_cast<std::size_t>(p + 1) * elem, 0);
        auto first = encode(f, c.values[static_cast<std::size_t>(p)]);
        std::copy(first.begin(), first.end(), bytes.begin());
        grads.emplace_back(f.dtype, std::vector<std::int64_t>{p + 1},
                           SharedBytes::adopt(std::move(bytes)));
      }
      auto oracle = oracle_backward(grads, routes);
      BOOST_TEST(decode(f, oracle[0].bytes().data()) == spec);
      std::vector<Tensor> got(4);
      auto errors = test::run_loopback(4, [&](Communicator& comm) {
        auto r = static_cast<std::size_t>(comm.rank());
        got[r] = sequence_dispatch_backward(comm, comm.world(), grads[r], 0, routes[r]);
      });
      for (auto& e : errors) BOOST_TEST(test::describe(e) == "ok");
      BOOST_TEST(decode(f, got[0].bytes().data()) == spec);
      BOOST_TEST((got[0] == oracle[0]));
    }
  }
}

// Round to nearest, ties to even, in both 16-bit types: a sum exactly halfway between two
// neighbours keeps an even significand and rounds an odd one up, at two exponents and
// both signs; the product's add_elements against the independent rounding above.
BOOST_AUTO_TEST_CASE(half_types_round_ties_to_even) {
  auto add = [](const Format& f, double a, double b) {
    auto x = encode(f, a), y = encode(f, b);
    add_elements(f.dtype, x.data(), y.data(), 1);
    return decode(f, x.data());
  };
  for (const Format& f : {kF16, kBF16}) {
    BOOST_TEST_CONTEXT(dtype_name(f.dtype)) {
      double ulp1 = std::ldexp(1.0, 1 - f.precision);  // spacing in [1, 2)
      for (double sign : {1.0, -1.0}) {
        for (double scale : {1.0, 0.5, 1024.0}) {
          double even = sign * scale, odd = sign * scale * (1 + ulp1),
                 half = sign * scale * ulp1 / 2;
          BOOST_TEST(add(f, even, half) == even);                          // tie, even: stays
          BOOST_TEST(add(f, odd, half) == sign * scale * (1 + 2 * ulp1));  // tie, odd: up to even
          BOOST_TEST(add(f, odd, -half) == odd - half - half);             // tie, odd: down to even
          BOOST_TEST(add(f, even, half * 1.5) == sign * scale * (1 + ulp1));  // past the tie
          BOOST_TEST(add(f, even, half * 0.5) == even);                       // below the tie
          for (double a : {even, odd}) {
            for (double b : {half, -half, half * 1.5, half * 0.5}) {
              if (round_to(b, f) == b)
                BOOST_TEST(add(f, a, b) == round_to(a + b, f), a << " + " << b);
            }
          }
        }
        // Below 1 the spacing halves: 1 - ulp/2 is odd; a quarter-ulp tie rounds it up to 1.
        double below = sign * (1 - ulp1 / 2);
        BOOST_TEST(add(f, below, sign * ulp1 / 4) == sign * 1.0);
        BOOST_TEST(add(f, sign * (1 - ulp1), sign * ulp1 / 4) == sign * (1 - ulp1));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(mismatched_gradients_refused) {
  auto routes = sliding_window_routes(V{0, 4}, 2, 2, 1);
  std::vector<Tensor> grads = {int64_rows({1, 2}), int64_rows({1, 2, 3})};
  HPREF_CHECK_ERROR(oracle_backward(grads, routes), Errc::oracle_mismatch, "rank 1");
  HPREF_CHECK_ERROR(oracle_forward(int64_rows({1, 2, 3}), routes), Errc::oracle_mismatch, "[2, 4)");
}

BOOST_AUTO_TEST_CASE(narrow_float_sums_round_like_torch) {
  auto add16 = [](DType d, std::uint16_t a, std::uint16_t b) {
    std::uint8_t x[2], y[2];
    std::memcpy(x, &a, 2);
    std::memcpy(y, &b, 2);
    add_elements(d, x, y, 1);
    std::uint16_t out;
    std::memcpy(&out, x, 2);
    return out;
  };
  BOOST_TEST(add16(DType::float16, 0x3c00, 0x3c00) == 0x4000);  // 1 + 1 = 2
  BOOST_TEST(add16(DType::float16, 0x7bff, 0x3c00) == 0x7bff);  // 65504 + 1 rounds back
  BOOST_TEST(add16(DType::float16, 0x7bff, 0x5000) == 0x7c00);  // 65504 + 32 = inf
  BOOST_TEST(add16(DType::float16, 0x0001, 0x0001) == 0x0002);  // subnormals
  BOOST_TEST(add16(DType::float16, 0x3c00, 0x1000) == 0x3c00);  // 1 + 2^-11: ties to even
  BOOST_TEST(add16(DType::float16, 0x3c01, 0x1000) == 0x3c02);  // odd mantissa rounds up
  BOOST_TEST(add16(DType::bfloat16, 0x3f80, 0x3f80) == 0x4000);
  BOOST_TEST(add16(DType::bfloat16, 0x3f80, 0x3b80) == 0x3f80);  // 1 + 2^-8: ties to even
  std::uint8_t q = 1;
  HPREF_CHECK_ERROR(add_elements(DType::qint8, &q, &q, 1), Errc::unsupported_arithmetic, "qint8");
}

BOOST_AUTO_TEST_SUITE_END()
