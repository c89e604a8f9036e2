// The scenario registry.
#include "hpref/sim/scenario.hpp"

#include "hpref/error.hpp"
#include "hpref/sim/splitmix64.hpp"

namespace hpref::sim {

void register_collective_scenarios(std::vector<Scenario>& out);  // collective_scenarios.cpp
void register_transport_scenarios(std::vector<Scenario>& out);   // transport_scenarios.cpp

namespace {

std::vector<Scenario>& registry() {
  static std::vector<Scenario> all = [] {
    std::vector<Scenario> v;
    register_collective_scenarios(v);
    register_transport_scenarios(v);
    return v;
  }();
  return all;
}

}  // namespace

const std::vector<Scenario>& scenarios() { return registry(); }

Scenario make_scenario(std::string name, std::string description, ScenarioFn fn, int min_ranks,
                       std::string expect, bool simulator_only, std::string device_expect) {
  Scenario s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.fn = std::move(fn);
  s.min_ranks = min_ranks;
  s.expect = std::move(expect);
  s.simulator_only = simulator_only;
  s.device_expect = std::move(device_expect);
  return s;
}

const Scenario* find_scenario(std::string_view name) {
  for (const Scenario& s : registry()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

void register_scenario(Scenario scenario) {
  if (find_scenario(scenario.name) != nullptr) {
    throw Error(Errc::invalid_argument, "scenario '" + scenario.name + "' is registered twice");
  }
  registry().push_back(std::move(scenario));
}

std::string host_backend(const Communicator& c) {
  std::string world = c.world_backend();
  return is_accelerator_backend_name(world) ? "mpi" : world;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error(Errc::scenario_check, what);
}

std::uint8_t data_byte(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) noexcept {
  SplitMix64 g(seed * 0x9e3779b97f4a7c15ULL ^ (stream << 20) ^ index);
  return static_cast<std::uint8_t>(g.next());
}

}  // namespace hpref::sim
