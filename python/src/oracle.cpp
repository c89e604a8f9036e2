// hpref._core: the global oracle (SPEC 8) for Python. Tensors cross as RawTensors
// (common.hpp); routes as Route objects or anything with their fields (routes.cpp). The
// routes are checked before the oracle reads any row: each must have SPEC 7.1's shape for
// its rank, the owner shards must follow each other from row 0 (oracle_backward indexes the
// gradients by them) and every pair of ranks must agree on the rows between them.
#include <nanobind/nanobind.h>

#include <algorithm>
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

std::string num(std::int64_t v) { return std::to_string(v); }

// Every pair of ranks must agree on the rows between them, as one plan's routes do (SPEC
// 7.1): what q sends r (routes[q].input_splits[r], from routes[q].send_offsets[r]) and what
// r receives from q (routes[r].output_splits[q]) are the rows where q's owner shard meets
// r's interval. Routes each of the right shape can still disagree, and then the original's
// dispatch moves other rows than the bank slice the oracle answers with.
void check_pairs(const std::vector<Route>& routes, const std::vector<std::int64_t>& owners) {
  for (std::size_t r = 0; r < routes.size(); ++r) {
    const Route& to = routes[r];
    for (std::size_t q = 0; q < routes.size(); ++q) {
      if (q == r) continue;  // self entries: 0, checked by Route::problem
      const Route& from = routes[q];
      std::int64_t lo = std::max(owners[q], to.global_start);
      std::int64_t rows = std::max<std::int64_t>(0, std::min(owners[q + 1], to.global_end) - lo);
      std::int64_t offset = rows > 0 ? lo - owners[q] : 0;
      std::int64_t received = to.output_splits[q], sent = from.input_splits[r];
      std::int64_t sent_from = from.send_offsets[r];
      if (received == rows && sent == rows && sent_from == offset) continue;
      std::string q_ = std::to_string(q), r_ = std::to_string(r);
      throw Error(Errc::oracle_mismatch,
                  "routes " + q_ + " and " + r_ + " disagree on the rows rank " + q_ +
                      " sends rank " + r_ + ": routes[" + r_ + "].output_splits[" + q_ +
                      "] = " + num(received) + ", routes[" + q_ + "].input_splits[" + r_ +
                      "] = " + num(sent) + " from routes[" + q_ + "].send_offsets[" + r_ +
                      "] = " + num(sent_from) + ", but rank " + q_ + "'s owner shard [" +
                      num(owners[q]) + ", " + num(owners[q + 1]) + ") meets rank " + r_ +
                      "'s interval [" + num(to.global_start) + ", " + num(to.global_end) + ") in " +
                      num(rows) + " rows from offset " + num(offset));
    }
  }
}

std::vector<Route> checked_routes(nb::handle objects) {
  std::vector<Route> routes = routes_from_python(objects);
  if (routes.empty())
    throw Error(Errc::oracle_mismatch, "the oracle needs at least one route, got none");
  std::vector<std::int64_t> owners{0};
  for (std::size_t r = 0; r < routes.size(); ++r) {
    const Route& route = routes[r];
    std::int64_t owner = owners.back();
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
    if (why.empty() && route.needs_exchange != routes[0].needs_exchange) {
      why = std::string("its needs_exchange is ") + (route.needs_exchange ? "true" : "false") +
            " but route 0's is not (one plan answers the same on every rank)";
    }
    if (!why.empty()) throw Error(Errc::oracle_mismatch, "route " + std::to_string(r) + ": " + why);
    // No overflow: the shard ends within the interval, global_end (problem() checked).
    owners.push_back(owner + route.local_length);
  }
  check_pairs(routes, owners);
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
        // The bank is the owner shards concatenated: no row more or less (oracle_forward
        // itself only needs each interval inside it).
        std::int64_t owned = route_owner_offsets(rs).back();
        if (t.dim() > 0 && t.shape()[0] != owned) {
          throw Error(Errc::oracle_mismatch, "the global bank has " + std::to_string(t.shape()[0]) +
                                                 " rows but the routes' owner shards hold " +
                                                 std::to_string(owned));
        }
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
