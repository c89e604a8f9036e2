// The harness (harness.hpp): selection, the worlds this build can open, one rank's run.
#include "hpref/scenarios/harness.hpp"

#include <map>
#include <thread>

#include "hpref/error.hpp"

namespace hpref::scenarios {
namespace {

std::map<std::string, WorldOpener, std::less<>>& openers() {
  static std::map<std::string, WorldOpener, std::less<>> all;
  return all;
}

// What a build without the backend says, naming the configure option that adds it.
std::string missing(std::string_view backend) {
  std::string b(backend);
  if (b == "mpi") {
    return "--backend mpi: this hpref was built without MPI (HPREF_WITH_MPI; it needs "
           "libopenmpi-dev at configure time)";
  }
  if (b == "nccl" || b == "nccl-clique") {
    return "--backend " + b +
           ": this hpref was built without NCCL (HPREF_WITH_NCCL; it needs the CUDA toolkit "
           "and NCCL at configure time)";
  }
  return "--backend must be sim, mpi or nccl, got '" + b + "'";
}

}  // namespace

std::vector<const Scenario*> select(const Filter& f) {
  std::vector<const Scenario*> out;
  for (const Scenario& s : scenarios()) {
    bool wanted = f.broken ? s.expected(f.kind) != Expect::none : !s.broken();
    if (f.kind == BackendKind::device && s.simulator_only) wanted = false;
    if ((s.needs_host_groups && !f.host_groups) || !s.in_sweeps) wanted = false;
    bool fits = f.ranks == 0 || (f.ranks >= s.min_ranks && f.ranks <= s.max_ranks);
    if (wanted && fits) out.push_back(&s);
  }
  return out;
}

const Scenario& scenario_for(std::string_view name, int ranks) {
  const Scenario* s = find_scenario(name);
  std::string n(name);
  if (s == nullptr) {
    throw Error(Errc::invalid_argument, "no scenario '" + n + "' (hpref sim list shows them)");
  }
  if (ranks < s->min_ranks || ranks > s->max_ranks) {
    throw Error(Errc::invalid_argument,
                "scenario '" + n + "' runs on " + std::to_string(s->min_ranks) + " to " +
                    std::to_string(s->max_ranks) + " ranks, not " + std::to_string(ranks));
  }
  return *s;
}

RankResult run_on_rank(const std::function<std::string(Communicator&)>& fn, Communicator& c) {
  RankResult r;
  try {
    r.value = fn(c);
    r.ok = true;
  } catch (const Error& e) {
    r.kind = std::string(e.kind());
    r.message = e.what();
    r.code = e.code();
  } catch (const std::exception& e) {
    r.kind = "exception";
    r.message = e.what();
  }
  return r;
}

WorldRegistration::WorldRegistration(std::string backend, WorldOpener open) {
  openers()[std::move(backend)] = std::move(open);
}

std::unique_ptr<World> open_world(std::string_view backend, const WorldOptions& options,
                                  World* host) {
  auto it = openers().find(backend);
  if (it == openers().end()) throw Error(Errc::invalid_argument, missing(backend));
  return it->second(options, host);
}

std::vector<RankResult> run_world(World& world,
                                  const std::function<std::string(Communicator&)>& fn) {
  std::vector<Communicator*> ranks = world.local();
  std::vector<RankResult> results(ranks.size());
  if (ranks.size() == 1) {
    results[0] = run_on_rank(fn, *ranks[0]);
    return results;
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] { results[i] = run_on_rank(fn, *ranks[i]); });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace hpref::scenarios
