// hpref._core: the global oracle (SPEC 8) for Python. Tensors cross as RawTensors
// (common.hpp); routes as Route objects or anything with their fields (routes.cpp). The
// routes are checked before the oracle reads any row: each must have SPEC 7.1's shape for
// its rank and the owner shards must follow each other from row 0, since oracle_backward
// indexes the gradients by them.
#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/error.hpp"
#include "hpref/oracle.hpp"
#include "hpref/routes.hpp"

namespace hpref::py {

// routes.cpp: a sequence of route objects as C++ routes.
std::vector<Route> routes_from_python(nb::handle routes);

namespace {

std::vector<Route> checked_routes(nb::handle objects) {
  std::vector<Route> routes = routes_from_python(objects);
  if (routes.empty())
    throw Error(Errc::oracle_mismatch, "the oracle needs at least one route, got none");
  std::int64_t owner = 0;
  for (std::size_t r = 0; r < routes.size(); ++r) {
    const Route& route = routes[r];
    std::string why = route.problem(static_cast<std::int64_t>(r));
    if (why.empty() && route.send_offsets.size() != routes.size()) {
      why = "it has " + std::to_string(route.send_offsets.size()) + " peers, not " +
            std::to_string(routes.size());
    }
    if (why.empty() && route.global_start + route.local_output_start != owner) {
      why = "its owner shard starts at row " +
            std::to_string(route.global_start + route.local_output_start) + ", not where rank " +
            std::to_string(r) + "'s predecessors end (" + std::to_string(owner) + ")";
    }
    if (!why.empty()) throw Error(Errc::oracle_mismatch, "route " + std::to_string(r) + ": " + why);
    owner += route.local_length;
  }
  return routes;
}

nb::list to_list(const std::vector<Tensor>& tensors, nb::handle make) {
  nb::list out;
  for (const Tensor& t : tensors) out.append(tensor_to_python(t, make));
  return out;
}

}  // namespace

void bind_oracle(nb::module_& m) {
  m.def(
      "oracle_forward",
      [](nb::handle bank, nb::handle routes, nb::handle make) {
        std::vector<Route> rs = checked_routes(routes);
        Tensor t = tensor_from_python(bank);
        std::vector<Tensor> out;
        {
          nb::gil_scoped_release release;
          out = oracle_forward(t, rs);
        }
        return to_list(out, make);
      },
      nb::arg("bank"), nb::arg("routes"), nb::arg("make_tensor"),
      "SPEC 8.1: rank r's output = rows [global_start, global_end) of the bank (axis 0).");
  m.def(
      "oracle_backward",
      [](nb::handle grads, nb::handle routes, nb::handle make) {
        std::vector<Route> rs = checked_routes(routes);
        std::vector<Tensor> gs;
        for (nb::handle g : grads) gs.push_back(tensor_from_python(g));
        std::vector<Tensor> out;
        {
          nb::gil_scoped_release release;
          out = oracle_backward(gs, rs);
        }
        return to_list(out, make);
      },
      nb::arg("output_grads"), nb::arg("routes"), nb::arg("make_tensor"),
      "SPEC 8.2: every owner's input gradient, peers summed in ascending rank.");
}

}  // namespace hpref::py
