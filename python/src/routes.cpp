// hpref._core: sequence dispatch routes (SPEC 7) for Python. A route crosses as a Route
// object (C++ class `PyRoute`) that holds the C++ route and makes its per-peer tables
// Python tuples on first access only, so planning all ranks at P = 1024 does not build
// 3 P^2 Python ints nobody reads. Arguments are read with PyNumber_Index (ints, bools,
// numpy ints; TypeError otherwise); a value beyond int64 is Error route_overflow, the
// SPEC 7 divergence from Python's unbounded ints.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/error.hpp"
#include "hpref/routes.hpp"

namespace hpref::py {
namespace {

constexpr std::array<const char*, 8> kFields = {
    "local_length", "global_start", "global_end",    "local_output_start",
    "send_offsets", "input_splits", "output_splits", "needs_exchange"};

struct PyRoute {
  Route route;
  // send_offsets, input_splits, output_splits as tuples, made on first access.
  std::array<nb::object, 3> tables;
};

std::string type_of(PyObject* o) { return Py_TYPE(o)->tp_name; }

// `what` names the argument, `index` its item (-1: none) in the messages.
std::int64_t to_i64(PyObject* o, const char* what, Py_ssize_t index = -1) {
  auto name = [&] {
    return index < 0 ? std::string(what) : std::string(what) + "[" + std::to_string(index) + "]";
  };
  int overflow = 0;
  long long v;
  if (PyLong_Check(o)) {
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
  } else {
    PyObject* i = PyNumber_Index(o);
    if (i == nullptr) {
      PyErr_Clear();
      throw nb::type_error((name() + " must be an int, got a " + type_of(o)).c_str());
    }
    v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
  }
  if (overflow != 0) {
    throw Error(Errc::route_overflow, name() + " = " + repr_text(o) + " is beyond int64");
  }
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

// Any iterable as a borrowed array of items (PySequence_Fast keeps lists and tuples as is).
struct FastSequence {
  nb::object seq;
  FastSequence(nb::handle o, const char* what) {
    std::string message = std::string(what) + " must be a sequence";
    seq = nb::steal(PySequence_Fast(o.ptr(), message.c_str()));
    if (!seq.is_valid()) throw nb::python_error();
  }
  Py_ssize_t size() const { return PySequence_Fast_GET_SIZE(seq.ptr()); }
  PyObject* operator[](Py_ssize_t i) const { return PySequence_Fast_GET_ITEM(seq.ptr(), i); }
};

// A 1-d C-contiguous buffer of native int64 (a numpy int64 array), copied at once; nullopt
// for anything else, which is read item by item.
std::optional<std::vector<std::int64_t>> int64_buffer(nb::handle o) {
  if (!PyObject_CheckBuffer(o.ptr())) return std::nullopt;
  Py_buffer view;
  if (PyObject_GetBuffer(o.ptr(), &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::string_view format = view.format != nullptr ? view.format : "B";
  if (!format.empty() && (format[0] == '<' || format[0] == '=' || format[0] == '@'))
    format.remove_prefix(1);
  std::optional<std::vector<std::int64_t>> out;
  if (view.ndim == 1 && view.itemsize == 8 && (format == "q" || format == "l")) {
    out.emplace(static_cast<std::size_t>(view.len / 8));
    std::memcpy(out->data(), view.buf, static_cast<std::size_t>(view.len));
  }
  PyBuffer_Release(&view);
  return out;
}

std::vector<std::int64_t> to_i64s(nb::handle o, const char* what) {
  if (auto direct = int64_buffer(o)) return std::move(*direct);
  FastSequence seq(o, what);
  std::vector<std::int64_t> out(static_cast<std::size_t>(seq.size()));
  for (Py_ssize_t i = 0; i < seq.size(); ++i)
    out[static_cast<std::size_t>(i)] = to_i64(seq[i], what, i);
  return out;
}

std::vector<Interval> to_intervals(nb::handle o) {
  FastSequence seq(o, "intervals");
  std::vector<Interval> out(static_cast<std::size_t>(seq.size()));
  for (Py_ssize_t i = 0; i < seq.size(); ++i) {
    FastSequence pair(seq[i], "each interval");
    if (pair.size() != 2) {
      throw nb::value_error(("intervals[" + std::to_string(i) +
                             "] must be a (start, end) pair, got " + std::to_string(pair.size()) +
                             " items")
                                .c_str());
    }
    out[static_cast<std::size_t>(i)] = {to_i64(pair[0], "interval start", i),
                                        to_i64(pair[1], "interval end", i)};
  }
  return out;
}

std::optional<std::vector<std::int64_t>> to_owners(nb::handle o) {
  if (o.is_none()) return std::nullopt;
  return to_i64s(o, "owner_offsets");
}

nb::object int_tuple(const std::vector<std::int64_t>& values) {
  nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(values.size())));
  if (!t.is_valid()) throw nb::python_error();
  for (std::size_t i = 0; i < values.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (v == nullptr) throw nb::python_error();
    PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), v);
  }
  return t;
}

const std::vector<std::int64_t>& table(const Route& r, std::size_t which) {
  return which == 0 ? r.send_offsets : which == 1 ? r.input_splits : r.output_splits;
}

nb::object cached_table(PyRoute& r, std::size_t which) {
  if (!r.tables[which].is_valid()) r.tables[which] = int_tuple(table(r.route, which));
  return r.tables[which];
}

// Field i of a route object as Python sees it.
nb::object field(PyRoute& r, std::size_t i) {
  switch (i) {
    case 0:
      return nb::int_(r.route.local_length);
    case 1:
      return nb::int_(r.route.global_start);
    case 2:
      return nb::int_(r.route.global_end);
    case 3:
      return nb::int_(r.route.local_output_start);
    case 4:
    case 5:
    case 6:
      return cached_table(r, i - 4);
    default:
      return nb::bool_(r.route.needs_exchange);
  }
}

nb::object wrap(Route route) {
  return nb::cast(PyRoute{std::move(route), {}}, nb::rv_policy::move);
}

nb::object wrap_all(std::vector<Route> routes) {
  nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(routes.size())));
  if (!t.is_valid()) throw nb::python_error();
  for (std::size_t i = 0; i < routes.size(); ++i) {
    PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i),
                     wrap(std::move(routes[i])).release().ptr());
  }
  return t;
}

Route route_from_fields(nb::handle local_length, nb::handle global_start, nb::handle global_end,
                        nb::handle local_output_start, nb::handle send_offsets,
                        nb::handle input_splits, nb::handle output_splits,
                        nb::handle needs_exchange) {
  Route r;
  r.local_length = to_i64(local_length.ptr(), "local_length");
  r.global_start = to_i64(global_start.ptr(), "global_start");
  r.global_end = to_i64(global_end.ptr(), "global_end");
  r.local_output_start = to_i64(local_output_start.ptr(), "local_output_start");
  r.send_offsets = to_i64s(send_offsets, "send_offsets");
  r.input_splits = to_i64s(input_splits, "input_splits");
  r.output_splits = to_i64s(output_splits, "output_splits");
  int truth = PyObject_IsTrue(needs_exchange.ptr());
  if (truth < 0) throw nb::python_error();
  r.needs_exchange = truth == 1;
  return r;
}

nb::str route_repr(PyRoute& r) {
  std::string out = "Route(";
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::string(kFields[i]) + "=" + repr_text(field(r, i));
  }
  return nb::str((out + ")").c_str());
}

// By fields, against a Route or any object with the 8 attributes (the original's
// SequenceDispatchRoute); NotImplemented for anything else.
nb::object route_eq(PyRoute& self, nb::handle other) {
  if (nb::isinstance<PyRoute>(other)) {
    return nb::bool_(self.route == nb::inst_ptr<PyRoute>(other)->route);
  }
  std::array<nb::object, kFields.size()> theirs;
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    if (!nb::hasattr(other, kFields[i])) return nb::borrow(Py_NotImplemented);
    theirs[i] = other.attr(kFields[i]);
  }
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    int same = PyObject_RichCompareBool(field(self, i).ptr(), theirs[i].ptr(), Py_EQ);
    if (same < 0) throw nb::python_error();
    if (same == 0) return nb::bool_(false);
  }
  return nb::bool_(true);
}

void bind_route_class(nb::module_& m) {
  auto cls = nb::class_<PyRoute>(
      m, "Route",
      "One rank's sequence dispatch route (SPEC 7.1), with the fields of the original's "
      "SequenceDispatchRoute; frozen, compares == by fields with any object that has them.");
  cls.def(
      "__init__",
      [](PyRoute* self, nb::handle a, nb::handle b, nb::handle c, nb::handle d, nb::handle e,
         nb::handle f, nb::handle g, nb::handle h) {
        new (self) PyRoute{route_from_fields(a, b, c, d, e, f, g, h), {}};
      },
      nb::arg("local_length"), nb::arg("global_start"), nb::arg("global_end"),
      nb::arg("local_output_start"), nb::arg("send_offsets"), nb::arg("input_splits"),
      nb::arg("output_splits"), nb::arg("needs_exchange"));
  cls.def_prop_ro(
      "local_length", [](const PyRoute& r) { return r.route.local_length; },
      "Rows this rank owns.");
  cls.def_prop_ro(
      "global_start", [](const PyRoute& r) { return r.route.global_start; },
      "First global row of this rank's interval.");
  cls.def_prop_ro(
      "global_end", [](const PyRoute& r) { return r.route.global_end; },
      "End (exclusive) of this rank's interval.");
  cls.def_prop_ro(
      "local_output_start", [](const PyRoute& r) { return r.route.local_output_start; },
      "Where the own shard sits in the assembled output.");
  cls.def_prop_ro(
      "send_offsets", [](PyRoute& r) { return cached_table(r, 0); },
      "Per peer: the first local row sent to it.");
  cls.def_prop_ro(
      "input_splits", [](PyRoute& r) { return cached_table(r, 1); }, "Per peer: rows sent to it.");
  cls.def_prop_ro(
      "output_splits", [](PyRoute& r) { return cached_table(r, 2); },
      "Per peer: rows received from it.");
  cls.def_prop_ro(
      "needs_exchange", [](const PyRoute& r) { return r.route.needs_exchange; },
      "Whether any rank's interval differs from its owner shard (the same on every rank).");
  cls.def(
      "owner_ranges",
      [](PyRoute& r) {
        // A Route takes tables of any lengths, as the original's dataclass does; like its
        // zip, the pairs stop at the shorter table.
        std::size_t n = std::min(r.route.send_offsets.size(), r.route.input_splits.size());
        nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(n)));
        if (!t.is_valid()) throw nb::python_error();
        nb::tuple offsets = nb::borrow<nb::tuple>(cached_table(r, 0));
        nb::tuple counts = nb::borrow<nb::tuple>(cached_table(r, 1));
        for (std::size_t p = 0; p < n; ++p) {
          PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(p),
                           nb::make_tuple(offsets[p], counts[p]).release().ptr());
        }
        return t;
      },
      "(send_offsets[p], input_splits[p]) per peer p, self included (count 0); as the "
      "original's zip, as many pairs as the shorter of the two tables.");
  cls.def("__eq__", &route_eq, nb::arg("other").none());
  cls.def(
      "__ne__",
      [](PyRoute& self, nb::handle other) -> nb::object {
        nb::object eq = route_eq(self, other);
        if (eq.is(nb::handle(Py_NotImplemented))) return eq;
        return nb::bool_(!PyObject_IsTrue(eq.ptr()));
      },
      nb::arg("other").none());
  cls.def("__hash__", [](PyRoute& r) {
    nb::object t = nb::steal(PyTuple_New(kFields.size()));
    if (!t.is_valid()) throw nb::python_error();
    for (std::size_t i = 0; i < kFields.size(); ++i) {
      PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), field(r, i).release().ptr());
    }
    return nb::hash(t);
  });
  cls.def("__repr__", &route_repr);
  cls.def("__reduce__", [](nb::handle self) {
    PyRoute& r = *nb::inst_ptr<PyRoute>(self);
    nb::list fields;
    for (std::size_t i = 0; i < kFields.size(); ++i) fields.append(field(r, i));
    return nb::make_tuple(self.type(), nb::tuple(fields));
  });
  nb::list names;
  for (const char* f : kFields) names.append(nb::str(f));
  cls.attr("_fields") = nb::tuple(names);
}

}  // namespace

// A route object (a Route, or anything with its 8 fields) as the C++ route.
Route route_from_python(nb::handle o) {
  if (nb::isinstance<PyRoute>(o)) return nb::inst_ptr<PyRoute>(o)->route;
  std::array<nb::object, kFields.size()> f;
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    if (!nb::hasattr(o, kFields[i])) {
      throw nb::type_error(("a route needs the attribute " + std::string(kFields[i]) + ", a " +
                            type_of(o.ptr()) + " has none")
                               .c_str());
    }
    f[i] = o.attr(kFields[i]);
  }
  return route_from_fields(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);
}

std::vector<Route> routes_from_python(nb::handle o) {
  FastSequence seq(o, "routes");
  std::vector<Route> out;
  out.reserve(static_cast<std::size_t>(seq.size()));
  for (Py_ssize_t i = 0; i < seq.size(); ++i) out.push_back(route_from_python(seq[i]));
  return out;
}

void bind_routes(nb::module_& m) {
  bind_route_class(m);
  m.attr("MAX_ROUTE_PEERS") = kMaxRoutePeers;
  m.attr("MAX_ALL_ROUTES_PEERS") = kMaxAllRoutesPeers;
  m.def(
      "interval_route",
      [](nb::handle local_length, nb::handle rank, nb::handle intervals, nb::handle owner_offsets) {
        auto iv = to_intervals(intervals);
        auto owners = to_owners(owner_offsets);
        std::optional<std::span<const std::int64_t>> span;
        if (owners) span = *owners;
        return wrap(interval_route(to_i64(local_length.ptr(), "local_length"),
                                   to_i64(rank.ptr(), "rank"), iv, span));
      },
      nb::arg("local_length"), nb::arg("rank"), nb::arg("intervals"),
      nb::arg("owner_offsets").none(), "SPEC 7.1: one rank's route from every peer's interval.");
  m.def(
      "sliding_window_route",
      [](nb::handle boundaries, nb::handle local_length, nb::handle size, nb::handle rank,
         nb::handle window) {
        auto b = to_i64s(boundaries, "boundaries");
        return wrap(sliding_window_route(b, to_i64(local_length.ptr(), "local_length"),
                                         to_i64(size.ptr(), "size"), to_i64(rank.ptr(), "rank"),
                                         to_i64(window.ptr(), "window")));
      },
      nb::arg("boundaries"), nb::arg("local_length"), nb::arg("size"), nb::arg("rank"),
      nb::arg("window"), "SPEC 7.2: one rank's document-local sliding-window route.");
  m.def(
      "document_prefix_route",
      [](nb::handle boundaries, nb::handle local_length, nb::handle size, nb::handle rank,
         nb::handle ratio) {
        auto b = to_i64s(boundaries, "boundaries");
        return wrap(document_prefix_route(b, to_i64(local_length.ptr(), "local_length"),
                                          to_i64(size.ptr(), "size"), to_i64(rank.ptr(), "rank"),
                                          to_i64(ratio.ptr(), "ratio")));
      },
      nb::arg("boundaries"), nb::arg("local_length"), nb::arg("size"), nb::arg("rank"),
      nb::arg("ratio"), "SPEC 7.4: one rank's document-prefix route.");
  m.def(
      "interval_routes",
      [](nb::handle local_length, nb::handle intervals, nb::handle owner_offsets) {
        auto iv = to_intervals(intervals);
        auto owners = to_owners(owner_offsets);
        std::int64_t length = to_i64(local_length.ptr(), "local_length");
        std::vector<Route> routes;
        {
          nb::gil_scoped_release release;
          std::optional<std::span<const std::int64_t>> span;
          if (owners) span = *owners;
          routes = interval_routes(length, iv, span);
        }
        return wrap_all(std::move(routes));
      },
      nb::arg("local_length"), nb::arg("intervals"), nb::arg("owner_offsets").none(),
      "Every rank's interval route (index = rank).");
  // The all-rank window and prefix planners share their arguments but the last one.
  using Planner = std::vector<Route> (*)(std::span<const std::int64_t>, std::int64_t, std::int64_t,
                                         std::int64_t);
  auto bind_planner = [&m](const char* name, Planner planner, const char* last, const char* doc) {
    m.def(
        name,
        [planner, last](nb::handle boundaries, nb::handle local_length, nb::handle size,
                        nb::handle param) {
          auto b = to_i64s(boundaries, "boundaries");
          std::int64_t l = to_i64(local_length.ptr(), "local_length");
          std::int64_t s = to_i64(size.ptr(), "size");
          std::int64_t p = to_i64(param.ptr(), last);
          std::vector<Route> routes;
          {
            nb::gil_scoped_release release;
            routes = planner(b, l, s, p);
          }
          return wrap_all(std::move(routes));
        },
        nb::arg("boundaries"), nb::arg("local_length"), nb::arg("size"), nb::arg(last), doc);
  };
  bind_planner("sliding_window_routes", &sliding_window_routes, "window",
               "Every rank's sliding-window route (index = rank).");
  bind_planner("document_prefix_routes", &document_prefix_routes, "ratio",
               "Every rank's document-prefix route (index = rank).");
  m.def(
      "compressed_document_offsets",
      [](nb::handle boundaries, nb::handle ratio) {
        return int_tuple(compressed_document_offsets(to_i64s(boundaries, "boundaries"),
                                                     to_i64(ratio.ptr(), "ratio")));
      },
      nb::arg("boundaries"), nb::arg("ratio"), "SPEC 7.3: prefix sums of each document's blocks.");
  m.def(
      "compressed_owner_offsets",
      [](nb::handle boundaries, nb::handle ratio, nb::handle local_length) {
        return int_tuple(compressed_owner_offsets(to_i64s(boundaries, "boundaries"),
                                                  to_i64(ratio.ptr(), "ratio"),
                                                  to_i64(local_length.ptr(), "local_length")));
      },
      nb::arg("boundaries"), nb::arg("ratio"), nb::arg("local_length"),
      "SPEC 7.3: blocks owned by the ranks before p, p = 0..size.");
  m.def(
      "route_problem",
      [](nb::handle route, nb::handle rank) {
        std::int64_t self = rank.is_none() ? -1 : to_i64(rank.ptr(), "rank");
        if (self < 0 && !rank.is_none()) {
          throw nb::value_error(("rank must be >= 0 or None, got " + std::to_string(self)).c_str());
        }
        return route_from_python(route).problem(self);
      },
      nb::arg("route"), nb::arg("rank").none(),
      "Why a route is not valid (SPEC 7.1's shape), or '' when it is.");
}

}  // namespace hpref::py
