// `hpref demo`: the data step of the seeds, end to end, on the simulator or under mpirun
// over MPI or NCCL. Reader ranks
// report sample metadata, the planner balances token cost across data-parallel
// constructors, payloads cross in one exchange, each constructor broadcasts its batch to
// its model-parallel peers, and the context-parallel ranks dispatch their sequence shards
// with the sliding-window and document-prefix routes, forward and backward. Every step is
// checked against the oracle.
#pragma once

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
  std::vector<std::string> faults;  // simulator fault plans (crash:R@K, flip:R@K[:B], delay:R@K)
  std::int64_t timeout_ms = 600000;  // mpi and nccl: SPEC 9.2's deadline on every wait
};

// Returns the exit status: 0 when every check passed, 1 otherwise.
int run_cluster_demo(const DemoArgs& args, std::ostream& out);

}  // namespace hpref::cli
