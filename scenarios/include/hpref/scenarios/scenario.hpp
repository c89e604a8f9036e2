// Scenarios: named programs of a Communicator, each described once by a `Scenario` and
// registered by the file that defines it; every backend that is built runs them (the
// simulator; MPI and NCCL under mpirun; NCCL in the GPU check) through harness.hpp. A
// scenario derives everything (sizes, data, its own choices) from the run's seed, checks its
// results, and throws Error(scenario_check) when a check fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/communicator.hpp"

namespace hpref::scenarios {

struct ScenarioContext {
  std::uint64_t seed = 1;
  int ranks = 1;
  // The bytes of a "large" payload (dropped_unwaited's: still moving over MPI when its Work
  // is dropped). The MPI runner lowers it with a tiny --max-count, whose split runs send
  // pieces of a few bytes. What a scenario returns must not depend on it.
  std::size_t large_bytes = std::size_t{1} << 17;
};

using ScenarioFn = std::function<std::string(Communicator&, const ScenarioContext&)>;

// The failure a broken scenario must end with.
enum class Expect { none, check_failed, mismatch, deadlock, peer_failure, timeout };
// "" (none), "check failed", "mismatch", "deadlock", "peer failure", "timeout".
std::string_view expect_name(Expect e) noexcept;

// The kinds of backend whose expected failures differ: the simulator detects mismatches,
// deadlocks and peer failures itself; MPI and NCCL in checked mode with a short deadline
// report a mismatch, a timeout or a refused call.
enum class BackendKind { simulator, device };
// "sim" is the simulator; every other backend name ("mpi", "nccl") a device.
BackendKind backend_kind(std::string_view backend) noexcept;

struct Scenario {
  std::string name;
  std::string description;
  ScenarioFn fn;
  int min_ranks = 1;
  int max_ranks = 64;
  Expect on_simulator = Expect::none;  // what a correct simulator must report
  Expect on_device = Expect::none;     // what MPI or NCCL must report instead
  // Relies on the simulator's own fault plans or detections (not run under MPI or NCCL).
  bool simulator_only = false;
  // Uses host groups (the data-plane control group, the host model-parallel group): not
  // run on an accelerator-only world (the GPU check's clique, the simulator's nccl world).
  bool needs_host_groups = false;
  // Run by the sweeps over every scenario (tests/mpi, the GPU check, select()); false for
  // one with its own driver and sizes (the demo: hpref demo).
  bool in_sweeps = true;

  bool broken() const noexcept { return on_simulator != Expect::none; }
  Expect expected(BackendKind kind) const noexcept {
    return kind == BackendKind::simulator ? on_simulator : on_device;
  }
};

// Registers a file's scenarios during static initialisation:
//   const Registration registered(2, {Scenario{.name = "...", ...}, ...});
// `position` orders the files in scenarios() (collectives 1, transports 2, demo 3); names
// must be unique (Error invalid_argument at the first lookup otherwise).
struct Registration {
  Registration(int position, std::vector<Scenario> scenarios);
};

// Every registered scenario: by file position, then in each file's order.
const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(std::string_view name);

// The backend for host groups: the world's own, or "mpi" on an accelerator world (whose
// host groups run over the MPI it was bootstrapped with).
std::string host_backend(const Communicator& c);

// Throws Error(scenario_check) with `what` unless `ok`.
void check(bool ok, const std::string& what);

// Deterministic test data (STYLE: regenerable from seed, element index and rank).
std::uint8_t data_byte(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) noexcept;

}  // namespace hpref::scenarios
