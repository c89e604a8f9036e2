// hpref._core: the C++ reference library in-process for Python (issue 11, first slice).
// Values cross as Python objects the way the original's pickle.loads gives them; tensors
// cross as (dtype name, shape, bytes) where the bytes are a zero-copy 1-d uint8 array over
// the decoded segment (it keeps the segment alive); the Python layer makes torch or numpy
// tensors of them (python/hpref/codec.py).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hpref/codec.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"
#include "hpref/value.hpp"

namespace nb = nanobind;
using namespace hpref;

namespace {


// A zero-copy view of `bytes` whose capsule owns a copy of the SharedBytes handle.
nb::object byte_view(const SharedBytes& bytes) {
  auto* keep = new SharedBytes(bytes);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<SharedBytes*>(p); });
  std::size_t shape[1] = {bytes.size()};
  return nb::cast(nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<1>>(keep->data(), 1, shape, owner));
}

nb::object to_python(const Value& v, const nb::object& tensor_type) {
  switch (v.kind()) {
    case ValueKind::none: return nb::none();
    case ValueKind::boolean: return nb::bool_(v.as_bool());
    case ValueKind::integer: return nb::int_(v.as_int());
    case ValueKind::floating: return nb::float_(v.as_float());
    case ValueKind::string: return nb::str(v.as_str().data(), v.as_str().size());
    case ValueKind::bytes: return nb::bytes(v.as_bytes().data(), v.as_bytes().size());
    case ValueKind::bytearray: {
      nb::bytes b(v.as_bytes().data(), v.as_bytes().size());
      return nb::module_::import_("builtins").attr("bytearray")(b);
    }
    case ValueKind::tensor: {
      const Tensor& t = v.as_tensor();
      nb::list shape;
      for (std::int64_t d : t.shape()) shape.append(nb::int_(d));
      return tensor_type(nb::str(std::string(dtype_name(t.dtype())).c_str()), nb::tuple(shape),
                         byte_view(t.storage()));
    }
    case ValueKind::tuple:
    case ValueKind::list: {
      nb::list out;
      for (const Value& item : v.items()) out.append(to_python(item, tensor_type));
      if (v.is(ValueKind::list)) return out;
      return nb::tuple(out);
    }
    case ValueKind::mapping: {
      nb::dict out;
      for (const auto& [key, value] : v.entries()) out[to_python(key, tensor_type)] = to_python(value, tensor_type);
      return out;
    }
  }
  throw Error(Errc::internal, "unknown value kind");
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "hpref's C++ reference library (codec first; see the hpref package).";

  // hpref::Error -> hpref._core.Error(kind, message); the Python layer maps kinds to classes.
  static nb::object error_type = nb::steal(PyErr_NewException("hpref._core.Error", PyExc_Exception, nullptr));
  m.attr("Error") = error_type;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      nb::object exc = error_type(nb::str(e.kind().data(), e.kind().size()), nb::str(e.what()));
      PyErr_SetObject(error_type.ptr(), exc.ptr());
    }
  });

  m.def(
      "decode",
      [](nb::bytes buffer, bool strict, nb::object key_class, nb::object tensor_type) {
        DecodeOptions options;
        options.strict = strict;
        options.pickle.key_class = key_class.is_none() ? std::string(kDefaultKeyClass)
                                                       : nb::cast<std::string>(key_class);
        // One copy of the Python bytes into a buffer the result's tensors share.
        auto data = SharedBytes::copy_of(std::string_view(buffer.c_str(), buffer.size()));
        std::vector<Item> items;
        {
          nb::gil_scoped_release release;
          items = decode_segment(data, options);
        }
        nb::list out;
        for (const auto& [key, value] : items) {
          out.append(nb::make_tuple(to_python(key, tensor_type), to_python(value, tensor_type)));
        }
        return out;
      },
      nb::arg("buffer"), nb::arg("strict") = false, nb::arg("key_class") = nb::none(),
      nb::arg("tensor_type"),
      "Decodes one HPB1 payload segment (SPEC 2) into a list of (key, value) pairs.");

  m.def("dtype_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kDTypeCount; ++i) names.emplace_back(dtype_name(dtype_at(i)));
    return names;
  });
}
