// hpref._core: the C++ reference library in-process for Python (issue 11). Each area
// registers its functions (common.hpp); every hpref::Error crosses as the hpref.Error
// subclass of its kind, built by hpref.errors._from_core(kind, message).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "hpref/error.hpp"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "hpref's C++ reference library; use it through the hpref package.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const hpref::Error& e) {
      // The message as text whatever its bytes: one that quotes invalid UTF-8 gets \xNN
      // escapes (nb::str would fail, and a RuntimeError would stand in for the refusal).
      std::string_view what = e.what();
      nb::object message = nb::steal(PyUnicode_DecodeUTF8(
          what.data(), static_cast<Py_ssize_t>(what.size()), "backslashreplace"));
      if (!message.is_valid()) return;  // MemoryError is set
      nb::object exc = nb::module_::import_("hpref.errors")
                           .attr("_from_core")(nb::str(e.kind().data(), e.kind().size()), message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  m.def(
      "error_kinds",
      [] {
        std::vector<std::string> kinds;
#define HPREF_KIND_NAME(name) kinds.emplace_back(#name);
        HPREF_ERROR_KINDS(HPREF_KIND_NAME)
#undef HPREF_KIND_NAME
        return kinds;
      },
      "Every error kind hpref raises (hpref::Errc), in declaration order.");

  hpref::py::bind_codec(m);
  hpref::py::bind_routes(m);
  hpref::py::bind_oracle(m);
  hpref::py::bind_planning(m);
  hpref::py::bind_checked(m);
#if HPREF_PY_SIM
  hpref::py::bind_sim(m);
#endif
}
