// Unit tests (Boost.Test) for oracle_repr: the SPEC 8 oracle's arithmetic and refusals,
// Python-like repr of values, sample keys (SPEC 1.4), dtypes and tensors (SPEC 1.2, 1.3),
// SharedBytes views and strict UTF-8 (SPEC 2.3). Expected texts are what CPython prints
// (checked with python3's repr and bytes.decode), not what the product happens to print.
#include <boost/test/unit_test.hpp>
#include <complex>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "hpref/dtype.hpp"
#include "hpref/oracle.hpp"
#include "hpref/repr.hpp"
#include "hpref/routes.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"
#include "hpref/utf8.hpp"
#include "hpref/value.hpp"
#include "test_util.hpp"

using namespace hpref;
using hpref::test::bytes_of;
using hpref::test::unhex;

namespace {

// Little-endian bytes of a vector of trivially copyable elements.
template <class T>
std::vector<std::uint8_t> raw(const std::vector<T>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <class T>
std::vector<T> cooked(std::span<const std::uint8_t> bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// dst += src elementwise through the product's add_elements; returns dst.
template <class T>
std::vector<T> add(DType dtype, std::vector<T> dst, const std::vector<T>& src, std::size_t count) {
  auto d = raw(dst);
  auto s = raw(src);
  add_elements(dtype, d.data(), s.data(), count);
  return cooked<T>(d);
}

// A route with only the fields the oracle reads (SPEC 7.1 names).
Route route(std::int64_t local_length, std::int64_t global_start, std::int64_t global_end,
            std::int64_t local_output_start) {
  Route r;
  r.local_length = local_length;
  r.global_start = global_start;
  r.global_end = global_end;
  r.local_output_start = local_output_start;
  return r;
}

template <class T>
Tensor tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  return Tensor::copy_of(dtype, std::move(shape), raw(values));
}

using Shape = std::vector<std::int64_t>;
using C128 = std::complex<double>;
using C64 = std::complex<float>;

}  // namespace

BOOST_AUTO_TEST_SUITE(oracle_sums)

// SPEC 8.2: complex adds componentwise, every element of the count (real and imaginary
// parts are two doubles each). Kills `2 * count` -> `2 / count` (which adds nothing for
// count > 2 and one part for count 2).
BOOST_AUTO_TEST_CASE(complex128_adds_every_element_componentwise) {
  std::vector<C128> a = {{1, 2}, {3, 4}, {5, 6}}, b = {{10, 20}, {30, 40}, {50, 60}};
  auto sum = add(DType::complex128, a, b, 3);
  BOOST_TEST(sum == (std::vector<C128>{{11, 22}, {33, 44}, {55, 66}}),
             boost::test_tools::per_element());
  // A count of 2 of 3: the third element stays.
  sum = add(DType::complex128, a, b, 2);
  BOOST_TEST(sum == (std::vector<C128>{{11, 22}, {33, 44}, {5, 6}}),
             boost::test_tools::per_element());
  // Sums are IEEE double sums of each part: 0.1 + 0.2 is 0.30000000000000004 in both.
  sum = add(DType::complex128, std::vector<C128>{{0.1, -0.1}}, {{0.2, -0.2}}, 1);
  BOOST_TEST(sum[0].real() == 0.30000000000000004);
  BOOST_TEST(sum[0].imag() == -0.30000000000000004);
}

BOOST_AUTO_TEST_CASE(complex128_oracle_backward_sums_multi_element_rows_spec_8_2) {
  // Two ranks owning 2 rows each; rank 1's interval [0, 4) also holds rank 0's rows, so
  // owner 0's gradient is its own block plus rank 1's first two rows (2 complex per row).
  std::vector<Route> routes = {route(2, 0, 2, 0), route(2, 0, 4, 2)};
  std::vector<Tensor> grads = {
      tensor_of<C128>(DType::complex128, {2, 2}, {{1, -1}, {2, -2}, {3, -3}, {4, -4}}),
      tensor_of<C128>(
          DType::complex128, {4, 2},
          {{10, 100}, {20, 200}, {30, 300}, {40, 400}, {0.5, 0.25}, {6, 7}, {8, 9}, {-1, -2}})};
  auto g = oracle_backward(grads, routes);
  BOOST_REQUIRE(g.size() == 2u);
  BOOST_TEST(g[0].dtype() == DType::complex128);
  BOOST_TEST(std::vector<std::int64_t>(g[0].shape().begin(), g[0].shape().end()) ==
                 (std::vector<std::int64_t>{2, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(
      cooked<C128>(g[0].bytes()) == (std::vector<C128>{{11, 99}, {22, 198}, {33, 297}, {44, 396}}),
      boost::test_tools::per_element());
  // Owner 1's rows [2, 4) are in no other interval: its own block only.
  BOOST_TEST(
      cooked<C128>(g[1].bytes()) == (std::vector<C128>{{0.5, 0.25}, {6, 7}, {8, 9}, {-1, -2}}),
      boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(complex64_and_complex32_add_every_part) {
  auto c64 = add(DType::complex64, std::vector<C64>{{1, 2}, {3, 4}, {-5, 0.5f}},
                 {{0.5f, 0.25f}, {-3, 4}, {5, 0.25f}}, 3);
  BOOST_TEST(c64 == (std::vector<C64>{{1.5f, 2.25f}, {0, 8}, {0, 0.75f}}),
             boost::test_tools::per_element());
  // complex32: (real, imag) float16 pairs. 1.0 = 0x3c00, 2.0 = 0x4000, 3.0 = 0x4200,
  // 0.5 = 0x3800, 1.5 = 0x3e00, -1.0 = 0xbc00, 4.0 = 0x4400, 0 = 0x0000.
  std::vector<std::uint16_t> a = {0x3c00, 0x4000, 0x3800, 0xbc00, 0x0000, 0x3c00};
  std::vector<std::uint16_t> b = {0x4000, 0x4000, 0x3c00, 0x3c00, 0x3800, 0x3c00};
  // (1+2i, 0.5-1i, 0+1i) + (2+2i, 1+1i, 0.5+1i) = (3+4i, 1.5+0i, 0.5+2i)
  BOOST_TEST(add(DType::complex32, a, b, 3) ==
                 (std::vector<std::uint16_t>{0x4200, 0x4400, 0x3e00, 0x0000, 0x3800, 0x4000}),
             boost::test_tools::per_element());
  // A count of 1: both parts of the first element, nothing after it.
  BOOST_TEST(add(DType::complex32, a, b, 1) ==
                 (std::vector<std::uint16_t>{0x4200, 0x4400, 0x3800, 0xbc00, 0x0000, 0x3c00}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(float64_and_float32_add_each_element) {
  BOOST_TEST(add(DType::float64, std::vector<double>{1.5, -2, 0.1}, {2.25, 2, 0.2}, 3) ==
                 (std::vector<double>{3.75, 0, 0.30000000000000004}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::float32, std::vector<float>{1.5f, 16777216.0f, 0.1f}, {2.25f, 1, 0.2f},
                 3) == (std::vector<float>{3.75f, 16777216.0f, 0.3f}),  // 2^24 + 1 rounds to even
             boost::test_tools::per_element());
}

// SPEC 8.2: ints wrap (two's complement), as torch integer tensors do.
BOOST_AUTO_TEST_CASE(integers_wrap_like_torch) {
  constexpr auto i64max = std::numeric_limits<std::int64_t>::max();
  constexpr auto i64min = std::numeric_limits<std::int64_t>::min();
  BOOST_TEST(add(DType::int64, std::vector<std::int64_t>{i64max, i64min, 5}, {1, -1, -7}, 3) ==
                 (std::vector<std::int64_t>{i64min, i64max, -2}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::int32, std::vector<std::int32_t>{2147483647, -2147483647 - 1, 40},
                 {1, -1, 2}, 3) == (std::vector<std::int32_t>{-2147483647 - 1, 2147483647, 42}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::int16, std::vector<std::int16_t>{32767, -32768, 3}, {1, -1, 4}, 3) ==
                 (std::vector<std::int16_t>{-32768, 32767, 7}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::int8, std::vector<std::int8_t>{127, -128, 5}, {1, -1, -7}, 3) ==
                 (std::vector<std::int8_t>{-128, 127, -2}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::uint8, std::vector<std::uint8_t>{255, 200, 1}, {1, 100, 2}, 3) ==
                 (std::vector<std::uint8_t>{0, 44, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::uint16, std::vector<std::uint16_t>{65535, 60000, 1}, {1, 10000, 2}, 3) ==
                 (std::vector<std::uint16_t>{0, 4464, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::uint32, std::vector<std::uint32_t>{4294967295u, 3000000000u, 1},
                 {1, 2000000000u, 2}, 3) == (std::vector<std::uint32_t>{0, 705032704u, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(add(DType::uint64, std::vector<std::uint64_t>{~0ull, 1ull << 63, 1},
                 {1, 1ull << 63, 2}, 3) == (std::vector<std::uint64_t>{0, 0, 3}),
             boost::test_tools::per_element());
  // Only `count` elements are touched.
  BOOST_TEST(add(DType::int32, std::vector<std::int32_t>{1, 2, 3}, {10, 20, 30}, 1) ==
                 (std::vector<std::int32_t>{11, 2, 3}),
             boost::test_tools::per_element());
}

// SPEC 8.2: bool sums are logical or.
BOOST_AUTO_TEST_CASE(bool_is_logical_or) {
  BOOST_TEST(add(DType::boolean, std::vector<std::uint8_t>{0, 0, 1, 1}, {0, 1, 0, 1}, 4) ==
                 (std::vector<std::uint8_t>{0, 1, 1, 1}),
             boost::test_tools::per_element());
}

// The oracle refuses the dtypes without arithmetic, naming the dtype (SPEC 8.2).
BOOST_AUTO_TEST_CASE(no_arithmetic_for_quantized_float8_and_bits) {
  for (DType d : {DType::qint8, DType::quint8, DType::qint32, DType::quint4x2, DType::quint2x4,
                  DType::float8_e4m3fn, DType::float8_e4m3fnuz, DType::float8_e5m2,
                  DType::float8_e5m2fnuz, DType::float8_e8m0fnu, DType::bits8, DType::bits16}) {
    std::uint8_t x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
    HPREF_CHECK_ERROR(
        add_elements(d, x, y, 1), Errc::unsupported_arithmetic,
        "summing gradients of dtype " + std::string(dtype_name(d)) + " is not supported");
    BOOST_TEST(x[0] == 1);  // nothing written
  }
  // Through the oracle: the same refusal once rows overlap.
  std::vector<Route> routes = {route(1, 0, 1, 0), route(1, 0, 2, 1)};
  std::vector<Tensor> grads = {tensor_of<std::uint8_t>(DType::float8_e5m2, {1}, {1}),
                               tensor_of<std::uint8_t>(DType::float8_e5m2, {2}, {2, 3})};
  HPREF_CHECK_ERROR(oracle_backward(grads, routes), Errc::unsupported_arithmetic,
                    "dtype float8_e5m2 is not supported");
}

// float16 sums through float: signed subnormals and zeros, infinities and NaN (IEEE 754,
// what torch's CPU half addition gives).
BOOST_AUTO_TEST_CASE(float16_signs_infinities_and_nan) {
  auto h = [](std::uint16_t a, std::uint16_t b) {
    return add(DType::float16, std::vector<std::uint16_t>{a}, {b}, 1)[0];
  };
  BOOST_TEST(h(0x8001, 0x8001) == 0x8002);  // -2^-24 + -2^-24 = -2^-23
  BOOST_TEST(h(0x8001, 0x0003) == 0x0002);  // -2^-24 + 3 * 2^-24
  BOOST_TEST(h(0x8000, 0x8000) == 0x8000);  // -0 + -0 = -0
  BOOST_TEST(h(0x8000, 0x0000) == 0x0000);  // -0 + 0 = +0
  BOOST_TEST(h(0x83ff, 0x8001) == 0x8400);  // largest negative subnormal + ulp = -2^-14
  BOOST_TEST(h(0x7c00, 0x3c00) == 0x7c00);  // inf + 1 = inf
  BOOST_TEST(h(0xfc00, 0x7bff) == 0xfc00);  // -inf + max = -inf
  BOOST_TEST(h(0xfbff, 0xd000) == 0xfc00);  // -65504 - 32 overflows to -inf
  BOOST_TEST(h(0x7bff, 0x7bff) == 0x7c00);  // 65504 + 65504 = 131008: inf
  BOOST_TEST(h(0xfbff, 0xfbff) == 0xfc00);  // and -inf
  BOOST_TEST(h(0x7bff, 0x4c00) == 0x7c00);  // 65504 + 16 = 65520, the tie with 2^16: inf
  BOOST_TEST(h(0x7bff, 0x4b80) == 0x7bff);  // 65504 + 15 = 65519 rounds back to 65504
  BOOST_TEST(h(0xc000, 0x3c00) == 0xbc00);  // -2 + 1 = -1
  auto is_nan16 = [](std::uint16_t x) { return (x & 0x7c00) == 0x7c00 && (x & 0x3ff) != 0; };
  BOOST_TEST(is_nan16(h(0x7c00, 0xfc00)));  // inf - inf
  BOOST_TEST(is_nan16(h(0x7e00, 0x3c00)));  // nan + 1
  BOOST_TEST(is_nan16(h(0x3c00, 0x7d00)));  // 1 + nan (payload)
}

BOOST_AUTO_TEST_CASE(bfloat16_ties_infinities_and_nan) {
  auto h = [](std::uint16_t a, std::uint16_t b) {
    return add(DType::bfloat16, std::vector<std::uint16_t>{a}, {b}, 1)[0];
  };
  BOOST_TEST(h(0x7f80, 0x3f80) == 0x7f80);  // inf + 1
  BOOST_TEST(h(0x7f7f, 0x7f7f) == 0x7f80);  // max + max overflows to inf
  BOOST_TEST(h(0xbf80, 0xbf80) == 0xc000);  // -1 + -1 = -2
  // Ties to even: 1 + 2^-8 keeps 1; (1 + 2^-7) + 2^-8 goes up to 1 + 2^-6.
  BOOST_TEST(h(0x3f80, 0x3b80) == 0x3f80);
  BOOST_TEST(h(0x3f81, 0x3b80) == 0x3f82);
  BOOST_TEST(h(0xbf81, 0xbb80) == 0xbf82);
  auto is_nan = [](std::uint16_t x) { return (x & 0x7f80) == 0x7f80 && (x & 0x7f) != 0; };
  BOOST_TEST(is_nan(h(0x7f80, 0xff80)));  // inf - inf
  BOOST_TEST(is_nan(h(0x7fc0, 0x3f80)));  // nan + 1
  BOOST_TEST(is_nan(h(0x7f81, 0x0000)));  // a NaN with a low payload stays NaN, not inf
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(oracle_shapes)

BOOST_AUTO_TEST_CASE(row_bytes_also_without_rows) {
  BOOST_TEST(row_bytes(tensor_of(DType::int32, {4, 3}, std::vector<std::int32_t>(12))) == 12u);
  BOOST_TEST(row_bytes(Tensor(DType::float64, Shape{0, 3, 2}, SharedBytes())) == 48u);
  BOOST_TEST(row_bytes(Tensor(DType::complex64, Shape{0}, SharedBytes())) == 8u);
  // A 0-d tensor: one element.
  BOOST_TEST(row_bytes(tensor_of<std::int16_t>(DType::int16, {}, {7})) == 2u);
  BOOST_TEST(row_bytes(Tensor(DType::int8, Shape{2, 0}, SharedBytes())) == 0u);
}

BOOST_AUTO_TEST_CASE(rows_like_keeps_dtype_row_shape_and_device) {
  Tensor like =
      tensor_of<std::int16_t>(DType::int16, {1, 2, 2}, {1, 2, 3, 4}).on({DeviceType::cuda, 3});
  Tensor t = rows_like(like, 2, raw(std::vector<std::int16_t>{5, 6, 7, 8, 9, 10, 11, 12}));
  BOOST_TEST(t.dtype() == DType::int16);
  BOOST_TEST(std::vector<std::int64_t>(t.shape().begin(), t.shape().end()) ==
                 (std::vector<std::int64_t>{2, 2, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(t.device().str() == "cuda:3");
  BOOST_TEST(
      cooked<std::int16_t>(t.bytes()) == (std::vector<std::int16_t>{5, 6, 7, 8, 9, 10, 11, 12}),
      boost::test_tools::per_element());
  HPREF_CHECK_ERROR(rows_like(like, 3, {1, 2}), Errc::invalid_tensor, "needs 24 bytes, got 2");
}

BOOST_AUTO_TEST_CASE(owner_offsets_are_global_start_plus_local_output_start) {
  std::vector<Route> routes = {route(2, 0, 2, 0), route(3, 1, 6, 1), route(1, 4, 6, 1)};
  BOOST_TEST(route_owner_offsets(routes) == (std::vector<std::int64_t>{0, 2, 5, 6}),
             boost::test_tools::per_element());
  BOOST_TEST(route_owner_offsets({}) == (std::vector<std::int64_t>{0}),
             boost::test_tools::per_element());
}

// SPEC 8.1: a 0-row interval gives an empty output of the bank's row shape, and the
// device label follows the bank.
BOOST_AUTO_TEST_CASE(forward_empty_interval_and_device) {
  Tensor bank =
      tensor_of<float>(DType::float32, {3, 2}, {0, 1, 2, 3, 4, 5}).on({DeviceType::cuda, 1});
  std::vector<Route> routes = {route(1, 2, 2, 0), route(1, 0, 3, 0), route(1, 3, 3, 0)};
  auto out = oracle_forward(bank, routes);
  BOOST_REQUIRE(out.size() == 3u);
  BOOST_TEST(out[0].numel() == 0);
  BOOST_TEST(std::vector<std::int64_t>(out[0].shape().begin(), out[0].shape().end()) ==
                 (std::vector<std::int64_t>{0, 2}),
             boost::test_tools::per_element());
  BOOST_TEST((out[1] == bank));
  BOOST_TEST(out[1].device().str() == "cuda:1");
  BOOST_TEST(out[2].numel() == 0);
  BOOST_TEST(oracle_forward(bank, {}).empty());
}

BOOST_AUTO_TEST_CASE(forward_refusals_name_the_interval_spec_8_1) {
  Tensor bank = tensor_of<std::int8_t>(DType::int8, {4}, {1, 2, 3, 4});
  HPREF_CHECK_ERROR(oracle_forward(tensor_of<std::int8_t>(DType::int8, {}, {1}), {}),
                    Errc::oracle_mismatch, "the global bank must have a sequence axis 0");
  std::vector<Route> negative = {route(1, 0, 1, 0), route(1, -1, 2, 0)};
  HPREF_CHECK_ERROR(oracle_forward(bank, negative), Errc::oracle_mismatch,
                    "rank 1's interval [-1, 2) lies outside the bank of 4 rows");
  std::vector<Route> reversed = {route(1, 3, 2, 0)};
  HPREF_CHECK_ERROR(oracle_forward(bank, reversed), Errc::oracle_mismatch,
                    "rank 0's interval [3, 2) lies outside the bank of 4 rows");
  std::vector<Route> past = {route(1, 0, 5, 0)};
  HPREF_CHECK_ERROR(oracle_forward(bank, past), Errc::oracle_mismatch,
                    "rank 0's interval [0, 5) lies outside the bank of 4 rows");
}

BOOST_AUTO_TEST_CASE(backward_refusals_spec_8_2) {
  auto i64 = [](std::vector<std::int64_t> shape, std::vector<std::int64_t> v) {
    return tensor_of<std::int64_t>(DType::int64, std::move(shape), v);
  };
  std::vector<Route> two = {route(1, 0, 1, 0), route(1, 0, 2, 1)};
  std::vector<Tensor> one = {i64({1}, {1})};
  HPREF_CHECK_ERROR(oracle_backward(one, two), Errc::oracle_mismatch,
                    "oracle_backward needs one output gradient per route, got 1 for 2");
  HPREF_CHECK_ERROR(oracle_backward({}, {}), Errc::oracle_mismatch, "got 0 for 0");
  std::vector<Tensor> scalar_first = {i64({}, {1}), i64({2}, {1, 2})};
  HPREF_CHECK_ERROR(oracle_backward(scalar_first, two), Errc::oracle_mismatch,
                    "output gradients must have a sequence axis 0");
  const std::string rank1 =
      "rank 1's output gradient does not have 2 rows of the common row shape and dtype";
  std::vector<Tensor> scalar_second = {i64({1}, {1}), i64({}, {1})};
  HPREF_CHECK_ERROR(oracle_backward(scalar_second, two), Errc::oracle_mismatch, rank1);
  std::vector<Tensor> other_dtype = {i64({1}, {1}),
                                     tensor_of<std::int32_t>(DType::int32, {2}, {1, 2})};
  HPREF_CHECK_ERROR(oracle_backward(other_dtype, two), Errc::oracle_mismatch, rank1);
  // ... naming what it got beside what rank 0's gradient sets (it named neither)
  HPREF_CHECK_ERROR(oracle_backward(other_dtype, two), Errc::oracle_mismatch,
                    "(rank 0's rows: [] int64; rank 1's gradient: shape [2] int32)");
  std::vector<Tensor> other_rank = {i64({1}, {1}), i64({2, 1}, {1, 2})};
  HPREF_CHECK_ERROR(oracle_backward(other_rank, two), Errc::oracle_mismatch, rank1);
  std::vector<Tensor> other_rows = {i64({1, 2}, {1, 2}), i64({2, 1}, {1, 2})};
  HPREF_CHECK_ERROR(oracle_backward(other_rows, two), Errc::oracle_mismatch, rank1);
  std::vector<Tensor> row_count = {i64({1}, {1}), i64({3}, {1, 2, 3})};
  HPREF_CHECK_ERROR(oracle_backward(row_count, two), Errc::oracle_mismatch, rank1);
  std::vector<Tensor> first_rows = {i64({2}, {1, 2}), i64({2}, {1, 2})};
  HPREF_CHECK_ERROR(oracle_backward(first_rows, two), Errc::oracle_mismatch,
                    "rank 0's output gradient does not have 1 rows");
}

// A rank that owns no rows gets an empty gradient; its output gradient still flows to
// the owners of the rows it holds (SPEC 8.2).
BOOST_AUTO_TEST_CASE(backward_owner_of_nothing) {
  // Rank 0 owns rows [0, 2) and needs [0, 2); rank 1 owns nothing and needs [1, 2).
  std::vector<Route> routes = {route(2, 0, 2, 0), route(0, 1, 2, 1)};
  std::vector<Tensor> grads = {tensor_of<std::int32_t>(DType::int32, {2, 1}, {1, 2}),
                               tensor_of<std::int32_t>(DType::int32, {1, 1}, {40})};
  auto g = oracle_backward(grads, routes);
  BOOST_REQUIRE(g.size() == 2u);
  BOOST_TEST(cooked<std::int32_t>(g[0].bytes()) == (std::vector<std::int32_t>{1, 42}),
             boost::test_tools::per_element());
  BOOST_TEST(g[1].numel() == 0);
  BOOST_TEST(std::vector<std::int64_t>(g[1].shape().begin(), g[1].shape().end()) ==
                 (std::vector<std::int64_t>{0, 1}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// Error messages name values as Python's repr prints them; the expected texts below are
// CPython 3's repr of the same values.
BOOST_AUTO_TEST_SUITE(repr_python)

BOOST_AUTO_TEST_CASE(text_escapes_like_python) {
  BOOST_TEST(quote_text("ab") == "'ab'");
  BOOST_TEST(quote_text("") == "''");
  // Both quotes present: Python keeps single quotes and escapes the single one.
  BOOST_TEST(quote_text("it's \"x\"") == R"('it\'s "x"')");
  BOOST_TEST(quote_text(std::string_view("a\\b\nc\rd\te\0\x1f\x7f", 12)) ==
             R"('a\\b\nc\rd\te\x00\x1f\x7f')");
  // Printable non-ASCII characters are printed as they are: 2-, 3- and 4-byte UTF-8.
  BOOST_TEST(quote_text("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
             "'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'");
}

// Bytes that are not UTF-8 (a str Python could not hold) are escaped byte by byte.
BOOST_AUTO_TEST_CASE(text_invalid_utf8_bytes_escaped) {
  BOOST_TEST(quote_text("\xff") == R"('\xff')");
  BOOST_TEST(quote_text("a\x80z") == R"('a\x80z')");                      // lone continuation
  BOOST_TEST(quote_text("\xe2\x82") == R"('\xe2\x82')");                  // cut short at the end
  BOOST_TEST(quote_text("\xe2\x82x") == R"('\xe2\x82x')");                // cut short inside
  BOOST_TEST(quote_text("\xed\xa0\x80") == R"('\xed\xa0\x80')");          // a surrogate
  BOOST_TEST(quote_text("\xc0\xaf") == R"('\xc0\xaf')");                  // overlong '/'
  BOOST_TEST(quote_text("\xf4\x90\x80\x80") == R"('\xf4\x90\x80\x80')");  // past U+10FFFF
  BOOST_TEST(quote_text("\xc3\xa9\xff\xc3\xa9") == "'\xc3\xa9\\xff\xc3\xa9'");
}

BOOST_AUTO_TEST_CASE(bytes_escape_like_python) {
  BOOST_TEST(quote_bytes("") == "b''");
  BOOST_TEST(quote_bytes("it's \"x\"") == R"(b'it\'s "x"')");
  BOOST_TEST(quote_bytes(std::string_view("a\\b\nc\rd\te\0\x1f\x7f\x80\xff", 14)) ==
             R"(b'a\\b\nc\rd\te\x00\x1f\x7f\x80\xff')");
  BOOST_TEST(quote_bytes("\xc3\xa9") == R"(b'\xc3\xa9')");  // UTF-8 is not decoded in bytes
}

// Past max_chars the text stops with "..." before the closing quote (ours: messages stay
// short); escapes are never cut in half.
BOOST_AUTO_TEST_CASE(long_text_shortened) {
  BOOST_TEST(quote_text("abcdef", 4) == "'abc...'");
  BOOST_TEST(quote_text("abc", 4) == "'abc'");
  BOOST_TEST(quote_bytes("abcdef", 4) == "b'ab...'");
  BOOST_TEST(quote_text("a\nbcd", 3) == "'a\\n...'");
  BOOST_TEST(quote_text(std::string(200, 'x')) == "'" + std::string(79, 'x') + "...'");
}

BOOST_AUTO_TEST_CASE(scalars_print_like_python) {
  BOOST_TEST(repr(Value::none()) == "None");
  BOOST_TEST(repr(Value::boolean(true)) == "True");
  BOOST_TEST(repr(Value::boolean(false)) == "False");
  BOOST_TEST(repr(Value::integer(-5)) == "-5");
  BOOST_TEST(repr(Value::integer(std::numeric_limits<std::int64_t>::min())) ==
             "-9223372036854775808");
  BOOST_TEST(repr(Value::floating(2.5)) == "2.5");
  BOOST_TEST(repr(Value::string("ab")) == "'ab'");
  BOOST_TEST(repr(Value::bytes(std::string_view("x\0", 2))) == R"(b'x\x00')");
  BOOST_TEST(repr(Value::bytearray(bytes_of("ab"))) == "bytearray(b'ab')");
  BOOST_TEST(repr(Value::bytearray(std::span<const std::uint8_t>())) == "bytearray(b'')");
  BOOST_TEST(repr(Value::tuple({Value::integer(1), Value::bytearray(bytes_of("ab"))})) ==
             "(1, bytearray(b'ab'))");
  BOOST_TEST(repr(Value::list({Value::none(), Value::floating(-1.5)})) == "[None, -1.5]");
}

// Python's float repr: shortest round-trip digits, always a '.' or an exponent.
BOOST_AUTO_TEST_CASE(float_repr_like_python) {
  BOOST_TEST(float_repr(1.0) == "1.0");
  BOOST_TEST(float_repr(-0.0) == "-0.0");
  BOOST_TEST(float_repr(0.0) == "0.0");
  BOOST_TEST(float_repr(100.0) == "100.0");
  BOOST_TEST(float_repr(0.1) == "0.1");
  BOOST_TEST(float_repr(0.001) == "0.001");
  BOOST_TEST(float_repr(-1e-05) == "-1e-05");
  BOOST_TEST(float_repr(1e300) == "1e+300");
  BOOST_TEST(float_repr(1e16) == "1e+16");
  BOOST_TEST(float_repr(5e-324) == "5e-324");
  BOOST_TEST(float_repr(1.7976931348623157e308) == "1.7976931348623157e+308");
  BOOST_TEST(float_repr(std::numeric_limits<double>::quiet_NaN()) == "nan");
  BOOST_TEST(float_repr(std::numeric_limits<double>::infinity()) == "inf");
  BOOST_TEST(float_repr(-std::numeric_limits<double>::infinity()) == "-inf");
}

// CPython 3.11's own answers (repr() of each double, given by its bits; generated once and
// pasted): the positional / exponent switch at decimal exponents -4 and 16, the shortest
// digits, and 50 doubles drawn at random over exponents -30..30 and over all bit patterns.
BOOST_AUTO_TEST_CASE(float_repr_matches_cpython) {
  const std::pair<std::uint64_t, const char*> cases[] = {
      {0x430c6bf526340000ULL, "1000000000000000.0"},
      {0x4341c37937e08000ULL, "1e+16"},
      {0x431550f7dca70000ULL, "1500000000000000.0"},
      {0x3f1a36e2eb1c432dULL, "0.0001"},
      {0x3f33a92a30553261ULL, "0.0003"},
      {0x3ee4f8b588e368f1ULL, "1e-05"},
      {0x3eef75104d551d69ULL, "1.5e-05"},
      {0x4345ee2a2eb5a5c4ULL, "1.2345678901234568e+16"},
      {0x4341c37937e07fffULL, "9999999999999998.0"},
      {0x3fb999999999999aULL, "0.1"},
      {0x405edd2f1a9fbe77ULL, "123.456"},
      {0x0000000000000001ULL, "5e-324"},
      {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
      {0x8000000000000000ULL, "-0.0"},
      {0x0000000000000000ULL, "0.0"},
      {0x4480f0cf064dd592ULL, "1e+22"},
      {0x4340000000000000ULL, "9007199254740992.0"},
      {0xbe90c6f7a0b5ed8dULL, "-2.5e-07"},
      {0x54b249ad2594c37dULL, "1e+100"},
      {0x3ff0000000000000ULL, "1.0"},
      {0xbff0000000000000ULL, "-1.0"},
      {0x4059000000000000ULL, "100.0"},
      {0x400921f9f01b866eULL, "3.14159"},
      {0x3f1a36e2eb1c432dULL, "0.0001"},
      {0x3f202e4b6ce5dc68ULL, "0.00012345"},
      {0x42dc12218377de66ULL, "123456789012345.6"},
      {0x3bc550e0a42725deULL, "9.027646554052919e-21"},
      {0x3ba6106c3c38fcd7ULL, "2.3361329133182992e-21"},
      {0x3abb9516a76e1c71ULL, "8.912346655786216e-26"},
      {0x3ca438930061621aULL, "1.4031132550736113e-16"},
      {0x44a33b71fabc9967ULL, "4.5410767079554815e+22"},
      {0xc1f8a2049e7fe003ULL, "-6612339175.99219"},
      {0xc421d309e39f453eULL, "-1.6440079257152828e+20"},
      {0xc1c07a1eced56f02ULL, "-552877469.6674502"},
      {0x3f18265526cddaacULL, "9.212393497457877e-05"},
      {0xc076c90bef5d0f20ULL, "-364.5654138217087"},
      {0xba16e0638d471ee4ULL, "-7.218556607573871e-29"},
      {0x3dda42f2e403ed82ULL, "9.553884853713184e-11"},
      {0xc575ec9985fa9948ULL, "-4.240760433264802e+26"},
      {0xc1e961edd15abed1ULL, "-3406786186.835793"},
      {0xc02811dd06e60750ULL, "-12.03488942678419"},
      {0xc235d1432caa19e1ULL, "-93705153706.10109"},
      {0x452de22e7ca97dccULL, "1.8063480563514712e+25"},
      {0xc580fcfed9a6c441ULL, "-6.572016199664152e+26"},
      {0x45410e616ecd0af6ULL, "4.123929876486757e+25"},
      {0x45851a3522ce7332ULL, "8.163585256309258e+26"},
      {0xc0f811b85976e791ULL, "-98587.52184191185"},
      {0x45e2c2104b392fd9ULL, "4.644270985023785e+28"},
      {0x3cb6a4abd5379ca7ULL, "3.142381766139566e-16"},
      {0xc0bd7c9b687b8034ULL, "-7548.607063025283"},
      {0x409e71698cfd5611ULL, "1948.3530768951207"},
      {0x3e084593dba6d89dULL, "7.06401984913283e-10"},
      {0xbf990e065010fbc0ULL, "-0.024467562329160364"},
      {0xbc9b5007e3ce5c45ULL, "-9.47596875613439e-17"},
      {0x3ce6cf44087f2e85ULL, "2.5323778467651003e-15"},
      {0xc1de572bf84ea02aULL, "-2036117473.2285256"},
      {0x459d86da1e198993ULL, "2.2845228439457797e+27"},
      {0x3f7e975399fc00a0ULL, "0.007468535011639826"},
      {0xc55363ef5de8667dULL, "-9.376608157234717e+25"},
      {0xc2915b90181f1920ULL, "-4771239299014.281"},
      {0x3e3fad6e16f7e066ULL, "7.37548365393009e-09"},
      {0x41ca8db1784fb65dULL, "890987248.6227528"},
      {0xc449ee3373414bc8ULL, "-9.566655823437187e+20"},
      {0xbab0773d75960f0bULL, "-5.32038096265782e-26"},
      {0xba41b79375dd908fULL, "-4.472423253318002e-28"},
      {0x40e982243989ea16ULL, "52241.13202377052"},
      {0x31505a5c6e5ed7b5ULL, "3.702181861277981e-71"},
      {0x3f4a72896e9031b9ULL, "0.0008071108869685462"},
      {0xc7675d3e3ce6f97cULL, "-9.705121826707857e+35"},
      {0xac58c21765271e15ULL, "-4.636389465847309e-95"},
      {0xd6eec1fb5f3d062dULL, "-5.778869324919767e+110"},
      {0xe707dff63fed9a48ULL, "-2.0776289168801625e+188"},
      {0xce1d93b18252f0e2ULL, "-1.9934809580547061e+68"},
      {0xd27db94a5353dbc7ULL, "-2.3651730597972312e+89"},
      {0x5a923c5520a1a86bULL, "1.9750586129301744e+128"},
      {0x149caf844b1a5516ULL, "2.1813590312897957e-209"},
  };
  for (auto [bits, want] : cases) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    BOOST_TEST(float_repr(d) == want);
  }
}

// CPython 3.11's repr() of str and bytes (generated once and pasted, as UTF-8 bytes): the
// choice of quotes (double quotes when the text holds ' and no "), and the escapes of
// non-printable code points by str.isprintable (C1 controls, no-break space, soft hyphen,
// line separator, private use, unassigned, noncharacters, format characters) as \xNN,
// \uNNNN or \UNNNNNNNN, while printable ones (é, an emoji) are kept.
BOOST_AUTO_TEST_CASE(quotes_and_escapes_match_cpython) {
  using namespace std::string_literals;
  const std::pair<std::string, std::string> texts[] = {
      {"\x69\x74\x27\x73"s, "\x22\x69\x74\x27\x73\x22"s},
      {"\x73\x61\x79\x20\x22\x68\x69\x22"s, "\x27\x73\x61\x79\x20\x22\x68\x69\x22\x27"s},
      {"\x62\x6f\x74\x68\x20\x27\x20\x61\x6e\x64\x20\x22"s,
       "\x27\x62\x6f\x74\x68\x20\x5c\x27\x20\x61\x6e\x64\x20\x22\x27"s},
      {"\xc2\x85"s, "\x27\x5c\x78\x38\x35\x27"s},
      {"\xc2\xa0"s, "\x27\x5c\x78\x61\x30\x27"s},
      {"\xe2\x80\xa8"s, "\x27\x5c\x75\x32\x30\x32\x38\x27"s},
      {"\xf0\x9f\x98\x80"s, "\x27\xf0\x9f\x98\x80\x27"s},
      {"\xee\x80\x80"s, "\x27\x5c\x75\x65\x30\x30\x30\x27"s},
      {"\xf4\x8f\xbf\xbf"s, "\x27\x5c\x55\x30\x30\x31\x30\x66\x66\x66\x66\x27"s},
      {"\xcd\xb8"s, "\x27\x5c\x75\x30\x33\x37\x38\x27"s},
      {"\xc2\xad"s, "\x27\x5c\x78\x61\x64\x27"s},
      {"\xef\xbb\xbf"s, "\x27\x5c\x75\x66\x65\x66\x66\x27"s},
      {"\x63\x61\x66\xc3\xa9"s, "\x27\x63\x61\x66\xc3\xa9\x27"s},
      {"\x7f"s, "\x27\x5c\x78\x37\x66\x27"s},
      {"\x00"s, "\x27\x5c\x78\x30\x30\x27"s},
      {"\x62\x61\x63\x6b\x5c\x73\x6c\x61\x73\x68"s,
       "\x27\x62\x61\x63\x6b\x5c\x5c\x73\x6c\x61\x73\x68\x27"s},
      {"\x74\x61\x62\x09\x68\x65\x72\x65"s, "\x27\x74\x61\x62\x5c\x74\x68\x65\x72\x65\x27"s},
      {"\xf3\xa0\x80\x81"s, "\x27\x5c\x55\x30\x30\x30\x65\x30\x30\x30\x31\x27"s},
      {"\xe2\x80\x8b"s, "\x27\x5c\x75\x32\x30\x30\x62\x27"s},
  };
  for (const auto& [text, want] : texts) BOOST_TEST(quote_text(text) == want);
  const std::pair<std::string, std::string> bytes[] = {
      {"\x69\x74\x27\x73"s, "\x62\x22\x69\x74\x27\x73\x22"s},
      {"\x22\x27"s, "\x62\x27\x22\x5c\x27\x27"s},
      {"\x80"s, "\x62\x27\x5c\x78\x38\x30\x27"s},
      {"\x61\x22\x62"s, "\x62\x27\x61\x22\x62\x27"s},
      {"\x5c"s, "\x62\x27\x5c\x5c\x27"s},
  };
  for (const auto& [b, want] : bytes) BOOST_TEST(quote_bytes(b) == want);
}

BOOST_AUTO_TEST_CASE(containers_print_like_python) {
  auto i = [](std::int64_t n) { return Value::integer(n); };
  BOOST_TEST(repr(Value::tuple({})) == "()");
  BOOST_TEST(repr(Value::tuple({i(1)})) == "(1,)");
  BOOST_TEST(repr(Value::tuple({Value::tuple({i(1)})})) == "((1,),)");
  BOOST_TEST(repr(Value::tuple({i(1), Value::tuple({i(2), Value::tuple({i(3)})})})) ==
             "(1, (2, (3,)))");
  BOOST_TEST(repr(Value::list({})) == "[]");
  BOOST_TEST(repr(Value::list({i(1), Value::string("a"), Value::none(), Value::boolean(true),
                               Value::boolean(false), i(-5), Value::bytes("x")})) ==
             "[1, 'a', None, True, False, -5, b'x']");
  BOOST_TEST(repr(Value::mapping({})) == "{}");
  BOOST_TEST(repr(Value::mapping({{Value::string("a"), i(1)},
                                  {i(2), Value::none()},
                                  {Value::tuple({i(1), Value::string("b")}),
                                   Value::list({Value::floating(2.5), Value::floating(-0.0)})}})) ==
             "{'a': 1, 2: None, (1, 'b'): [2.5, -0.0]}");
  // Mappings inside other containers.
  Value inner = Value::mapping({{Value::string("k"), i(1)}});
  BOOST_TEST(repr(Value::list({i(0), inner})) == "[0, {'k': 1}]");
  BOOST_TEST(repr(Value::tuple({inner})) == "({'k': 1},)");
  BOOST_TEST(repr(Value::mapping({{i(5), inner}, {i(6), Value::mapping({})}})) ==
             "{5: {'k': 1}, 6: {}}");
}

// Tensors (ours): dtype and shape, never the elements.
BOOST_AUTO_TEST_CASE(tensors_print_dtype_and_shape) {
  Tensor t23(DType::float32, Shape{2, 3}, SharedBytes::adopt(std::vector<std::uint8_t>(24)));
  BOOST_TEST(repr(Value::tensor(t23)) == "tensor(dtype=torch.float32, shape=(2, 3))");
  BOOST_TEST(repr(Value::tensor(Tensor())) == "tensor(dtype=torch.float32, shape=(0,))");
  BOOST_TEST(repr(Value::tensor(tensor_of<std::uint8_t>(DType::boolean, {}, {1}))) ==
             "tensor(dtype=torch.bool, shape=())");
  Tensor empty(DType::bfloat16, Shape{0, 4, 1}, SharedBytes());
  BOOST_TEST(repr(Value::list({Value::tensor(empty)})) ==
             "[tensor(dtype=torch.bfloat16, shape=(0, 4, 1))]");
}

// Past max_chars: the first max_chars characters of Python's repr, then "...".
BOOST_AUTO_TEST_CASE(long_values_shortened) {
  std::vector<Value> many;
  for (int k = 0; k < 1000; ++k) many.push_back(Value::integer(k));
  Value list = Value::list(many);
  BOOST_TEST(repr(list, 10) == "[0, 1, 2, ...");
  BOOST_TEST(repr(Value::tuple(many), 12) == "(0, 1, 2, 3,...");
  std::vector<Value::Entry> entries;
  for (int k = 0; k < 100; ++k) entries.emplace_back(Value::integer(k), Value::string("v"));
  BOOST_TEST(repr(Value::mapping(entries), 16) == "{0: 'v', 1: 'v',...");
  std::vector<std::int64_t> shape(50, 1);
  Tensor t(DType::int8, shape, SharedBytes::adopt({7}));
  BOOST_TEST(repr(Value::tensor(t), 30) == "tensor(dtype=torch.int8, shape...");
  BOOST_TEST(repr(Value::tensor(t), 40) == "tensor(dtype=torch.int8, shape=(1, 1, 1,...");
  // Exactly at the budget: nothing cut.
  BOOST_TEST(repr(Value::list({Value::integer(1), Value::integer(2)}), 6) == "[1, 2]");
  BOOST_TEST(repr(Value::list({Value::integer(1), Value::integer(2)}), 5) == "[1, 2...");
  // The default budget is 120 characters; << prints up to 400.
  BOOST_TEST(repr(list).size() == 123u);
  std::ostringstream os;
  os << list;
  BOOST_TEST(os.str().size() == 403u);
  BOOST_TEST(os.str().substr(0, 20) == "[0, 1, 2, 3, 4, 5, 6");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sample_key_forms)

// SPEC 1.4: the position must be non-negative for string ids too; the id must be UTF-8.
BOOST_AUTO_TEST_CASE(string_ids_checked) {
  HPREF_CHECK_ERROR(SampleKey::make(std::string("doc"), -3), Errc::invalid_sample_key,
                    "position -3 is negative");
  HPREF_CHECK_ERROR(SampleKey::make(std::string("\xff"), 0), Errc::invalid_utf8,
                    R"(string b'\xff' is not valid UTF-8)");
  HPREF_CHECK_ERROR(SampleKey::make(std::string(), 0), Errc::invalid_sample_key,
                    "sample_id '' is empty");
  HPREF_CHECK_ERROR(SampleKey::make(-7, 0), Errc::invalid_sample_key, "sample_id -7 is negative");
  HPREF_CHECK_ERROR(SampleKey::make(-1, 5), Errc::invalid_sample_key, "sample_id -1 is negative");
  HPREF_CHECK_ERROR(SampleKey::make(std::string("d"), -1), Errc::invalid_sample_key,
                    "position -1 is negative");
  HPREF_CHECK_ERROR(SampleKey::make(0, -1), Errc::invalid_sample_key, "position -1 is negative");
  SampleKey k = SampleKey::make(std::string("doc"), 0);
  BOOST_TEST(std::get<std::string>(k.sample_id) == "doc");
  BOOST_TEST(k.position == 0);
  SampleKey z = SampleKey::make(0, 0);
  BOOST_TEST(std::get<std::int64_t>(z.sample_id) == 0);
}

// The 2-tuple form (ours) and its Python text: (sample_id, position).
BOOST_AUTO_TEST_CASE(tuple_form_and_text) {
  SampleKey s = SampleKey::make(std::string("doc-9"), 4);
  Value v = s.to_value();
  BOOST_REQUIRE(v.is(ValueKind::tuple));
  BOOST_TEST(v.items()[0].is(ValueKind::string));
  BOOST_TEST(v.items()[0].as_str() == "doc-9");
  BOOST_TEST(v.items()[1].as_int() == 4);
  std::ostringstream a, b;
  a << s;
  b << SampleKey::make(7, 2);
  BOOST_TEST(a.str() == "('doc-9', 4)");
  BOOST_TEST(b.str() == "(7, 2)");
}

BOOST_AUTO_TEST_CASE(from_value_accepts_only_valid_keys_spec_1_4) {
  auto t = [](Value a, Value b) { return Value::tuple({std::move(a), std::move(b)}); };
  auto i = [](std::int64_t n) { return Value::integer(n); };
  BOOST_TEST((*SampleKey::from_value(t(i(0), i(0))) == SampleKey::make(0, 0)));
  BOOST_TEST((*SampleKey::from_value(t(Value::string("x"), i(3))) ==
              SampleKey::make(std::string("x"), 3)));
  BOOST_TEST(!SampleKey::from_value(t(i(1), i(-1))));                  // negative position
  BOOST_TEST(!SampleKey::from_value(t(i(1), Value::floating(1.0))));   // position not int
  BOOST_TEST(!SampleKey::from_value(t(i(1), Value::boolean(false))));  // bool is not an int
  BOOST_TEST(!SampleKey::from_value(t(i(-1), i(0))));                  // negative id
  BOOST_TEST(!SampleKey::from_value(t(Value::string(""), i(0))));      // empty id
  BOOST_TEST(!SampleKey::from_value(t(Value::bytes("x"), i(0))));      // bytes id
  BOOST_TEST(!SampleKey::from_value(t(Value::none(), i(0))));
  BOOST_TEST(!SampleKey::from_value(Value::tuple({i(1), i(0), i(0)})));  // three items
  BOOST_TEST(!SampleKey::from_value(i(1)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dtype_tensor_device)

// SPEC 1.3's table, name: element bytes, in the table's order (dtype_at follows it).
BOOST_AUTO_TEST_CASE(whole_table_spec_1_3) {
  const std::pair<const char*, std::size_t> table[] = {
      {"float64", 8},
      {"float32", 4},
      {"float16", 2},
      {"bfloat16", 2},
      {"complex32", 4},
      {"complex64", 8},
      {"complex128", 16},
      {"int64", 8},
      {"int32", 4},
      {"int16", 2},
      {"int8", 1},
      {"uint8", 1},
      {"uint16", 2},
      {"uint32", 4},
      {"uint64", 8},
      {"bool", 1},
      {"qint8", 1},
      {"quint8", 1},
      {"qint32", 4},
      {"quint4x2", 1},
      {"quint2x4", 1},
      {"float8_e4m3fn", 1},
      {"float8_e4m3fnuz", 1},
      {"float8_e5m2", 1},
      {"float8_e5m2fnuz", 1},
      {"float8_e8m0fnu", 1},
      {"bits8", 1},
      {"bits16", 2},
  };
  BOOST_REQUIRE(std::size(table) == static_cast<std::size_t>(kDTypeCount));
  for (int k = 0; k < kDTypeCount; ++k) {
    auto [name, size] = table[k];
    BOOST_TEST_CONTEXT(name) {
      DType d = dtype_at(k);
      BOOST_TEST(dtype_name(d) == name);
      BOOST_TEST(element_size(d) == size);
      BOOST_TEST(std::string(dtype_wire_name(d)) == std::string("torch.") + name);
      BOOST_TEST((parse_dtype(std::string("torch.") + name) == d));
      BOOST_TEST((*dtype_from_bare_name(name) == d));
    }
  }
}

// SPEC 1.3's two refusals, each naming the text as Python's repr would.
BOOST_AUTO_TEST_CASE(dtype_refusals_spec_1_3) {
  for (const char* bad : {"float32", "", "torch", "torch:float32", "TORCH.float32"}) {
    HPREF_CHECK_ERROR(
        parse_dtype(bad), Errc::invalid_dtype,
        "tensor dtype " + quote_text(bad) + " is invalid: a dtype is written 'torch.<name>'");
  }
  HPREF_CHECK_ERROR(parse_dtype("float32"), Errc::invalid_dtype, "tensor dtype 'float32' is");
  for (const char* bad :
       {"torch.", "torch.Float32", "torch.uint1", "torch.torch.float32", "torch.float32 "}) {
    HPREF_CHECK_ERROR(
        parse_dtype(bad), Errc::unsupported_dtype,
        "tensor dtype " + quote_text(bad) + " is not supported (SPEC 1.3 lists the dtypes)");
  }
  HPREF_CHECK_ERROR(parse_dtype("torch.uint1"), Errc::unsupported_dtype,
                    "tensor dtype 'torch.uint1' is not supported");
}

BOOST_AUTO_TEST_CASE(dtype_prints_canonical_name_spec_1_3) {
  std::ostringstream os;
  os << DType::bfloat16 << ' ' << DType::boolean << ' ' << parse_dtype("torch.cdouble");
  BOOST_TEST(os.str() == "bfloat16 bool complex128");
  BOOST_TEST(!dtype_from_bare_name("torch.float32"));
  BOOST_TEST(!dtype_from_bare_name(""));
  BOOST_TEST((*dtype_from_bare_name("short") == DType::int16));
  BOOST_TEST((*dtype_from_bare_name("bits16") == DType::bits16));
}

BOOST_AUTO_TEST_CASE(devices_spec_1_2) {
  BOOST_TEST(Device{}.str() == "cpu");
  BOOST_TEST((Device{DeviceType::cuda, 12}.str() == "cuda:12"));
  BOOST_TEST((Device::parse("cpu") == Device{}));
  BOOST_TEST((Device::parse("cuda:0") == Device{DeviceType::cuda, 0}));
  BOOST_TEST((Device::parse("cuda:12") == Device{DeviceType::cuda, 12}));
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:-1", "cuda:1x", "cuda: 1",
                          "cuda:99999999999", "CPU", "cpu:0", ""}) {
    HPREF_CHECK_ERROR(Device::parse(bad), Errc::invalid_argument,
                      "device '" + std::string(bad) + "' is not 'cpu' or 'cuda:<index>'");
  }
}

BOOST_AUTO_TEST_CASE(on_relabels_the_same_bytes) {
  Tensor t = tensor_of<std::int32_t>(DType::int32, {2}, {5, 6});
  Tensor c = t.on({DeviceType::cuda, 2});
  BOOST_TEST(c.device().str() == "cuda:2");
  BOOST_TEST(t.device().str() == "cpu");
  BOOST_TEST(c.bytes().data() == t.bytes().data());  // no copy
  BOOST_TEST((c == t));                              // device not compared
}

// Negative dims: no element count (SPEC 1.2: dims are non-negative).
BOOST_AUTO_TEST_CASE(negative_dims_refused_spec_1_2) {
  BOOST_TEST(!checked_numel(Shape{-1}).has_value());
  BOOST_TEST(!checked_numel(Shape{3, -2}).has_value());
  BOOST_TEST(!checked_numel(Shape{std::numeric_limits<std::int64_t>::min()}).has_value());
  BOOST_TEST(*checked_numel(Shape{3, 2}) == 6);
  // The message names the shape as Python writes it and the negative dim.
  HPREF_CHECK_ERROR(Tensor(DType::int8, Shape{-1}, SharedBytes()), Errc::invalid_tensor,
                    "tensor shape (-1,) has a negative dim (-1)");
  HPREF_CHECK_ERROR(Tensor(DType::int8, Shape{2, -3, -4}, SharedBytes()), Errc::invalid_tensor,
                    "tensor shape (2, -3, -4) has a negative dim (-3)");
  HPREF_CHECK_ERROR(Tensor(DType::int8, Shape{1, 2, 3, 4, 5, 6, 7, 8, -9}, SharedBytes()),
                    Errc::invalid_tensor,
                    "tensor shape (1, 2, 3, 4, 5, 6, 7, 8, ... 9 dims) has a negative dim (-9)");
}

BOOST_AUTO_TEST_CASE(byte_count_overflow_refused_spec_2_4) {
  // numel fits int64 but numel * 16 bytes does not.
  HPREF_CHECK_ERROR(Tensor(DType::complex128, Shape{std::int64_t{1} << 60}, SharedBytes()),
                    Errc::invalid_tensor,
                    "tensor shape (1152921504606846976,) of dtype complex128 has more bytes "
                    "than int64 can count");
  HPREF_CHECK_ERROR(
      Tensor(DType::int8, Shape{std::numeric_limits<std::int64_t>::max(), 2}, SharedBytes()),
      Errc::invalid_tensor,
      "tensor shape (9223372036854775807, 2) has more elements than int64 can count");
  // (1 << 59) * 16 = 2^63 also overflows; (1 << 58) * 16 fits and asks for its bytes.
  HPREF_CHECK_ERROR(Tensor(DType::complex128, Shape{std::int64_t{1} << 59}, SharedBytes()),
                    Errc::invalid_tensor, "has more bytes than int64 can count");
  HPREF_CHECK_ERROR(Tensor(DType::complex128, Shape{std::int64_t{1} << 58}, SharedBytes()),
                    Errc::invalid_tensor,
                    "tensor of dtype complex128 needs 4611686018427387904 bytes, got 0");
}

// A shared shape must be given: a null one is the caller's bug, refused by an internal check.
BOOST_AUTO_TEST_CASE(null_shared_shape_refused) {
  HPREF_CHECK_ERROR(
      Tensor(DType::int8, std::shared_ptr<const std::vector<std::int64_t>>(), SharedBytes()),
      Errc::internal, "CHECK(shape_ != nullptr)");
  auto shape = std::make_shared<const std::vector<std::int64_t>>(Shape{2});
  Tensor a(DType::int8, shape, SharedBytes::adopt({1, 2}));
  Tensor b(DType::int8, shape, SharedBytes::adopt({3, 4}));
  BOOST_TEST(a.shared_shape() == b.shared_shape());  // one shape shared by both
  BOOST_TEST(a.numel() == 2);
}

BOOST_AUTO_TEST_CASE(structural_equality_spec_1_1) {
  Tensor a = tensor_of<std::int16_t>(DType::int16, {2}, {1, 2});
  BOOST_TEST((a == tensor_of<std::int16_t>(DType::int16, {2}, {1, 2})));
  BOOST_TEST(!(a == tensor_of<std::int16_t>(DType::int16, {2}, {1, 3})));     // bytes
  BOOST_TEST(!(a == tensor_of<std::int16_t>(DType::int16, {1, 2}, {1, 2})));  // shape
  BOOST_TEST(!(a == tensor_of<std::int16_t>(DType::int16, {2, 1}, {1, 2})));  // shape
  BOOST_TEST(!(a == tensor_of<std::int16_t>(DType::uint16, {2}, {1, 2})));    // dtype
  BOOST_TEST(!(a == tensor_of<std::uint8_t>(DType::uint8, {4}, {1, 0, 2, 0})));
  BOOST_TEST((Tensor() == Tensor(DType::float32, Shape{0}, SharedBytes())));
  BOOST_TEST(!(Tensor() == Tensor(DType::float32, Shape{0, 1}, SharedBytes())));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shared_bytes_views)

BOOST_AUTO_TEST_CASE(copies_adopts_and_slices) {
  SharedBytes c = SharedBytes::copy_of(std::string_view("hello"));
  BOOST_TEST(c.view() == "hello");
  BOOST_TEST(c.owner() != nullptr);
  BOOST_TEST(SharedBytes::copy_of(std::string_view()).empty());
  BOOST_TEST(SharedBytes::copy_of(std::string_view()).owner() == nullptr);
  std::vector<std::uint8_t> v = {1, 2, 3, 4, 5};
  const std::uint8_t* p = v.data();
  SharedBytes a = SharedBytes::adopt(std::move(v));
  BOOST_TEST(a.data() == p);  // adopted, not copied
  SharedBytes s = a.slice(1, 3);
  BOOST_TEST(test::hex(s.span()) == "020304");
  BOOST_TEST(s.owner() == a.owner());
  BOOST_TEST(a.slice(5, 0).empty());
  BOOST_TEST(a.slice(0, 5).data() == p);
  // Out of range: an internal check (the caller's bug), never a view past the end.
  HPREF_CHECK_ERROR(a.slice(6, 0), Errc::internal, "CHECK(offset <= bytes_.size()");
  HPREF_CHECK_ERROR(a.slice(4, 2), Errc::internal, "CHECK(offset <= bytes_.size()");
  HPREF_CHECK_ERROR(a.slice(1, std::numeric_limits<std::size_t>::max()), Errc::internal,
                    "length <= bytes_.size() - offset");
}

BOOST_AUTO_TEST_CASE(equality_is_bytewise) {
  SharedBytes a = SharedBytes::copy_of(std::string_view("abcabc"));
  BOOST_TEST((a.slice(0, 3) == a.slice(3, 3)));   // same bytes, other place
  BOOST_TEST((a.slice(0, 3) == a.slice(0, 3)));   // same place
  BOOST_TEST(!(a.slice(0, 3) == a.slice(1, 3)));  // other bytes
  BOOST_TEST(!(a.slice(0, 3) == a.slice(0, 2)));  // other size
  BOOST_TEST((SharedBytes() == a.slice(2, 0)));   // both empty, different pointers
  BOOST_TEST((SharedBytes() == SharedBytes()));
  BOOST_TEST(!(SharedBytes() == a.slice(2, 1)));
}

BOOST_AUTO_TEST_SUITE_END()

// SPEC 2.3: strings are strict UTF-8 (RFC 3629), exactly what CPython's
// bytes.decode('utf-8') accepts (which also refuses lone surrogates).
BOOST_AUTO_TEST_SUITE(utf8_strict)

BOOST_AUTO_TEST_CASE(agrees_with_python_decode) {
  struct Case {
    const char* hex;
    bool valid;  // CPython: bytes.fromhex(hex).decode('utf-8') succeeds
  };
  const Case cases[] = {
      {"", true},
      {"41", true},
      {"7f", true},
      {"80", false},
      {"bf", false},
      {"c080", false},
      {"c1bf", false},
      {"c280", true},
      {"dfbf", true},
      {"c2", false},
      {"c241", false},
      {"c2c0", false},
      {"e08080", false},
      {"e09fbf", false},
      {"e0a080", true},
      {"ed9fbf", true},
      {"eda080", false},
      {"edbfbf", false},
      {"ee8080", true},
      {"efbfbf", true},
      {"e0a0", false},
      {"e0a041", false},
      {"f0808080", false},
      {"f08fbfbf", false},
      {"f0908080", true},
      {"f48fbfbf", true},
      {"f4908080", false},
      {"f5808080", false},
      {"f888808080", false},
      {"fe", false},
      {"ff", false},
      {"f09080", false},
      {"f09080c0", false},
      {"41e282ac42", true},
      {"e282aced", false},
      // Bytes that lead nothing, followed by three continuation bytes.
      {"81808080", false},
      {"84808080", false},
      {"c1808080", false},
      {"c0808080", false},
  };
  for (const Case& c : cases) {
    auto b = unhex(c.hex);
    std::string_view s(reinterpret_cast<const char*>(b.data()), b.size());
    BOOST_TEST(is_valid_utf8(s) == c.valid, c.hex);
    // The JSON writer keeps well-formed text byte for byte and replaces every byte of a
    // malformed sequence, so its output is valid UTF-8 either way.
    std::string json;
    append_json_string(json, s);
    BOOST_TEST(is_valid_utf8(json), c.hex);
    BOOST_TEST((json == "\"" + std::string(s) + "\"") == c.valid, c.hex << " -> " << json);
    BOOST_TEST((json.find("\\ufffd") != std::string::npos) == !c.valid, c.hex);
  }
}

BOOST_AUTO_TEST_CASE(json_strings_escape_quotes_backslashes_and_controls) {
  std::string out;
  append_json_string(out, std::string_view("q\"b\\n\n r\r t\t b\b f\f\x01\x1f\0\x7f", 22));
  BOOST_TEST(out == "\"q\\\"b\\\\n\\n r\\r t\\t b\\b f\\f\\u0001\\u001f\\u0000\x7f\"");
}

BOOST_AUTO_TEST_SUITE_END()
