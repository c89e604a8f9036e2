// Shared declarations of hpref._core's translation units: each area (codec, routes,
// oracle, planning) registers its functions on the module, and tensors cross the boundary
// in one form, a RawTensor (python/hpref/_tensors.py): (dtype name as in SPEC 1.3 without
// "torch.", shape tuple, 1-d C-contiguous uint8 buffer of the element bytes).
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"

namespace hpref::py {

namespace nb = nanobind;

void bind_codec(nb::module_& m);
void bind_routes(nb::module_& m);
void bind_oracle(nb::module_& m);
void bind_planning(nb::module_& m);
void bind_sim(nb::module_& m);      // when built with the simulator (HPREF_PY_SIM)
void bind_checked(nb::module_& m);  // SPEC 9.2 checked mode for Python communicators (issue 13)

// A tensor as `make(dtype_name, shape_tuple, data)` where data is a writable memoryview
// (format "B") of t's bytes, without a copy; it keeps t's storage alive.
nb::object tensor_to_python(const Tensor& t, nb::handle make);

// tensor_to_python for many tensors that view one buffer: slices one memoryview of it.
class TensorViews {
 public:
  TensorViews(nb::handle make, const SharedBytes* buffer);
  nb::object operator()(const Tensor& t);

 private:
  nb::handle make_;
  const void* owner_ = nullptr;
  const std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
  nb::object whole_;
  // Per dtype (table order): its name as a str, and, for the torch maker, its torch dtype.
  std::array<nb::object, kDTypeCount> name_of_{};
  std::array<nb::object, kDTypeCount> kinds_of_{};
  std::array<bool, kDTypeCount> kind_looked_{};
  bool torch_ = false;  // make_ is hpref._tensors' torch maker: call torch.frombuffer here
  nb::object frombuffer_, kinds_, dtype_kw_, reshape_name_;
};

// Text for error messages: a Python str as UTF-8, its lone surrogates written as \udXXX
// escapes (nb::cast<std::string> throws std::bad_cast on them); the repr and the str() of
// an object, and the qualified name of its type, the same way. repr/str may raise (a
// user's __repr__): nb::python_error.
std::string utf8_text(nb::handle str);
std::string repr_text(nb::handle o);
std::string str_text(nb::handle o);
std::string py_type_name(nb::handle o);

// The Errc named `kind` ("invalid_tensor"), if there is one.
std::optional<Errc> errc_named(std::string_view kind);
// An hpref.Error that Python code raised (its kind and message) as the C++ Error it stands
// for; nullopt for any other exception.
std::optional<Error> hpref_error_of(nb::python_error& e);

// A RawTensor-like object (attributes dtype, shape, data; data exposing a C-contiguous
// buffer) as a Tensor that views the buffer without a copy and holds it (released with the
// GIL held) for as long as any Tensor views it. Error unsupported_dtype / invalid_tensor
// naming the bad dtype or size.
Tensor tensor_from_python(nb::handle raw);

}  // namespace hpref::py
