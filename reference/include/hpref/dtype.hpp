// The tensor element types of SPEC 1.3, named as PyTorch's str(dtype) names them.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace hpref {

enum class DType : unsigned char {
  float64,
  float32,
  float16,
  bfloat16,
  complex32,
  complex64,
  complex128,
  int64,
  int32,
  int16,
  int8,
  uint8,
  uint16,
  uint32,
  uint64,
  boolean,
  qint8,
  quint8,
  qint32,
  quint4x2,
  quint2x4,
  float8_e4m3fn,
  float8_e4m3fnuz,
  float8_e5m2,
  float8_e5m2fnuz,
  float8_e8m0fnu,
  bits8,
  bits16,
};

inline constexpr int kDTypeCount = 28;

// Bytes per element (SPEC 1.3 table).
std::size_t element_size(DType dtype) noexcept;

// qint8, quint8, qint32, quint4x2, quint2x4: PyTorch's quantized dtypes, whose tensors carry
// a scale and zero point that the wire format (SPEC 1.2) does not.
bool is_quantized(DType dtype) noexcept;

// Canonical name without the prefix ("float32", "bool").
std::string_view dtype_name(DType dtype) noexcept;

// "torch.float32": the form written on the wire.
std::string_view dtype_wire_name(DType dtype) noexcept;

// Looks up a bare name or alias ("float32", "float", "long"); nullopt if unknown.
std::optional<DType> dtype_from_bare_name(std::string_view name) noexcept;

// Parses the wire form "torch.<name>" (aliases accepted). Throws Error
// invalid_dtype when there is no "torch." prefix and unsupported_dtype when the
// name after it is not in the table.
DType parse_dtype(std::string_view wire_name);

// Prints the canonical name.
std::ostream& operator<<(std::ostream& os, DType dtype);

// All dtypes, in table order (for generators and tests).
DType dtype_at(int index) noexcept;

}  // namespace hpref
