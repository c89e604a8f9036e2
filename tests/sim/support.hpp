// What the simulator suites share: run a registered scenario, describe the outcomes.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "hpref/scenarios/scenario.hpp"
#include "hpref/sim/cluster.hpp"

namespace hpref::sim::testing {

using scenarios::find_scenario;
using scenarios::Scenario;
using scenarios::ScenarioContext;

inline RunResult run_scenario(const std::string& name, int ranks, std::uint64_t seed,
                              std::vector<Fault> faults = {}, std::string world_backend = "sim",
                              bool keep_trace = true) {
  const Scenario* s = find_scenario(name);
  BOOST_REQUIRE_MESSAGE(s != nullptr, "no scenario " << name);
  Options o;
  o.seed = seed;
  o.keep_trace = keep_trace;
  o.faults = std::move(faults);
  o.world_backend = std::move(world_backend);
  ScenarioContext ctx{seed, ranks};
  return Cluster::run(ranks, o, [&](Communicator& c) { return s->fn(c, ctx); });
}

inline std::string describe(const RunResult& r) {
  std::string out;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    out += "\n  rank " + std::to_string(i) + ": " +
           (o.status == RankOutcome::Status::ok ? "ok " + o.value : o.kind + " " + o.message);
  }
  return out;
}

}  // namespace hpref::sim::testing
