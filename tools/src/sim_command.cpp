// `hpref sim run|explore|list` (see sim_command.hpp).
#include "sim_command.hpp"

#include "hpref/sim/chrome_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

#include "hpref/cli/integer_option.hpp"
#include "hpref/cli/text_option.hpp"
#include "hpref/error.hpp"
#include "hpref/scenarios/harness.hpp"
#include "hpref/sim/cluster.hpp"

namespace hpref::cli {
namespace {

std::string replay_line(const SimArgs& a, std::uint64_t seed,
                        const std::vector<sim::Fault>& faults) {
  std::string line = "hpref sim run " + a.scenario + " --ranks " + std::to_string(a.ranks) +
                     " --seed " + std::to_string(seed);
  if (a.turn_timeout_ms != sim::Options{}.turn_timeout_ms) {
    line += " --turn-timeout-ms " + std::to_string(a.turn_timeout_ms);
  }
  for (const sim::Fault& f : faults) line += " --fault " + f.str();
  return line;
}

using scenarios::Scenario;

sim::RunResult run_once(const Scenario& s, const SimArgs& a, std::uint64_t seed,
                        const std::vector<sim::Fault>& faults) {
  sim::Options options;
  options.seed = seed;
  options.faults = faults;
  options.turn_timeout_ms = a.turn_timeout_ms;
  options.keep_trace = !a.trace_file.empty();  // the lines only for --trace: hash and count else
  scenarios::ScenarioContext ctx{seed, a.ranks};
  return sim::Cluster::run(a.ranks, options, [&](Communicator& c) { return s.fn(c, ctx); });
}

const char* status_name(sim::RankOutcome::Status s) {
  switch (s) {
    case sim::RankOutcome::Status::ok:
      return "ok";
    case sim::RankOutcome::Status::error:
      return "error";
    case sim::RankOutcome::Status::died:
      return "died";
  }
  return "?";
}

// The object `sim run --json` prints (and `sim explore --json` once per seed).
Json run_json(const Scenario& s, const SimArgs& a, std::uint64_t seed,
              const std::vector<sim::Fault>& faults, const sim::RunResult& r, double ms) {
  Json outcomes = Json::array();
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    Json one = {{"rank", i}, {"status", status_name(o.status)}};
    if (o.status == sim::RankOutcome::Status::ok) one["value"] = o.value;
    if (o.status == sim::RankOutcome::Status::error) one["kind"] = o.kind;
    if (o.status != sim::RankOutcome::Status::ok) one["message"] = o.message;
    outcomes.push_back(std::move(one));
  }
  return Json{{"scenario", s.name},
              {"ranks", a.ranks},
              {"seed", seed},
              {"turn_timeout_ms", a.turn_timeout_ms},
              {"faults", faults_json(faults)},
              {"faults_not_fired", r.unfired_faults},
              {"outcomes", std::move(outcomes)},
              {"trace_lines", r.trace_lines},
              {"decisions", r.decisions},
              {"trace_hash", hex(r.trace_hash)},
              {"wall_ms", ms}};
}

// Adds the verdict of a run to its object: failure class, exit code, replay line.
void add_verdict(Json& j, const Scenario& s, sim::Failure failure, const std::string& replay) {
  j["failure"] = failure_key(failure);
  j["exit_code"] = sim::exit_code(failure);
  std::string_view expect = expect_name(s.on_simulator);
  j["expect"] = expect.empty() ? Json(nullptr) : Json(expect);
  j["replay"] = failure == sim::Failure::none ? Json(nullptr) : Json(replay);
  j["ok"] = failure == sim::Failure::none;
}

void print_outcomes(const sim::RunResult& r) {
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    std::cout << "rank " << i << ": ";
    switch (o.status) {
      case sim::RankOutcome::Status::ok:
        std::cout << "ok " << o.value;
        break;
      case sim::RankOutcome::Status::error:
        std::cout << "error " << o.kind << ": " << o.message;
        break;
      case sim::RankOutcome::Status::died:
        std::cout << "died: " << o.message;
        break;
    }
    std::cout << "\n";
  }
  for (const std::string& f : r.unfired_faults) std::cout << "fault never fired: " << f << "\n";
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

// How many seeds A..B holds, in decimal: 0..2^64-1 holds 2^64, one more than a uint64.
std::string seed_count(std::uint64_t first, std::uint64_t last) {
  std::uint64_t span = last - first;
  return span == std::numeric_limits<std::uint64_t>::max() ? "18446744073709551616"
                                                           : std::to_string(span + 1);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int cmd_run(const SimArgs& a, Json& j) {
  const Scenario& s = scenarios::scenario_for(a.scenario, a.ranks);
  auto faults = faults_for(a.faults, a.seed, a.ranks);
  // Made before the run: a path that cannot be written is refused before anything runs,
  // never after it in place of the run's own exit class; the file is replaced only by a
  // finished trace.
  std::optional<TraceFile> trace, second;  // second: --check-determinism's FILE.second
  if (!a.trace_file.empty()) trace.emplace(a.trace_file);
  if (trace && a.check_determinism && !trace->in_place()) second.emplace(a.trace_file + ".second");
  if (!a.json) {
    std::cout << "SEED=" << a.seed << "\n";
    std::cout << "scenario " << s.name << " on " << a.ranks << " simulated ranks: " << s.description
              << "\n";
    for (const auto& f : faults) std::cout << "fault " << f.str() << "\n";
  }
  std::cout.flush();
  auto start = std::chrono::steady_clock::now();
  sim::RunResult r = run_once(s, a, a.seed, faults);
  double ms = ms_since(start);
  j = run_json(s, a, a.seed, faults, r, ms);
  if (!a.json) {
    print_outcomes(r);
    std::cout << "trace: " << r.trace_lines << " lines, " << r.decisions
              << " scheduling decisions, hash " << hex(r.trace_hash) << " ("
              << static_cast<long>(ms) << " ms)\n";
  }
  if (trace) trace->write(r.trace, a.trace_format);
  sim::Failure failure = r.failure();
  if (a.check_determinism) {
    sim::RunResult again = run_once(s, a, a.seed, faults);
    bool same = again.trace_hash == r.trace_hash;
    j["determinism"] = {{"second_hash", hex(again.trace_hash)}, {"same", same}};
    if (!same) {
      failure = sim::Failure::determinism;
      if (!a.json) {
        std::cout << "DETERMINISM VIOLATION: the same seed gave hash " << hex(again.trace_hash)
                  << " on a second run\n";
      }
      if (second) second->write(again.trace, a.trace_format);
    } else if (!a.json) {
      std::cout << "determinism: a second run gave the same hash\n";
    }
  }
  std::string replay = replay_line(a, a.seed, faults);
  add_verdict(j, s, failure, replay);
  if (a.json) {
    std::cout << dump_json(j) << "\n";
  } else {
    std::cout << "result: " << sim::failure_name(failure);
    if (s.broken()) {
      std::cout << " (this scenario is broken on purpose; expected: " << expect_name(s.on_simulator)
                << ")";
    }
    std::cout << "\n";
    if (failure != sim::Failure::none) std::cout << "replay: " << replay << "\n";
  }
  std::cout.flush();
  return sim::exit_code(failure);
}

int cmd_explore(const SimArgs& a, Json& j) {
  const Scenario& s = scenarios::scenario_for(a.scenario, a.ranks);
  auto [first, last] = parse_seeds(a.seeds);
  // Refused before the first line, for every seed: a fault list that only some seeds'
  // draws make impossible is refused whole.
  check_random_clashes(a.faults, a.ranks);
  faults_for(a.faults, first, a.ranks);
  if (!a.json)
    std::cout << "exploring " << s.name << " on " << a.ranks << " ranks, seeds " << first << ".."
              << last << "\n";
  for (std::uint64_t seed = first;; ++seed) {
    auto faults = faults_for(a.faults, seed, a.ranks);
    auto start = std::chrono::steady_clock::now();
    sim::RunResult r = run_once(s, a, seed, faults);
    sim::Failure failure = r.failure();
    std::string replay = replay_line(a, seed, faults);
    if (a.json) {
      // One line per run; a failing run is the last.
      j = run_json(s, a, seed, faults, r, ms_since(start));
      add_verdict(j, s, failure, replay);
      std::cout << dump_json(j) << "\n";
      std::cout.flush();
      j = nullptr;  // printed: an error after this point gets a line of its own
    }
    if (failure != sim::Failure::none) {
      if (!a.json) {
        std::cout << "SEED=" << seed << " fails: " << sim::failure_name(failure) << "\n";
        print_outcomes(r);
        std::cout << "replay: " << replay << "\n";
      }
      return sim::exit_code(failure);
    }
    std::uint64_t done = seed - first + 1;
    if (!a.json && done % 25 == 0) {
      std::cout << "explored " << done << " of " << seed_count(first, last) << " seeds, all ok\n";
    }
    // A stdout that cannot take the progress (a closed pipe with SIGPIPE ignored) ends
    // the exploration, which would otherwise go on unseen, up to 2^64 seeds.
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
      throw Error(Errc::io, "cannot write to stdout");
    if (seed == last) break;
  }
  if (!a.json) std::cout << "no failure in seeds " << first << ".." << last << "\n";
  return 0;
}

int cmd_list() {
  for (const Scenario& s : scenarios::scenarios()) {
    std::cout << s.name << " (" << s.min_ranks << "-" << s.max_ranks << " ranks"
              << (s.broken() ? ", expect " + std::string(expect_name(s.on_simulator)) : "")
              << "): " << s.description << "\n";
  }
  return 0;
}

// "random" given more than once: every one would draw the same fault.
void refuse_repeated_random(const std::vector<std::string>& specs) {
  if (auto randoms = std::count(specs.begin(), specs.end(), "random"); randoms > 1) {
    throw Error(Errc::invalid_argument,
                "--fault random is given " + std::to_string(randoms) +
                    " times: each draws the same fault from the seed; give it once");
  }
}

}  // namespace

void check_random_clashes(const std::vector<std::string>& specs, int ranks) {
  if (std::count(specs.begin(), specs.end(), "random") == 0) return;
  // What is wrong whatever the draw is said first, as for any other fault list.
  refuse_repeated_random(specs);
  std::vector<sim::Fault> given;
  for (const std::string& spec : specs) {
    if (spec != "random") given.push_back(sim::Fault::parse(spec));
  }
  sim::check_faults(given, ranks);
  // A given fault clashes when check_faults (its rules, pairwise) refuses it beside one of
  // the faults a seed can draw.
  const std::vector<sim::Fault> drawable = sim::Fault::drawable(ranks);
  auto refused_beside = [ranks](const sim::Fault& f, const sim::Fault& d) {
    try {
      const sim::Fault both[] = {f, d};
      sim::check_faults(both, ranks);
      return false;
    } catch (const Error&) {
      return true;
    }
  };
  // Delays of one rank add up over every given one, not pairwise: the rank's last given delay
  // is named when the given ones plus a drawable delay pass 2^64 - 1.
  for (const sim::Fault& d : drawable) {
    if (d.kind != sim::Fault::Kind::delay) continue;
    std::vector<sim::Fault> all = given;
    all.push_back(d);
    try {
      sim::check_faults(all, ranks);
    } catch (const Error&) {
      auto last = std::find_if(given.rbegin(), given.rend(), [&](const sim::Fault& f) {
        return f.kind == sim::Fault::Kind::delay && f.rank == d.rank;
      });
      if (last == given.rend()) throw;  // (given passed alone, and a drawn delay is short)
      throw Error(Errc::invalid_argument,
                  "--fault random with " + last->str() +
                      ": some seeds draw a fault that cannot join it (a delay of rank " +
                      std::to_string(d.rank) +
                      ": the delays of one rank add up, past 2^64 - 1 decisions); explore with one "
                      "of them, or run one seed with both (sim run)");
    }
  }
  for (const sim::Fault& f : given) {
    bool clashes = std::any_of(drawable.begin(), drawable.end(),
                               [&](const sim::Fault& d) { return refused_beside(f, d); });
    if (clashes) {
      throw Error(Errc::invalid_argument,
                  "--fault random with " + f.str() +
                      ": some seeds draw a fault that cannot join it (" +
                      (f.kind == sim::Fault::Kind::crash
                           ? "a crash of rank " + std::to_string(f.rank) + ": a rank dies once"
                           : "a flip of what rank " + std::to_string(f.rank) +
                                 " receives at its collective " + std::to_string(f.at) +
                                 ": one flip per payload") +
                      "); explore with one of them, or run one seed with both (sim run)");
    }
  }
}

std::vector<sim::Fault> faults_for(const std::vector<std::string>& specs, std::uint64_t seed,
                                   int ranks) {
  refuse_repeated_random(specs);
  std::vector<sim::Fault> out;
  for (const std::string& spec : specs) {
    out.push_back(spec == "random" ? sim::Fault::drawn(seed, ranks) : sim::Fault::parse(spec));
  }
  sim::check_faults(out, ranks);  // Cluster::run's own check, before a command prints a line
  return out;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string_view failure_key(sim::Failure f) noexcept {
  switch (f) {
    case sim::Failure::none:
      return "none";
    case sim::Failure::check:
      return "check";
    case sim::Failure::mismatch:
      return "mismatch";
    case sim::Failure::deadlock:
      return "deadlock";
    case sim::Failure::peer_failure:
      return "peer_failure";
    case sim::Failure::determinism:
      return "determinism";
  }
  return "?";
}

Json rank_errors_json(const sim::RunResult& r) {
  Json out = Json::array();
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    if (o.status == sim::RankOutcome::Status::ok) continue;
    out.push_back(
        {{"rank", i},
         {"status", status_name(o.status)},
         {"kind", o.status == sim::RankOutcome::Status::died ? std::string("died") : o.kind},
         {"message", o.message}});
  }
  return out;
}

Json faults_json(const std::vector<sim::Fault>& faults) {
  Json out = Json::array();
  for (const sim::Fault& f : faults) out.push_back(f.str());
  return out;
}

sim::Failure failure_of(const Error& e) noexcept {
  switch (e.code()) {
    case Errc::comm_mismatch:
      return sim::Failure::mismatch;
    case Errc::comm_deadlock:
      return sim::Failure::deadlock;
    case Errc::comm_peer_failed:
    case Errc::comm_timeout:
      return sim::Failure::peer_failure;
    default:
      return sim::Failure::check;
  }
}

int exit_code_for(const std::exception& e) noexcept {
  const auto* error = dynamic_cast<const Error*>(&e);
  if (error == nullptr) return 1;
  sim::Failure failure = failure_of(*error);
  if (failure != sim::Failure::check || error->code() == Errc::scenario_check)
    return sim::exit_code(failure);
  return 2;
}

int json_error(Json& object, const std::exception& e, std::ostream& out) {
  const auto* error = dynamic_cast<const Error*>(&e);
  std::string_view kind = error != nullptr ? error->kind() : "internal";
  std::cerr << "hpref: error [" << kind << "]: " << e.what() << "\n";
  if (!object.is_object()) object = Json::object();
  int code = exit_code_for(e);
  object["ok"] = false;
  object["failure"] = code == 2          ? std::string_view("usage")
                      : error == nullptr ? std::string_view("internal")
                                         : failure_key(failure_of(*error));
  object["exit_code"] = code;
  object["error"] = {{"kind", kind}, {"message", e.what()}};
  out << dump_json(object) << "\n";
  out.flush();
  return code;
}

TraceFile::TraceFile(std::string path) : path_(std::move(path)), target_(path_) {
  struct stat st {};
  bool exists = ::stat(path_.c_str(), &st) == 0;  // through a symlink
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or pipe (/dev/stdout, /dev/full, a FIFO): written in place, never replaced.
    open_in_place();
    return;
  }
  if (exists && ::access(path_.c_str(), W_OK) != 0) fail("write");  // refused now, as before
  if (exists) {
    // A symlink is written through: the temporary file goes beside what it names.
    if (char* real = ::realpath(path_.c_str(), nullptr)) {
      target_ = real;
      std::free(real);
    }
    mode_ = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);  // read, then put back: a new trace gets what fopen would give
    ::umask(mask);
    mode_ = 0666 & ~mask;
    // A dangling symlink names the file to make (as a shell's `> link` makes it, through a
    // chain of links to the missing end): the trace goes there, and the links stay (the link
    // was replaced by a regular file until 2026-12-03).
    struct stat lst {};
    for (int hops = 0; hops < 40 && ::lstat(target_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
         ++hops) {
      std::string named(static_cast<std::size_t>(lst.st_size > 0 ? lst.st_size : 4096), '\0');
      ssize_t n = ::readlink(target_.c_str(), named.data(), named.size());
      if (n <= 0) break;
      named.resize(static_cast<std::size_t>(n));
      auto slash = target_.rfind('/');
      target_ = named[0] == '/' || slash == std::string::npos
                    ? named
                    : target_.substr(0, slash + 1) + named;
    }
  }
  std::string name = target_ + ".XXXXXX";
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    // A writable file in a directory that takes no new file: written in place, as before.
    if (exists && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      open_in_place();
      return;
    }
    fail("open");  // the directory is missing (or refuses, the file not being there)
  }
  temp_ = std::move(name);
  f_ = ::fdopen(fd, "w");
  if (f_ == nullptr) {
    int saved = errno;
    ::close(fd);
    ::unlink(temp_.c_str());
    temp_.clear();
    errno = saved;
    fail("open");
  }
}

void TraceFile::open_in_place() {
  f_ = std::fopen(path_.c_str(), "w");
  if (f_ == nullptr) fail("open");
}

TraceFile::~TraceFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void TraceFile::fail(const char* what) const {
  throw Error(Errc::io, "cannot " + std::string(what) + " trace file '" + path_ +
                            "': " + std::strerror(errno));
}

void TraceFile::write(const std::vector<std::string>& trace_lines, const std::string& format) {
  std::vector<std::string> chrome;
  if (format == "chrome") chrome.push_back(sim::chrome_trace(trace_lines));
  const std::vector<std::string>& lines = format == "chrome" ? chrome : trace_lines;
  std::FILE* f = std::exchange(f_, nullptr);  // closed below whatever happens
  auto close_and_fail = [&](const char* what) {
    int saved = errno;
    std::fclose(f);
    errno = saved;
    fail(what);
  };
  for (const std::string& line : lines) {
    if (std::fwrite(line.data(), 1, line.size(), f) != line.size() || std::fputc('\n', f) == EOF)
      close_and_fail("write");
  }
  if (std::fflush(f) != 0) close_and_fail("write");
  // mkstemp made it 0600: it takes the mode of the file it replaces, or a new file's.
  if (!temp_.empty() && ::fchmod(::fileno(f), mode_) != 0) close_and_fail("set the mode of");
  if (std::fclose(f) != 0) fail("close");
  if (temp_.empty()) return;  // written in place
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) fail("rename the temporary file onto");
  temp_.clear();
}

SimCommands add_sim_commands(CLI::App& app, SimArgs& a) {
  a.turn_timeout_ms = sim::Options{}.turn_timeout_ms;
  SimCommands c{};
  c.sim =
      app.add_subcommand("sim",
                         "The deterministic cluster simulator (SPEC 9.3): run, explore and list "
                         "scenarios. Exit codes: 0 ok, 1 check failed, 3 mismatch, 4 deadlock, "
                         "5 peer failure, 6 determinism violation");
  c.sim->require_subcommand(1);
  c.run =
      c.sim->add_subcommand("run",
                            "Run one scenario with one seed; print SEED=, each rank's outcome, the "
                            "trace hash, and on failure the replay line");
  c.explore = c.sim->add_subcommand(
      "explore", "Run seeds in order until one fails, then print its replay line");
  c.list = c.sim->add_subcommand("list", "List the registered scenarios");
  for (CLI::App* sub : {c.run, c.explore}) {
    sub->add_option("scenario", a.scenario, "Scenario name (hpref sim list)")->required();
    sub->add_option("--ranks", a.ranks, "Simulated ranks (1-64)")
        ->check(integer_of<int>())
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    sub->add_option("--fault", a.faults,
                    "Fault plan, repeatable: crash:R@K (rank R dies at its K-th call), "
                    "flip:R@K[:B] (flip byte B of "
                    "what R receives at its K-th operation), delay:R@K (R not chosen for K "
                    "decisions), or random "
                    "(drawn from the seed); default none");
    add_turn_timeout_option(*sub, a.turn_timeout_ms);
    sub->add_flag(
        "--json", a.json,
        sub == c.run
            ? "Print one JSON object (outcomes, trace hash, failure class, replay line) instead "
              "of text, whatever happens"
            : "Print one JSON object per seed run (JSON Lines, as sim run --json); a failing "
              "run is the last line");
  }
  c.run->add_option("--seed", a.seed, "Seed of the schedule, the data and drawn faults")
      ->check(integer_of<std::uint64_t>())
      ->capture_default_str();
  c.run
      ->add_option("--trace", a.trace_file,
                   "Write the trace (one line per operation) to this file, replacing it only once "
                   "the run has finished; default none")
      ->check(non_empty("file name"));
  c.run
      ->add_option(
          "--trace-format", a.trace_format,
          "How --trace is written: text (one line per operation) or chrome (Chrome "
          "trace-event JSON for Perfetto / chrome://tracing: one track per rank, one slice "
          "per operation, mismatches and deadlocks marked)")
      ->check(CLI::IsMember({"text", "chrome"}))
      ->capture_default_str();
  c.run->add_flag("--check-determinism", a.check_determinism,
                  "Run twice and compare trace hashes (exit 6 if they differ)");
  c.explore->add_option("--seeds", a.seeds, "Seeds to try, A..B")->capture_default_str();
  return c;
}

void add_turn_timeout_option(CLI::App& app, int& turn_timeout_ms) {
  app.add_option(
         "--turn-timeout-ms", turn_timeout_ms,
         "A simulated rank that holds the baton longer than this (a stopped or spinning rank) is "
         "killed and reported dead (peer failure)")
      ->check(integer_of<int>())
      ->check(CLI::Range(1, 24 * 3600 * 1000))
      ->capture_default_str();
}

int run_sim(const SimCommands& c, const SimArgs& a) {
  if (c.list->parsed()) return cmd_list();
  Json j;
  try {
    if (c.run->parsed() && c.run->count("--trace-format") > 0 && c.run->count("--trace") == 0) {
      throw Error(Errc::invalid_argument, "--trace-format " + a.trace_format +
                                              " goes with --trace (it says how the trace file "
                                              "is written)");
    }
    return c.explore->parsed() ? cmd_explore(a, j) : cmd_run(a, j);
  } catch (const std::exception& e) {
    if (!a.json) throw;
    return json_error(j, e, std::cout);
  }
}

}  // namespace hpref::cli
