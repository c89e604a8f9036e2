// The data step of `hpref demo` on one rank (scenarios/src/demo.cpp), also registered as the
// scenario "demo": reader ranks report sample metadata, the planner balances token cost
// across data-parallel constructors, payloads cross in one exchange, each constructor
// broadcasts its batch to its model-parallel peers, and the context-parallel ranks dispatch
// their sequence shards with the sliding-window and document-prefix routes, forward and
// backward. Every step is checked against the oracle.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "hpref/communicator.hpp"

namespace hpref::scenarios {

// What the world has completed: written after each step's closing all-reduce (on the
// simulator by rank 0 into a page every rank shares), so that the summary of a run that
// fails part way counts the steps before the failure.
struct DemoProgress {
  std::int64_t steps = 0, passed = 0, failed = 0, bytes = 0, samples = 0;
  double before = 0, after = 0;  // imbalance summed over the completed steps
};

struct DemoConfig {
  int dp = 2, cp = 1, steps = 5;  // the mesh is dp x cp = the world's ranks
  std::uint64_t seed = 1;
  std::int64_t window = 64, ratio = 2;
  // The rank's accelerator ("cuda:N") on an accelerator world: groups stage through it and
  // the context-parallel dispatch runs over the model-parallel accelerator group.
  std::optional<std::string> device;
  bool print_steps = false;  // rank 0 prints a line per step on stdout
  DemoProgress* progress = nullptr;
  // --dump DIR: each rank writes what the transports produced on it, per step ("": none);
  // rank 0 calls dump_finished with the data-plane ranks after the closing collectives.
  std::string dump;
  std::function<void(std::span<const int> data_plane)> dump_finished;
};

// A rank's result once every step completed: the world's totals from the closing
// all-reduce, the imbalance summed over the steps (the planner's, rank 0) and the data
// checksum (FNV-1a over every batch and dispatch result, the same on every backend).
struct DemoResult {
  DemoProgress totals;
  std::uint64_t data = 0;
};

// Runs the steps on this rank; returns its DemoResult as the project's pickle of a Value.
std::string run_demo_rank(Communicator& c, const DemoConfig& config);
// Reads run_demo_rank's result back (Error invalid_argument when it is not one).
DemoResult read_demo_result(const std::string& value, int steps);

// --dump's layout: DIR/step<S>/, rank<R>.<what>.hpb1; a file written under a ".part" name
// and renamed when complete (Error io naming it).
std::filesystem::path demo_step_dir(const std::string& dir, int step);
std::string demo_rank_file(int rank, const char* what);
void write_demo_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace hpref::scenarios
