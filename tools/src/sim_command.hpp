// `hpref sim`: run a registered scenario on the simulator, explore seeds until one fails,
// list the scenarios. Exit codes: 0 ok, 1 check failed, 2 bad usage, 3 mismatch,
// 4 deadlock, 5 peer failure, 6 determinism violation.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace hpref::sim {
struct Fault;
}

namespace hpref::cli {

struct SimArgs {
  std::string scenario;
  int ranks = 4;
  std::uint64_t seed = 1;
  std::string seeds = "1..100";
  std::string trace_file;
  std::vector<std::string> faults;
  bool check_determinism = false;
};

struct SimCommands {
  CLI::App* sim;
  CLI::App* run;
  CLI::App* explore;
  CLI::App* list;
};

SimCommands add_sim_commands(CLI::App& app, SimArgs& args);
int run_sim(const SimCommands& commands, const SimArgs& args);

// The faults of --fault specs: "random" is drawn from the seed for `ranks` ranks, anything
// else parsed (Error invalid_argument naming a bad spec). Shared with `hpref demo`.
std::vector<sim::Fault> faults_for(const std::vector<std::string>& specs, std::uint64_t seed, int ranks);
// Sixteen lowercase hex digits.
std::string hex(std::uint64_t v);

}  // namespace hpref::cli
