// Scenarios: named programs of a Communicator, registered once and run by every backend
// that is built (the simulator; MPI and NCCL under mpirun; NCCL in the GPU check). A scenario
// derives everything (sizes, data, its own choices) from the run's seed, checks its results, and
// throws Error(scenario_check) when a check fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"

namespace hpref::sim {

struct ScenarioContext {
  std::uint64_t seed = 1;
  int ranks = 1;
};

using ScenarioFn = std::function<std::string(Communicator&, const ScenarioContext&)>;

struct Scenario {
  std::string name;
  std::string description;
  ScenarioFn fn;
  int min_ranks = 1;
  int max_ranks = 64;
  // The failure class a correct simulator must report ("" for none): the broken
  // scenarios that demonstrate each detection (e.g. "deadlock").
  std::string expect;
  // Relies on the simulator's own fault plans or detections (not run under MPI).
  bool simulator_only = false;
  // Uses host groups (the data-plane control group, the host model-parallel group): not
  // run on an accelerator-only world (the GPU check's clique, the simulator's nccl world).
  bool host_groups = false;
  // What MPI in checked mode with a short deadline must report instead of `expect` (""
  // when `expect` is ""): "mismatch", "timeout" or "check failed".
  std::string device_expect;
};

Scenario make_scenario(std::string name, std::string description, ScenarioFn fn, int min_ranks = 1,
                       std::string expect = "", bool simulator_only = false,
                       std::string device_expect = "");

// Every registered scenario, in registration order (collectives first).
const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(std::string_view name);
// Adds a scenario (a later issue's transports call this); names must be unique.
void register_scenario(Scenario scenario);

// The backend for host groups: the world's own, or "mpi" on an accelerator world (whose
// host groups run over the MPI it was bootstrapped with).
std::string host_backend(const Communicator& c);

// Throws Error(scenario_check) with `what` unless `ok`.
void check(bool ok, const std::string& what);

// Deterministic test data (STYLE: regenerable from seed, element index and rank).
std::uint8_t data_byte(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) noexcept;

}  // namespace hpref::sim
