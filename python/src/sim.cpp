// hpref._core, simulator (SPEC 9.3, issue 12): runs a Python function on n forked rank
// processes of the deterministic simulator, each with a Communicator object whose
// operations take (address, bytes) buffers the caller keeps alive until Work.wait().
//
// Forking a Python process from C++: the parent holds the GIL through Cluster::run (the
// monitor is C++ and needs no Python), bracketed by PyOS_BeforeFork/AfterFork_Parent, and
// each child calls PyOS_AfterFork_Child before running Python, as os.fork does.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <csignal>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/communicator.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/sim/chrome_trace.hpp"
#include "hpref/sim/cluster.hpp"

namespace hpref::py {
namespace {

MemorySpace space_of(const std::string& space) {
  if (space == "host") return MemorySpace::host;
  if (space == "accelerator") return MemorySpace::accelerator;
  throw Error(Errc::invalid_argument,
              "a buffer's space must be 'host' or 'accelerator', got '" + space + "'");
}

ReduceOp reduce_op_of(const std::string& op) {
  if (op == "sum") return ReduceOp::sum;
  if (op == "min") return ReduceOp::min;
  if (op == "max") return ReduceOp::max;
  throw Error(Errc::comm_usage, "all_reduce op '" + op + "' is not sum, min or max");
}

std::vector<std::size_t> counts_of(const std::vector<std::int64_t>& counts, const char* what) {
  std::vector<std::size_t> out;
  out.reserve(counts.size());
  for (std::int64_t c : counts) {
    if (c < 0)
      throw Error(Errc::comm_usage,
                  std::string(what) + " holds a negative count " + std::to_string(c));
    out.push_back(static_cast<std::size_t>(c));
  }
  return out;
}

void* address_of(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// One rank's Communicator, valid while the rank function runs (the rank process exits
// after it).
class PyComm {
 public:
  explicit PyComm(Communicator* comm) : comm_(comm) {}
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  std::string world_backend() const { return comm_->world_backend(); }
  Group world() const { return comm_->world(); }
  Group new_group(const std::vector<int>& ranks, const std::string& backend) {
    nb::gil_scoped_release release;
    return comm_->new_group(ranks, backend);
  }
  Work all_gather(const Group& g, std::uintptr_t in, std::size_t in_bytes, std::uintptr_t out,
                  std::size_t out_bytes, const std::string& space) {
    MemorySpace s = space_of(space);
    nb::gil_scoped_release release;
    return comm_->all_gather(g, ConstBuffer{address_of(in), in_bytes, s},
                             MutableBuffer{address_of(out), out_bytes, s});
  }
  Work broadcast(const Group& g, std::uintptr_t buffer, std::size_t bytes, int root,
                 const std::string& space) {
    MemorySpace s = space_of(space);
    nb::gil_scoped_release release;
    return comm_->broadcast(g, MutableBuffer{address_of(buffer), bytes, s}, root);
  }
  Work all_reduce(const Group& g, std::uintptr_t buffer, std::size_t bytes,
                  const std::string& dtype, const std::string& op, const std::string& space) {
    MemorySpace s = space_of(space);
    DType d = parse_dtype("torch." + dtype);
    ReduceOp o = reduce_op_of(op);
    nb::gil_scoped_release release;
    return comm_->all_reduce(g, MutableBuffer{address_of(buffer), bytes, s}, d, o);
  }
  Work all_to_all_v(const Group& g, std::uintptr_t in, const std::vector<std::int64_t>& in_counts,
                    std::uintptr_t out, const std::vector<std::int64_t>& out_counts,
                    const std::string& space) {
    MemorySpace s = space_of(space);
    auto ic = counts_of(in_counts, "in_counts");
    auto oc = counts_of(out_counts, "out_counts");
    std::size_t in_bytes = 0, out_bytes = 0;
    for (std::size_t c : ic) in_bytes += c;
    for (std::size_t c : oc) out_bytes += c;
    nb::gil_scoped_release release;
    return comm_->all_to_all_v(g, ConstBuffer{address_of(in), in_bytes, s}, ic,
                               MutableBuffer{address_of(out), out_bytes, s}, oc);
  }
  Work barrier(const Group& g) {
    nb::gil_scoped_release release;
    return comm_->barrier(g);
  }

 private:
  Communicator* comm_;
};

// str() of a raised exception for its report; a user's __str__ may itself raise, and the
// report must still name the exception, so that error becomes a placeholder message.
std::string exception_text(nb::handle value) {
  try {
    return str_text(value);
  } catch (nb::python_error& failed) {  // fetched: the error indicator is clear again
    std::string why = py_type_name(failed.value());
    try {
      why += ": " + str_text(failed.value());
    } catch (nb::python_error&) {  // its own __str__ raised too: its type is all there is
    }
    return "<str() failed: " + why + ">";
  }
}

// What a rank's Python function raised, as the C++ exception the simulator records: an
// hpref.Error keeps its kind (so the run's failure class follows, SPEC 9.3); any other
// exception is recorded as kind "exception" with "Type: message".
[[noreturn]] void rethrow_python(nb::python_error& e) {
  try {
    if (std::optional<Error> error = hpref_error_of(e)) throw *error;
  } catch (nb::python_error&) {  // an hpref.Error whose __str__ raises: reported as any other
  }
  throw std::runtime_error(py_type_name(e.value()) + ": " + exception_text(e.value()));
}

nb::dict sim_run(int world_size, nb::object entry, std::uint64_t seed,
                 const std::vector<std::string>& faults, int turn_timeout_ms,
                 const std::string& world_backend, bool keep_trace) {
  sim::Options options;
  options.keep_trace = keep_trace;
  options.seed = seed;
  options.world_backend = world_backend;
  options.turn_timeout_ms = turn_timeout_ms;
  for (const std::string& f : faults) {
    options.faults.push_back(f == "random" ? sim::Fault::drawn(seed, world_size)
                                           : sim::Fault::parse(f));
  }
  sim::RankFn fn = [&entry](Communicator& comm) -> std::string {
    PyOS_AfterFork_Child();  // this process now runs Python alone
    try {
      nb::object result = entry(nb::cast(PyComm(&comm)));
      if (!PyBytes_Check(result.ptr()))
        throw Error(Errc::internal, "the rank entry must return bytes");
      return std::string(PyBytes_AS_STRING(result.ptr()),
                         static_cast<std::size_t>(PyBytes_GET_SIZE(result.ptr())));
    } catch (nb::python_error& e) {
      rethrow_python(e);
    }
  };
  // A SIGINT that ends the run is kept until the after-fork hooks have run: raised in the
  // run, Python took it as a KeyboardInterrupt inside the first hook, logging's, which printed
  // it as ignored and left its lock held, and sim.run returned the killed ranks' failures.
  options.keep_interrupt = true;
  auto raise_kept_interrupt = [] {
    if (int sig = sim::take_interrupt()) {
      raise(sig);  // to the caller's handler, restored (Python's notes it)
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    }
  };
  sim::RunResult r;
  PyOS_BeforeFork();
  try {
    r = sim::Cluster::run(world_size, options, fn);
  } catch (...) {
    PyOS_AfterFork_Parent();
    raise_kept_interrupt();
    throw;
  }
  PyOS_AfterFork_Parent();
  raise_kept_interrupt();

  nb::list outcomes;
  const char* status_names[] = {"ok", "error", "died"};
  for (const sim::RankOutcome& o : r.outcomes) {
    outcomes.append(nb::make_tuple(status_names[static_cast<int>(o.status)],
                                   nb::bytes(o.value.data(), o.value.size()), o.kind, o.message));
  }
  nb::dict out;
  out["outcomes"] = outcomes;
  out["trace"] = nb::cast(r.trace);
  out["trace_hash"] = r.trace_hash;
  out["decisions"] = r.decisions;
  out["unfired_faults"] = nb::cast(r.unfired_faults);
  out["failure"] = std::string(sim::failure_name(r.failure()));
  out["exit_code"] = sim::exit_code(r.failure());
  std::vector<std::string> fault_text;
  for (const sim::Fault& f : options.faults) fault_text.push_back(f.str());
  out["faults"] = nb::cast(fault_text);
  return out;
}

}  // namespace

void bind_sim(nb::module_& m) {
  nb::class_<Group>(m, "Group", "A process group as one rank sees it (SPEC 9.1).")
      .def_prop_ro("id", &Group::id)
      .def_prop_ro("ranks", [](const Group& g) { return g.ranks(); })
      .def_prop_ro("size", &Group::size)
      .def_prop_ro("index", &Group::index)
      .def_prop_ro("is_member", &Group::is_member)
      .def_prop_ro("backend", [](const Group& g) { return g.backend(); })
      .def_prop_ro("memory",
                   [](const Group& g) {
                     return std::string(g.memory() == MemorySpace::host ? "host" : "accelerator");
                   })
      .def("__repr__", [](const Group& g) {
        std::string ranks;
        for (int r : g.ranks()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
        return "Group(id=" + std::to_string(g.id()) + ", ranks=[" + ranks + "], backend='" +
               g.backend() + "')";
      });
  nb::class_<Work>(m, "Work", "A launched operation: wait() completes it or raises its CommError.")
      .def("wait", [](Work& w) {
        nb::gil_scoped_release release;
        w.wait();
      });
  nb::class_<PyComm>(m, "Communicator", "One simulated rank's Communicator (SPEC 9.1).")
      .def("rank", &PyComm::rank)
      .def("size", &PyComm::size)
      .def("world_backend", &PyComm::world_backend)
      .def("world", &PyComm::world)
      .def("new_group", &PyComm::new_group, nb::arg("ranks"), nb::arg("backend"))
      .def("all_gather", &PyComm::all_gather, nb::arg("group"), nb::arg("in_addr"),
           nb::arg("in_bytes"), nb::arg("out_addr"), nb::arg("out_bytes"),
           nb::arg("space") = "host")
      .def("broadcast", &PyComm::broadcast, nb::arg("group"), nb::arg("addr"), nb::arg("nbytes"),
           nb::arg("root"), nb::arg("space") = "host")
      .def("all_reduce", &PyComm::all_reduce, nb::arg("group"), nb::arg("addr"), nb::arg("nbytes"),
           nb::arg("dtype"), nb::arg("op"), nb::arg("space") = "host")
      .def("all_to_all_v", &PyComm::all_to_all_v, nb::arg("group"), nb::arg("in_addr"),
           nb::arg("in_counts"), nb::arg("out_addr"), nb::arg("out_counts"),
           nb::arg("space") = "host")
      .def("barrier", &PyComm::barrier, nb::arg("group"));
  m.def("sim_run", &sim_run, nb::arg("world_size"), nb::arg("entry"), nb::arg("seed") = 1,
        nb::arg("faults") = std::vector<std::string>{}, nb::arg("turn_timeout_ms") = 120000,
        nb::arg("world_backend") = "sim", nb::arg("keep_trace") = true,
        "Runs entry(communicator) -> bytes on world_size forked simulated ranks (SPEC 9.3); "
        "returns outcomes, trace (empty unless keep_trace), trace hash and failure class.");
  m.def(
      "sim_chrome_trace",
      [](const std::vector<std::string>& lines) { return sim::chrome_trace(lines); },
      nb::arg("lines"),
      "A run's trace lines as Chrome trace-event JSON (hpref/sim/chrome_trace.hpp).");
  m.def(
      "sim_leftover_segments", [] { return sim::leftover_segments(); },
      "Simulator segments left in /dev/shm by processes that no longer exist.");
}

}  // namespace hpref::py
