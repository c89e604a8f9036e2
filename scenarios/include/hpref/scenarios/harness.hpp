// The one harness every driver runs scenarios through: which scenarios a world runs
// (select), a world opened on a named backend (open_world: "mpi", "nccl" over an MPI world,
// "nccl-clique" one rank per GPU in this process), and one rank's outcome of a run
// (run_on_rank, run_world). The simulator's worlds are sim::Cluster runs (hpref sim, the
// demo, tests/sim): they fork their ranks and keep a trace, so they are opened there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/scenarios/scenario.hpp"

namespace hpref::scenarios {

// What a world runs: the scenarios for its kind of backend and size, either the working
// ones or the broken ones with an expected failure there.
struct Filter {
  BackendKind kind = BackendKind::simulator;
  int ranks = 0;  // 0: any
  bool broken = false;
  bool host_groups = true;  // false on an accelerator-only world
};
std::vector<const Scenario*> select(const Filter& filter);

// The scenario `name` for a run on `ranks` ranks; Error invalid_argument naming the
// scenario and why (unknown; rank count out of its range) otherwise.
const Scenario& scenario_for(std::string_view name, int ranks);

// One rank's end of a run: its value, or the error it raised.
struct RankResult {
  bool ok = false;
  std::string value;    // what the rank returned
  std::string kind;     // Error::kind(), or "exception" for another std::exception
  std::string message;  // the error's text
  std::optional<Errc> code;
};
RankResult run_on_rank(const std::function<std::string(Communicator&)>& fn, Communicator& c);

struct WorldOptions {
  bool checked = false;
  std::int64_t timeout_ms = 120000;
  std::size_t max_count = 0;  // 0: the backend's own limit
  int devices = 0;            // nccl-clique: ranks (one per GPU; 0: every visible GPU)
};

// A world of communicators; this process holds one rank of it (mpi, nccl) or all of them
// (nccl-clique).
class World {
 public:
  virtual ~World() = default;
  // This process's ranks, in rank order.
  virtual std::vector<Communicator*> local() = 0;
  // The rank's accelerator ("cuda:N") on an accelerator world.
  virtual std::optional<std::string> device() const { return std::nullopt; }
  // After a run: a timed-out request can never complete, so a failed communicator ends the
  // whole job with `code` (MPI_Abort); a no-op on a world that did not fail.
  virtual void end_if_failed(int code) { (void)code; }
};

// Opens `backend` ("mpi", "nccl" over `host` (an mpi world), "nccl-clique"); Error
// invalid_argument naming the backend when this build lacks it or it is unknown.
std::unique_ptr<World> open_world(std::string_view backend, const WorldOptions& options,
                                  World* host = nullptr);

// Runs fn on every local rank of the world (a thread each when there are several).
std::vector<RankResult> run_world(World& world,
                                  const std::function<std::string(Communicator&)>& fn);

// The backends this build can open (registered by the files of scenarios/src/worlds/).
using WorldOpener = std::function<std::unique_ptr<World>(const WorldOptions&, World* host)>;
struct WorldRegistration {
  WorldRegistration(std::string backend, WorldOpener open);
};

}  // namespace hpref::scenarios
