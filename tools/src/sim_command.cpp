// `hpref sim run|explore|list` (see sim_command.hpp).
#include "sim_command.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "hpref/error.hpp"
#include "hpref/sim/cluster.hpp"
#include "hpref/sim/scenario.hpp"

namespace hpref::cli {
namespace {

const sim::Scenario& scenario_named(const std::string& name, int ranks) {
  const sim::Scenario* s = sim::find_scenario(name);
  if (s == nullptr) {
    throw Error(Errc::invalid_argument, "no scenario '" + name + "' (hpref sim list shows them)");
  }
  if (ranks < s->min_ranks || ranks > s->max_ranks) {
    throw Error(Errc::invalid_argument, "scenario '" + name + "' runs on " + std::to_string(s->min_ranks) +
                                            " to " + std::to_string(s->max_ranks) + " ranks, not " +
                                            std::to_string(ranks));
  }
  return *s;
}

std::string replay_line(const std::string& scenario, int ranks, std::uint64_t seed,
                        const std::vector<sim::Fault>& faults) {
  std::string line = "hpref sim run " + scenario + " --ranks " + std::to_string(ranks) + " --seed " +
                     std::to_string(seed);
  for (const sim::Fault& f : faults) line += " --fault " + f.str();
  return line;
}

sim::RunResult run_once(const sim::Scenario& s, int ranks, std::uint64_t seed,
                        const std::vector<sim::Fault>& faults) {
  sim::Options options;
  options.seed = seed;
  options.faults = faults;
  sim::ScenarioContext ctx{seed, ranks};
  return sim::Cluster::run(ranks, options, [&](Communicator& c) { return s.fn(c, ctx); });
}

void print_outcomes(const sim::RunResult& r) {
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    std::cout << "rank " << i << ": ";
    switch (o.status) {
      case sim::RankOutcome::Status::ok: std::cout << "ok " << o.value; break;
      case sim::RankOutcome::Status::error: std::cout << "error " << o.kind << ": " << o.message; break;
      case sim::RankOutcome::Status::died: std::cout << "died: " << o.message; break;
    }
    std::cout << "\n";
  }
}

void write_trace(const std::string& path, const sim::RunResult& r) {
  std::ofstream out(path);
  if (!out) throw Error(Errc::io, "cannot write trace file '" + path + "'");
  for (const std::string& line : r.trace) out << line << "\n";
}

std::pair<std::uint64_t, std::uint64_t> parse_seeds(const std::string& text) {
  auto dots = text.find("..");
  std::uint64_t a = 0, b = 0;
  bool ok = dots != std::string::npos;
  if (ok) {
    auto r1 = std::from_chars(text.data(), text.data() + dots, a);
    auto r2 = std::from_chars(text.data() + dots + 2, text.data() + text.size(), b);
    ok = r1.ec == std::errc() && r1.ptr == text.data() + dots && r2.ec == std::errc() &&
         r2.ptr == text.data() + text.size() && a <= b;
  }
  if (!ok) throw Error(Errc::invalid_argument, "--seeds '" + text + "' is not A..B with A <= B");
  return {a, b};
}

int cmd_run(const SimArgs& a) {
  const sim::Scenario& s = scenario_named(a.scenario, a.ranks);
  auto faults = faults_for(a.faults, a.seed, a.ranks);
  std::cout << "SEED=" << a.seed << "\n";
  std::cout << "scenario " << s.name << " on " << a.ranks << " simulated ranks: " << s.description << "\n";
  for (const auto& f : faults) std::cout << "fault " << f.str() << "\n";
  std::cout.flush();
  auto start = std::chrono::steady_clock::now();
  sim::RunResult r = run_once(s, a.ranks, a.seed, faults);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  print_outcomes(r);
  std::cout << "trace: " << r.trace.size() << " lines, " << r.decisions << " scheduling decisions, hash "
            << hex(r.trace_hash) << " (" << static_cast<long>(ms) << " ms)\n";
  if (!a.trace_file.empty()) write_trace(a.trace_file, r);
  sim::Failure failure = r.failure();
  if (a.check_determinism) {
    sim::RunResult again = run_once(s, a.ranks, a.seed, faults);
    if (again.trace_hash != r.trace_hash) {
      std::cout << "DETERMINISM VIOLATION: the same seed gave hash " << hex(again.trace_hash) << " on a second run\n";
      if (!a.trace_file.empty()) write_trace(a.trace_file + ".second", again);
      failure = sim::Failure::determinism;
    } else {
      std::cout << "determinism: a second run gave the same hash\n";
    }
  }
  std::cout << "result: " << sim::failure_name(failure);
  if (!s.expect.empty()) std::cout << " (this scenario is broken on purpose; expected: " << s.expect << ")";
  std::cout << "\n";
  if (failure != sim::Failure::none) std::cout << "replay: " << replay_line(s.name, a.ranks, a.seed, faults) << "\n";
  return sim::exit_code(failure);
}

int cmd_explore(const SimArgs& a) {
  const sim::Scenario& s = scenario_named(a.scenario, a.ranks);
  auto [first, last] = parse_seeds(a.seeds);
  std::cout << "exploring " << s.name << " on " << a.ranks << " ranks, seeds " << first << ".." << last << "\n";
  for (std::uint64_t seed = first;; ++seed) {
    auto faults = faults_for(a.faults, seed, a.ranks);
    sim::RunResult r = run_once(s, a.ranks, seed, faults);
    sim::Failure failure = r.failure();
    if (failure != sim::Failure::none) {
      std::cout << "SEED=" << seed << " fails: " << sim::failure_name(failure) << "\n";
      print_outcomes(r);
      std::cout << "replay: " << replay_line(s.name, a.ranks, seed, faults) << "\n";
      return sim::exit_code(failure);
    }
    std::uint64_t done = seed - first + 1;
    if (done % 25 == 0) std::cout << "explored " << done << " of " << (last - first + 1) << " seeds, all ok\n";
    if (seed == last) break;
  }
  std::cout << "no failure in seeds " << first << ".." << last << "\n";
  return 0;
}

int cmd_list() {
  for (const sim::Scenario& s : sim::scenarios()) {
    std::cout << s.name << " (" << s.min_ranks << "-" << s.max_ranks << " ranks"
              << (s.expect.empty() ? "" : ", expect " + s.expect) << "): " << s.description << "\n";
  }
  return 0;
}

}  // namespace

std::vector<sim::Fault> faults_for(const std::vector<std::string>& specs, std::uint64_t seed, int ranks) {
  std::vector<sim::Fault> out;
  for (const std::string& spec : specs) {
    out.push_back(spec == "random" ? sim::Fault::drawn(seed, ranks) : sim::Fault::parse(spec));
  }
  return out;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

SimCommands add_sim_commands(CLI::App& app, SimArgs& a) {
  SimCommands c{};
  c.sim = app.add_subcommand("sim", "The deterministic cluster simulator (SPEC 9.3): run, explore and list "
                                    "scenarios. Exit codes: 0 ok, 1 check failed, 3 mismatch, 4 deadlock, "
                                    "5 peer failure, 6 determinism violation");
  c.sim->require_subcommand(1);
  c.run = c.sim->add_subcommand("run", "Run one scenario with one seed; print SEED=, each rank's outcome, the "
                                       "trace hash, and on failure the replay line");
  c.explore = c.sim->add_subcommand("explore", "Run seeds in order until one fails, then print its replay line");
  c.list = c.sim->add_subcommand("list", "List the registered scenarios");
  for (CLI::App* sub : {c.run, c.explore}) {
    sub->add_option("scenario", a.scenario, "Scenario name (hpref sim list)")->required();
    sub->add_option("--ranks", a.ranks, "Simulated ranks (1-64)")->check(CLI::Range(1, 64));
    sub->add_option("--fault", a.faults,
                    "Fault plan, repeatable: crash:R@K (rank R dies at its K-th call), flip:R@K[:B] (flip byte B of "
                    "what R receives at its K-th operation), delay:R@K (R not chosen for K decisions), or random "
                    "(drawn from the seed)");
  }
  c.run->add_option("--seed", a.seed, "Seed of the schedule, the data and drawn faults");
  c.run->add_option("--trace", a.trace_file, "Write the trace (one line per operation) to this file");
  c.run->add_flag("--check-determinism", a.check_determinism,
                  "Run twice and compare trace hashes (exit 6 if they differ)");
  c.explore->add_option("--seeds", a.seeds, "Seeds to try, A..B (default 1..100)");
  return c;
}

int run_sim(const SimCommands& c, const SimArgs& a) {
  if (c.list->parsed()) return cmd_list();
  if (c.explore->parsed()) return cmd_explore(a);
  return cmd_run(a);
}

}  // namespace hpref::cli
