// The global oracle (SPEC 8): what every rank must end with, computed from a global view
// rather than by communication. Forward: each rank's output is rows [global_start,
// global_end) of the global bank. Backward: each owner's gradient is its own block of its
// output gradient, then, for each peer in ascending rank, the rows that peer received from
// it added at their send offset, the fixed order that makes floating-point sums bitwise
// reproducible. Banks are tensors whose axis 0 is the sequence (rows of any width, any
// dtype for forward).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hpref/routes.hpp"
#include "hpref/tensor.hpp"

namespace hpref {

// SPEC 8.1: rank r's output = global rows [routes[r].global_start, routes[r].global_end).
// Error oracle_mismatch if an interval lies outside the bank.
std::vector<Tensor> oracle_forward(const Tensor& global_bank, std::span<const Route> routes);

// SPEC 8.2: every owner's input gradient from every rank's output gradient. Each
// output_grads[r] must have routes[r].global_end - global_start rows of one common row
// shape and dtype (Error oracle_mismatch otherwise). Summation needs arithmetic on the
// dtype: ints wrap, floats follow IEEE (float16/bfloat16 rounded after each add, as
// PyTorch does on CPU; a NaN stays a NaN, but its sign and payload need not be the ones
// torch writes, which vary with its version), complex adds componentwise, bool is logical or
// (Error unsupported_arithmetic for quantized, float8 and bits dtypes).
std::vector<Tensor> oracle_backward(std::span<const Tensor> output_grads,
                                    std::span<const Route> routes);

// Bytes of one row (one index of axis 0) of a tensor with at least one axis, also when it
// has no rows.
std::size_t row_bytes(const Tensor& t);

// A tensor like `like` (dtype, row shape, device) with `rows` rows taken from `bytes`.
Tensor rows_like(const Tensor& like, std::int64_t rows, std::vector<std::uint8_t> bytes);

// dst[i] += src[i] for `count` elements of `dtype` (unaligned bytes).
void add_elements(DType dtype, std::uint8_t* dst, const std::uint8_t* src, std::size_t count);
// dst[i] = a[i] + b[i], the same sums (dst may be a): what dispatch's backward writes in one
// pass. Error unsupported_arithmetic for dtypes without a sum.
void add_elements(DType dtype, std::uint8_t* dst, const std::uint8_t* a, const std::uint8_t* b,
                  std::size_t count);

// The owner offsets the routes imply: owners[r] = global_start + local_output_start.
std::vector<std::int64_t> route_owner_offsets(std::span<const Route> routes);

}  // namespace hpref
