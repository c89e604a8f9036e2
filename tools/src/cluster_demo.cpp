// The data step behind `hpref demo` (see cluster_demo.hpp).
#include "cluster_demo.hpp"

#include <sys/mman.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <sstream>

#include "hpref/cli/json_value.hpp"
#include "hpref/cli/text_option.hpp"
#include "hpref/codec.hpp"
#include "hpref/error.hpp"
#include "hpref/pickle.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/scenarios/demo.hpp"
#include "hpref/scenarios/harness.hpp"
#include "hpref/sim/cluster.hpp"
#include "sim_command.hpp"

namespace hpref::cli {
namespace {

// ---- --dump DIR: what hpref's transports produced on each rank ------------------------------
//
// DIR/step<S>/rank<R>.items.hpb1     the payload items the exchange returned (data-plane
//                                    members only), in its order, keys in the SampleKey
//                                    object pattern (kDefaultKeyClass)
// DIR/step<S>/rank<R>.batch.hpb1     one item ("batch", the model-parallel batch the rank
//                                    ends the step with: tokens, doc_lens, images)
// DIR/step<S>/rank<R>.dispatch.hpb1  four items: window_forward, window_backward,
//                                    prefix_forward, prefix_backward (this rank's shard)
// DIR/step<S>/plan.hpb1              one item ("plan", the plan the planner broadcast:
//                                    ([(key, constructor rank)], imbalance before, after))
// DIR/manifest.json                  the run and every file above; written last, by rank 0
//                                    after the closing collectives (every rank has written
//                                    every step then): no manifest, no complete dump.
// Every file goes to a ".part" name first and is renamed when complete.
// DIR/manifest.json: the run's parameters, the data-plane ranks and every file, per step.
void write_dump_manifest(const DemoArgs& a, int cp, std::span<const int> data_plane) {
  Json steps = Json::array();
  for (int step = 0; step < a.steps; ++step) {
    Json ranks = Json::array();
    for (int r = 0; r < a.ranks; ++r) {
      bool member = std::find(data_plane.begin(), data_plane.end(), r) != data_plane.end();
      std::string dir = "step" + std::to_string(step) + "/";
      ranks.push_back(
          {{"rank", r},
           {"items", member ? Json(dir + scenarios::demo_rank_file(r, "items")) : Json(nullptr)},
           {"batch", dir + scenarios::demo_rank_file(r, "batch")},
           {"dispatch", dir + scenarios::demo_rank_file(r, "dispatch")}});
    }
    steps.push_back(
        {{"step", step}, {"plan", "step" + std::to_string(step) + "/plan.hpb1"}, {"ranks", ranks}});
  }
  Json j = {{"format", "hpref demo --dump 1"},
            {"backend", a.backend},
            {"seed", a.seed},
            {"ranks", a.ranks},
            {"dp", a.dp},
            {"cp", cp},
            {"steps", a.steps},
            {"window", a.window},
            {"ratio", a.ratio},
            {"data_plane", std::vector<int>(data_plane.begin(), data_plane.end())},
            {"key_class", std::string(kDefaultKeyClass)},
            {"files", steps}};
  std::string text = dump_json(j) + "\n";
  scenarios::write_demo_file(std::filesystem::path(a.dump) / "manifest.json",
                             std::span<const std::uint8_t>(
                                 reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// Checks --dump's directory and makes it and its step folders (Error invalid_argument or io
// naming it); removes the manifest of an earlier dump there, so that a failing run leaves
// none. Every MPI rank calls it (create_directories accepts a folder another rank made)
// before its first collective, so no rank can remove the manifest rank 0 writes after the
// closing ones.
void prepare_dump(const DemoArgs& a) {
  if (a.dump.empty()) return;
  namespace fs = std::filesystem;
  fs::path dir(a.dump);
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw Error(Errc::invalid_argument, "--dump '" + a.dump + "' exists and is not a directory");
  }
  for (int step = -1; step < a.steps; ++step) {
    fs::path p = step < 0 ? dir : scenarios::demo_step_dir(a.dump, step);
    fs::create_directories(p, ec);
    if (ec || !fs::is_directory(p)) {
      throw Error(Errc::io, "--dump '" + a.dump + "': cannot create the directory '" + p.string() +
                                "': " + (ec ? ec.message() : std::string("not a directory")));
    }
  }
  fs::remove(dir / "manifest.json", ec);
  if (ec)
    throw Error(Errc::io,
                "--dump '" + a.dump + "': cannot remove the old manifest.json: " + ec.message());
}

using Progress = scenarios::DemoProgress;

struct Config {
  DemoArgs args;
  scenarios::DemoConfig run;  // what each rank runs
};

// How a run ended, for the report.
struct Outcome {
  Progress progress;
  std::optional<std::uint64_t> data;        // the data checksum when every step completed
  std::optional<std::uint64_t> trace_hash;  // the simulator's
  sim::Failure failure = sim::Failure::none;
  Json rank_errors = Json::array();  // [{"rank", "status", "kind", "message"}]
  std::vector<sim::Fault> faults;
  Json faults_not_fired = Json::array();
  std::string replay;  // the command that reproduces a failure (simulator)
  double seconds = 0;
};

// A completed run's summary is its closing totals; one that failed part way has the
// progress of the steps that completed.
void settle(Outcome& o, const Progress& progress, const std::string* value, int steps) {
  o.progress = progress;
  if (value == nullptr) return;
  scenarios::DemoResult f = scenarios::read_demo_result(*value, steps);
  o.progress = f.totals;
  o.data = f.data;
}

Json report_json(const DemoArgs& a, const Config& cfg, const Outcome& o) {
  const Progress& p = o.progress;
  double n = p.steps > 0 ? static_cast<double>(p.steps) : 1.0;
  return Json{{"seed", a.seed},
              {"backend", a.backend},
              {"ranks", a.ranks},
              {"dp", a.dp},
              {"cp", cfg.run.cp},
              {"steps", a.steps},
              {"steps_completed", p.steps},
              {"samples", p.samples},
              {"bytes_exchanged", p.bytes},
              {"imbalance_before", p.before / n},
              {"imbalance_after", p.after / n},
              {"checks_passed", p.passed},
              {"checks_failed", p.failed},
              {"data_checksum", o.data ? Json(hex(*o.data)) : Json(nullptr)},
              {"trace_hash", o.trace_hash ? Json(hex(*o.trace_hash)) : Json(nullptr)},
              {"wall_seconds", o.seconds},
              {"faults", faults_json(o.faults)},
              {"faults_not_fired", o.faults_not_fired},
              {"failure", failure_key(o.failure)},
              {"exit_code", sim::exit_code(o.failure)},
              {"rank_errors", o.rank_errors},
              {"replay", o.failure == sim::Failure::none || o.replay.empty() ? Json(nullptr)
                                                                             : Json(o.replay)},
              {"ok", o.failure == sim::Failure::none}};
}

// --dump's manifest when the run wrote it ("" otherwise: no dump, or an incomplete one).
std::string dump_manifest(const DemoArgs& a) {
  if (a.dump.empty()) return "";
  std::filesystem::path manifest = std::filesystem::path(a.dump) / "manifest.json";
  std::error_code ec;
  return std::filesystem::is_regular_file(manifest, ec) ? manifest.string() : "";
}

// The table (or the JSON object); returns the exit status.
int report(const DemoArgs& a, const Config& cfg, const Outcome& o, std::ostream& out) {
  int code = sim::exit_code(o.failure);
  if (a.json) {
    Json j = report_json(a, cfg, o);
    if (!a.dump.empty()) {  // only with --dump: the default object is unchanged
      std::string manifest = dump_manifest(a);
      j["dump"] = manifest.empty() ? Json(nullptr) : Json(manifest);
    }
    out << dump_json(j) << "\n";
    out.flush();
    return code;
  }
  const Progress& p = o.progress;
  double n = p.steps > 0 ? static_cast<double>(p.steps) : 1.0;
  char line[160];
  auto row = [&](const char* name, const std::string& value) {
    std::snprintf(line, sizeof line, "| %-22s | %-26s |\n", name, value.c_str());
    out << line;
  };
  std::string rule = "+" + std::string(24, '-') + "+" + std::string(28, '-') + "+\n";
  char imb[64], wall[32];
  std::snprintf(imb, sizeof imb, "%.3f -> %.3f", p.before / n, p.after / n);
  std::snprintf(wall, sizeof wall, "%.2f s", o.seconds);
  out << rule;
  row("steps", p.steps == a.steps
                   ? std::to_string(a.steps)
                   : std::to_string(p.steps) + " of " + std::to_string(a.steps) + " completed");
  row("samples", std::to_string(p.samples));
  row("bytes exchanged", std::to_string(p.bytes));
  row("token imbalance", std::string(imb) + " (max/mean)");
  row("checks", std::to_string(p.passed) + " passed, " + std::to_string(p.failed) + " failed");
  row("data checksum", o.data ? hex(*o.data) : std::string("none (not every step ran)"));
  row("trace hash", o.trace_hash ? hex(*o.trace_hash) : std::string("none (simulator only)"));
  row("wall time", wall);
  out << rule;
  if (!a.dump.empty()) {
    std::string manifest = dump_manifest(a);
    out << "dump: "
        << (manifest.empty()
                ? a.dump + " is incomplete (no manifest.json: not every step completed)"
                : manifest)
        << "\n";
  }
  if (o.failure == sim::Failure::none) {
    out << "every check passed\n";
  } else {
    out << "result: " << sim::failure_name(o.failure) << "\n";
    if (!o.replay.empty()) out << "replay: " << o.replay << "\n";
  }
  out.flush();
  return code;
}

void header(const DemoArgs& a, const Config& cfg, const std::string& what, std::ostream& out) {
  if (a.json) return;
  out << "SEED=" << a.seed << "\n"
      << "hpref demo: " << a.ranks << " " << what << ", mesh dp=" << a.dp << " x cp=" << cfg.run.cp
      << ", " << a.steps << " steps, window " << a.window << ", ratio " << a.ratio << "\n";
  out.flush();
}

// `ranks_given`: whether --ranks was given (else the count is mpirun's), for the messages.
Config configure(DemoArgs a, bool ranks_given = true) {
  if (a.ranks < 1 || a.ranks > 64) {
    throw Error(Errc::invalid_argument,
                "the demo runs on 1 to 64 ranks (--ranks, or the MPI job's size), got " +
                    std::to_string(a.ranks));
  }
  // One message per option, naming the one that is wrong.
  auto at_least_1 = [](const char* option, int value) {
    if (value < 1) {
      throw Error(Errc::invalid_argument,
                  std::string(option) + " must be at least 1, got " + std::to_string(value));
    }
  };
  at_least_1("--dp", a.dp);
  if (a.ranks % a.dp != 0) {
    throw Error(Errc::invalid_argument,
                "--dp " + std::to_string(a.dp) + " must divide " +
                    (ranks_given ? "--ranks " + std::to_string(a.ranks)
                                 : "the " + std::to_string(a.ranks) + " ranks mpirun started"));
  }
  at_least_1("--steps", a.steps);
  at_least_1("--window", a.window);
  if (a.ratio != 1 && a.ratio != 2) {
    throw Error(Errc::invalid_argument, "--ratio must be 1 or 2, got " + std::to_string(a.ratio));
  }
  prepare_dump(a);
  Config cfg{a, {}};
  scenarios::DemoConfig& run = cfg.run;
  run.dp = a.dp;
  run.cp = a.ranks / a.dp;
  run.steps = a.steps;
  run.seed = a.seed;
  run.window = a.window;
  run.ratio = a.ratio;
  run.print_steps = !a.json;
  run.dump = a.dump;
  if (!a.dump.empty()) {
    run.dump_finished = [a, cp = run.cp](std::span<const int> data_plane) {
      write_dump_manifest(a, cp, data_plane);
    };
  }
  return cfg;
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A Progress in anonymous shared memory, mapped before the ranks are forked so that what
// rank 0 writes in its process is read here.
class SharedProgress {
 public:
  SharedProgress() {
    void* p =
        mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(Errc::comm_resource,
                  std::string("cannot map the demo's progress page: ") + std::strerror(errno));
    }
    p_ = new (p) Progress{};
  }
  ~SharedProgress() { munmap(p_, sizeof(Progress)); }
  SharedProgress(const SharedProgress&) = delete;
  SharedProgress& operator=(const SharedProgress&) = delete;
  Progress* get() const { return p_; }

 private:
  Progress* p_ = nullptr;
};

std::string demo_replay(const DemoArgs& a, const std::vector<sim::Fault>& faults) {
  std::string line = "hpref demo --ranks " + std::to_string(a.ranks) + " --dp " +
                     std::to_string(a.dp) + " --steps " + std::to_string(a.steps) + " --seed " +
                     std::to_string(a.seed) + " --window " + std::to_string(a.window) +
                     " --ratio " + std::to_string(a.ratio);
  if (a.turn_timeout_ms != sim::Options{}.turn_timeout_ms) {
    line += " --turn-timeout-ms " + std::to_string(a.turn_timeout_ms);
  }
  for (const sim::Fault& f : faults) line += " --fault " + f.str();
  return line;
}

int run_on_simulator(DemoArgs a, std::ostream& out) {
  if (a.ranks == 0) a.ranks = 8;
  Config cfg = configure(a);
  Outcome o;
  o.faults = faults_for(a.faults, a.seed, a.ranks);
  header(a, cfg, "simulated ranks", out);
  if (!a.json) {
    for (const auto& f : o.faults) out << "fault " << f.str() << "\n";
  }
  out.flush();
  std::fflush(stdout);
  SharedProgress progress;
  cfg.run.progress = progress.get();
  auto start = std::chrono::steady_clock::now();
  sim::Options options;
  options.seed = a.seed;
  options.faults = o.faults;
  options.turn_timeout_ms = a.turn_timeout_ms;
  options.keep_trace = false;  // the demo shows the trace hash only
  sim::RunResult r = sim::Cluster::run(
      a.ranks, options, [&](Communicator& c) { return scenarios::run_demo_rank(c, cfg.run); });
  o.seconds = since(start);
  // Rank errors: with the table on stdout, to stderr under --json (and into the object).
  std::ostream& errors = a.json ? std::cerr : out;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& ro = r.outcomes[i];
    if (ro.status != sim::RankOutcome::Status::ok) {
      errors << "rank " << i << " did not finish: " << (ro.kind.empty() ? "" : ro.kind + ": ")
             << ro.message << "\n";
    }
  }
  for (const std::string& f : r.unfired_faults) {
    errors << "fault never fired: " << f << "\n";
    o.faults_not_fired.push_back(f);
  }
  o.rank_errors = rank_errors_json(r);
  o.trace_hash = r.trace_hash;
  o.failure = r.failure();
  settle(o, *progress.get(), o.failure == sim::Failure::none ? &r.outcomes[0].value : nullptr,
         a.steps);
  if (o.failure == sim::Failure::none && (!o.data || o.progress.failed > 0))
    o.failure = sim::Failure::check;
  o.replay = demo_replay(a, o.faults);
  if (a.json && o.failure != sim::Failure::none) std::cerr << "replay: " << o.replay << "\n";
  return report(a, cfg, o, out);
}

// Under mpirun: every rank runs the step; rank 0 prints.
// Refuses a world of one rank that the mesh cannot use: hpref started without mpirun.
void check_world(const DemoArgs& a, int size) {
  if (size != 1 || (a.ranks <= 1 && a.dp <= 1)) return;
  int n = a.ranks > 1 ? a.ranks : 4 * a.dp;
  throw Error(
      Errc::invalid_argument,
      "--backend " + a.backend +
          ": the MPI world has one rank (was hpref started without mpirun?), but " +
          (a.ranks > 1
               ? "--ranks " + std::to_string(a.ranks) + " asks for " + std::to_string(a.ranks)
               : "--dp " + std::to_string(a.dp) + " needs at least " + std::to_string(a.dp)) +
          "; launch the ranks with mpirun: mpirun -np " + std::to_string(n) +
          " hpref demo --backend " + a.backend);
}

// The configuration checks of a run under mpirun (Error invalid_argument).
Config configure_device(DemoArgs& a, int size) {
  bool ranks_given = a.ranks != 0;
  if (!ranks_given) a.ranks = size;
  if (a.ranks != size) {
    throw Error(Errc::invalid_argument, "--ranks " + std::to_string(a.ranks) +
                                            " but mpirun started " + std::to_string(size) +
                                            " ranks");
  }
  if (!a.faults.empty())
    throw Error(Errc::invalid_argument, "--fault plans are the simulator's (--backend sim)");
  if (a.turn_timeout_ms != sim::Options{}.turn_timeout_ms) {
    throw Error(Errc::invalid_argument,
                "--turn-timeout-ms " + std::to_string(a.turn_timeout_ms) +
                    " is the simulator's (--backend sim); under mpirun use --timeout-ms");
  }
  return configure(a, ranks_given);
}
// Under mpirun: every rank runs the step; rank 0 prints.
int run_on_device(DemoArgs a, std::ostream& out) {
  scenarios::WorldOptions options;
  options.timeout_ms = a.timeout_ms;
#ifndef HPREF_CLI_HAVE_NCCL
  // A build without NCCL says so first, not "launch with mpirun" (check_world): opening
  // the world it lacks is the harness's Error invalid_argument naming HPREF_WITH_NCCL.
  if (a.backend == "nccl") scenarios::open_world("nccl", options);
#endif
  auto host = scenarios::open_world("mpi", options);
  Communicator* comm = host->local()[0];
  std::ostringstream discard;
  std::ostream& print = comm->rank() == 0 ? out : discard;
  try {
    check_world(a, comm->size());
  } catch (const Error& e) {
    if (!a.json) throw;
    Json j = {{"backend", a.backend}, {"seed", a.seed}};
    return json_error(j, e, print);
  }
  std::unique_ptr<scenarios::World> accel;
  if (a.backend == "nccl") {
    accel = scenarios::open_world("nccl", options, host.get());
    comm = accel->local()[0];
  }
  Config cfg;
  try {
    cfg = configure_device(a, comm->size());
  } catch (const Error& e) {
    if (!a.json) throw;
    Json j = {{"backend", a.backend}, {"seed", a.seed}};
    return json_error(j, e, print);
  }
  if (accel) cfg.run.device = accel->device();
  Progress progress;  // this process's own: every rank keeps the world's counts
  cfg.run.progress = &progress;
  header(a, cfg, a.backend == "nccl" ? "NCCL ranks (one GPU each)" : "MPI ranks", print);
  auto start = std::chrono::steady_clock::now();
  Outcome o;
  std::optional<std::string> value;
  try {
    value = scenarios::run_demo_rank(*comm, cfg.run);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d did not finish: %s: %s\n", comm->rank(),
                 std::string(e.kind()).c_str(), e.what());
    std::fflush(stderr);
    o.failure = failure_of(e);
    o.rank_errors.push_back(
        {{"rank", comm->rank()}, {"status", "error"}, {"kind", e.kind()}, {"message", e.what()}});
  }
  o.seconds = since(start);
  settle(o, progress, value ? &*value : nullptr, a.steps);
  if (o.failure == sim::Failure::none && (!o.data || o.progress.failed > 0))
    o.failure = sim::Failure::check;
  int code = report(a, cfg, o, print);
  // A timed-out request can never complete: end the whole job with this rank's class.
  host->end_if_failed(code);
  return code;
}

int run_demo(const DemoArgs& a, std::ostream& out) {
  if (a.timeout_ms < 1) {
    throw Error(Errc::invalid_argument,
                "--timeout-ms must be positive, got " + std::to_string(a.timeout_ms));
  }
  if (a.backend == "sim" && a.timeout_ms != DemoArgs{}.timeout_ms) {
    throw Error(Errc::invalid_argument,
                "--timeout-ms " + std::to_string(a.timeout_ms) +
                    " is the deadline under mpirun (--backend mpi or nccl); the simulator's is "
                    "--turn-timeout-ms");
  }
  if (a.backend == "sim") return run_on_simulator(a, out);
  if (a.backend == "mpi" || a.backend == "nccl") return run_on_device(a, out);
  throw Error(Errc::invalid_argument,
              "--backend must be sim, mpi or nccl, got '" + a.backend + "'");
}

}  // namespace

int run_cluster_demo(const DemoArgs& a, std::ostream& out) {
  if (!a.json) return run_demo(a, out);
  // --json: exactly one object on `out`, whatever happens.
  Json j = {{"seed", a.seed}, {"backend", a.backend}};
  try {
    return run_demo(a, out);
  } catch (const std::exception& e) {
    return json_error(j, e, out);
  }
}

void add_demo_sim_options(CLI::App& demo, DemoArgs& a) {
  a.turn_timeout_ms = sim::Options{}.turn_timeout_ms;
  add_turn_timeout_option(demo, a.turn_timeout_ms);
  demo.add_option("--fault", a.faults,
                  "A simulator fault plan, repeatable (see hpref sim run --help); default none");
  demo.add_flag("--json", a.json,
                "Print one JSON object whatever happens: the summary (steps "
                "completed, checks, checksums), the failure "
                "class and exit code, each rank's error, the fault plan, the "
                "faults that never fired and the replay line");
  CLI::Option* dump =
      demo.add_option("--dump", a.dump,
                      "Write what hpref's transports produced on every rank, per step, as HPB1 "
                      "segments of the C++ encoder: "
                      "DIR/step<S>/rank<R>.items.hpb1 (the received payload items, in the "
                      "exchange's order; data-plane ranks), "
                      "rank<R>.batch.hpb1 (one item: the model-parallel batch), "
                      "rank<R>.dispatch.hpb1 (the four dispatch results), "
                      "plan.hpb1 (the broadcast plan), then DIR/manifest.json once every rank "
                      "wrote every step. DIR is created; "
                      "under mpirun every rank writes its own files (a directory all ranks see)");
  dump->type_name("DIR")->check(non_empty("directory name"));
  CLI::Option* codec = demo.add_flag(
      "--codec", a.codec,
      "Instead: the codec demonstration (encode, inspect, decode one segment); takes --seed "
      "only");
  // Every option of the cluster run is refused beside --codec, never ignored.
  for (CLI::Option* other : demo.get_options()) {
    if (other != codec && !other->check_name("--seed") && !other->check_name("--help"))
      codec->excludes(other);
  }
}

}  // namespace hpref::cli
