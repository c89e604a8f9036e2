// The scenario registry: filled by each file's Registration before main.
#include <algorithm>

#include "hpref/error.hpp"
#include "hpref/scenarios/scenario.hpp"
#include "hpref/splitmix64.hpp"

namespace hpref::scenarios {
namespace {

struct Registry {
  std::vector<std::pair<int, Scenario>> added;  // (file position, scenario), in arrival order
  std::vector<Scenario> sorted;
  bool settled = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::string_view expect_name(Expect e) noexcept {
  switch (e) {
    case Expect::none:
      return "";
    case Expect::check_failed:
      return "check failed";
    case Expect::mismatch:
      return "mismatch";
    case Expect::deadlock:
      return "deadlock";
    case Expect::peer_failure:
      return "peer failure";
    case Expect::timeout:
      return "timeout";
  }
  return "?";
}

BackendKind backend_kind(std::string_view backend) noexcept {
  return backend == "sim" ? BackendKind::simulator : BackendKind::device;
}

Registration::Registration(int position, std::vector<Scenario> scenarios) {
  for (Scenario& s : scenarios) registry().added.emplace_back(position, std::move(s));
}

const std::vector<Scenario>& scenarios() {
  Registry& r = registry();
  if (!r.settled) {
    std::stable_sort(r.added.begin(), r.added.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [position, s] : r.added) {
      for (const Scenario& before : r.sorted) {
        if (before.name == s.name)
          throw Error(Errc::invalid_argument, "scenario '" + s.name + "' is registered twice");
      }
      r.sorted.push_back(std::move(s));
    }
    r.added.clear();
    r.settled = true;
  }
  return r.sorted;
}

const Scenario* find_scenario(std::string_view name) {
  for (const Scenario& s : scenarios()) {
    if (s.name == name) return &s;
  }
  return nullptr;
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

}  // namespace hpref::scenarios
