// SPEC 1.3: the dtype table, its aliases and the two parse errors.
#include "hpref/dtype.hpp"

#include <array>
#include <ostream>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"

namespace hpref {
namespace {

struct DTypeInfo {
  std::string_view wire_name;  // "torch." and the name
  std::size_t size;
};

constexpr std::array<DTypeInfo, kDTypeCount> kTable{{
    {"torch.float64", 8},
    {"torch.float32", 4},
    {"torch.float16", 2},
    {"torch.bfloat16", 2},
    {"torch.complex32", 4},
    {"torch.complex64", 8},
    {"torch.complex128", 16},
    {"torch.int64", 8},
    {"torch.int32", 4},
    {"torch.int16", 2},
    {"torch.int8", 1},
    {"torch.uint8", 1},
    {"torch.uint16", 2},
    {"torch.uint32", 4},
    {"torch.uint64", 8},
    {"torch.bool", 1},
    {"torch.qint8", 1},
    {"torch.quint8", 1},
    {"torch.qint32", 4},
    {"torch.quint4x2", 1},
    {"torch.quint2x4", 1},
    {"torch.float8_e4m3fn", 1},
    {"torch.float8_e4m3fnuz", 1},
    {"torch.float8_e5m2", 1},
    {"torch.float8_e5m2fnuz", 1},
    {"torch.float8_e8m0fnu", 1},
    {"torch.bits8", 1},
    {"torch.bits16", 2},
}};

struct Alias {
  std::string_view alias;
  DType dtype;
};

constexpr std::array<Alias, 9> kAliases{{
    {"double", DType::float64},
    {"float", DType::float32},
    {"half", DType::float16},
    {"cdouble", DType::complex128},
    {"cfloat", DType::complex64},
    {"chalf", DType::complex32},
    {"long", DType::int64},
    {"int", DType::int32},
    {"short", DType::int16},
}};

constexpr std::string_view kPrefix = "torch.";

}  // namespace

std::size_t element_size(DType dtype) noexcept { return kTable[static_cast<int>(dtype)].size; }

bool is_quantized(DType dtype) noexcept {
  return dtype == DType::qint8 || dtype == DType::quint8 || dtype == DType::qint32 ||
         dtype == DType::quint4x2 || dtype == DType::quint2x4;
}

std::string_view dtype_name(DType dtype) noexcept {
  return dtype_wire_name(dtype).substr(kPrefix.size());
}

std::string_view dtype_wire_name(DType dtype) noexcept {
  return kTable[static_cast<int>(dtype)].wire_name;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

DType dtype_at(int index) noexcept { return static_cast<DType>(index); }

std::optional<DType> dtype_from_bare_name(std::string_view name) noexcept {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  }
  for (const Alias& a : kAliases) {
    if (a.alias == name) return a.dtype;
  }
  return std::nullopt;
}

DType parse_dtype(std::string_view wire_name) {
  if (wire_name.substr(0, kPrefix.size()) != kPrefix) {
    throw Error(Errc::invalid_dtype, "tensor dtype " + quote_text(wire_name) +
                                         " is invalid: a dtype is written 'torch.<name>'");
  }
  if (auto found = dtype_from_bare_name(wire_name.substr(kPrefix.size()))) return *found;
  throw Error(Errc::unsupported_dtype, "tensor dtype " + quote_text(wire_name) +
                                           " is not supported (SPEC 1.3 lists the dtypes)");
}

}  // namespace hpref
