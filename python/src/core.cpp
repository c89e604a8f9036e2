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

// A Python object as a Value (SPEC 1.1): None, bool, int (int64), float, str, bytes,
// bytearray, tuple, list, dict, and `tensor_type` instances (dtype name, shape, bytes).
Value from_python(nb::handle o, const nb::handle& tensor_type, int depth) {
  if (depth > 1000) throw Error(Errc::depth_limit, "value nests deeper than 1000 levels");
  if (o.is_none()) return Value::none();
  if (PyBool_Check(o.ptr())) return Value::boolean(o.ptr() == Py_True);
  if (PyLong_Check(o.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
    if (overflow) {
      throw Error(Errc::invalid_argument,
                  "int " + nb::cast<std::string>(nb::str(o)) + " does not fit in 64 bits (SPEC 1.1)");
    }
    return Value::integer(v);
  }
  if (PyFloat_Check(o.ptr())) return Value::floating(PyFloat_AsDouble(o.ptr()));
  if (PyUnicode_Check(o.ptr())) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(o.ptr(), &size);
    if (!utf8) throw nb::python_error();
    return Value::string(std::string_view(utf8, static_cast<std::size_t>(size)));
  }
  if (PyBytes_Check(o.ptr())) {
    return Value::bytes(std::string_view(PyBytes_AS_STRING(o.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(o.ptr()))));
  }
  if (PyByteArray_Check(o.ptr())) {
    auto* p = reinterpret_cast<const std::uint8_t*>(PyByteArray_AS_STRING(o.ptr()));
    return Value::bytearray(std::span<const std::uint8_t>(p, static_cast<std::size_t>(PyByteArray_GET_SIZE(o.ptr()))));
  }
  if (PyObject_IsInstance(o.ptr(), tensor_type.ptr()) == 1) {
    DType dtype = parse_dtype("torch." + nb::cast<std::string>(o.attr("dtype")));
    std::vector<std::int64_t> shape;
    for (nb::handle d : o.attr("shape")) shape.push_back(nb::cast<std::int64_t>(d));
    nb::bytes data(nb::module_::import_("builtins").attr("bytes")(o.attr("data")));
    auto bytes = SharedBytes::copy_of(std::string_view(data.c_str(), data.size()));
    return Value::tensor(Tensor(dtype, std::move(shape), std::move(bytes)));
  }
  if (PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) {
    std::vector<Value> items;
    for (nb::handle x : o) items.push_back(from_python(x, tensor_type, depth + 1));
    return PyTuple_Check(o.ptr()) ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (PyDict_Check(o.ptr())) {
    std::vector<Value::Entry> entries;
    for (auto [k, v] : nb::borrow<nb::dict>(o)) {
      entries.emplace_back(from_python(k, tensor_type, depth + 1), from_python(v, tensor_type, depth + 1));
    }
    return Value::mapping(std::move(entries));
  }
  throw Error(Errc::invalid_argument, "cannot encode a Python " +
                                          nb::cast<std::string>(nb::str(o.type().attr("__name__"))) +
                                          " (SPEC 1.1 values only)");
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

  m.def(
      "encode",
      [](nb::handle items, nb::object key_class, nb::handle tensor_type) {
        std::vector<Item> pairs;
        for (nb::handle pair : items) {
          if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2) {
            throw Error(Errc::invalid_argument, "items must be (key, value) pairs, got " +
                                                    nb::cast<std::string>(nb::repr(pair)));
          }
          pairs.emplace_back(from_python(nb::borrow<nb::tuple>(pair)[0], tensor_type, 0),
                             from_python(nb::borrow<nb::tuple>(pair)[1], tensor_type, 0));
        }
        EncodeOptions options;
        if (!key_class.is_none()) options.key_class = nb::cast<std::string>(key_class);
        std::vector<std::uint8_t> out;
        {
          nb::gil_scoped_release release;
          out = encode_segment(pairs, options);
        }
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("items"), nb::arg("key_class") = nb::none(), nb::arg("tensor_type"),
      "Encodes (key, value) pairs as one HPB1 payload segment (SPEC 2).");

  m.def("dtype_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kDTypeCount; ++i) names.emplace_back(dtype_name(dtype_at(i)));
    return names;
  });
}
