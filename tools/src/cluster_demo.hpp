// `hpref demo`: the data step of the seeds, end to end, on the simulator or under mpirun
// over MPI or NCCL. Reader ranks
// report sample metadata, the planner balances token cost across data-parallel
// constructors, payloads cross in one exchange, each constructor broadcasts its batch to
// its model-parallel peers, and the context-parallel ranks dispatch their sequence shards
// with the sliding-window and document-prefix routes, forward and backward. Every step is
// checked against the oracle.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace hpref::cli {

struct DemoArgs {
  int ranks = 0;  // 0: 8 on the simulator, the mpirun world size on mpi and nccl
  int dp = 2;
  int steps = 5;
  std::uint64_t seed = 1;
  std::int64_t window = 64;
  std::int64_t ratio = 2;
  std::string backend = "sim";
  bool json = false;
  std::vector<std::string> faults;   // simulator fault plans (crash:R@K, flip:R@K[:B], delay:R@K)
  std::int64_t timeout_ms = 600000;  // mpi and nccl: SPEC 9.2's deadline on every wait
  int turn_timeout_ms =
      120000;          // sim: the simulator's Options::turn_timeout_ms (add_demo_sim_options)
  bool codec = false;  // the codec demonstration instead
  // --dump DIR: each rank writes what hpref's transports produced on it, per step (HPB1
  // segments by the C++ encoder; layout in add_demo_sim_options' help and the README).
  std::string dump;
};

// The demo's simulator options, JSON output, --dump and --codec: --turn-timeout-ms
// (default the simulator's, shown in --help), --fault, --json, --dump DIR, --codec
// (excludes every option of `demo` but --seed: added last).
void add_demo_sim_options(CLI::App& demo, DemoArgs& args);

// Returns the exit status, the failure classes of `hpref sim`: 0 every check passed, 1 a
// check failed, 2 bad usage, 3 collective mismatch, 4 deadlock, 5 peer failure. With
// --json, `out` gets exactly one JSON object whatever happens (errors also on stderr).
int run_cluster_demo(const DemoArgs& args, std::ostream& out);

}  // namespace hpref::cli
