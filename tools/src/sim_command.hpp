// `hpref sim`: run a registered scenario on the simulator, explore seeds until one fails,
// list the scenarios. Exit codes: 0 ok, 1 check failed, 2 bad usage, 3 mismatch,
// 4 deadlock, 5 peer failure, 6 determinism violation. With --json, `run` prints one JSON
// object and `explore` one per seed it runs (JSON Lines, the last one the failing run).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "hpref/cli/json_value.hpp"

namespace hpref {
class Error;
}
namespace hpref::sim {
struct Fault;
struct RunResult;
enum class Failure;
}  // namespace hpref::sim

namespace hpref::cli {

struct SimArgs {
  std::string scenario;
  int ranks = 4;
  std::uint64_t seed = 1;
  std::string seeds = "1..100";
  std::string trace_file;
  std::string trace_format = "text";  // text (one line per operation) or chrome (JSON)
  std::vector<std::string> faults;
  bool check_determinism = false;
  bool json = false;
  int turn_timeout_ms = 120000;  // the simulator's Options::turn_timeout_ms (add_sim_commands)
};

struct SimCommands {
  CLI::App* sim;
  CLI::App* run;
  CLI::App* explore;
  CLI::App* list;
};

SimCommands add_sim_commands(CLI::App& app, SimArgs& args);
int run_sim(const SimCommands& commands, const SimArgs& args);

// The faults of --fault specs: "random" (at most once: each would draw the same fault) is
// drawn from the seed for `ranks` ranks, anything else parsed (Error invalid_argument naming
// a bad spec); then sim::check_faults. Shared with `hpref demo`.
std::vector<sim::Fault> faults_for(const std::vector<std::string>& specs, std::uint64_t seed,
                                   int ranks);
// For sim explore (many seeds): Error invalid_argument for "random" beside a crash or flip
// fault that some seed's draw would clash with (check_faults: a rank dies once, one flip
// per payload), so no seed is refused halfway through an exploration.
void check_random_clashes(const std::vector<std::string>& specs, int ranks);
// Sixteen lowercase hex digits.
std::string hex(std::uint64_t v);

// Shared with `hpref demo`:
// --turn-timeout-ms (the simulator's Options::turn_timeout_ms, default shown in --help).
void add_turn_timeout_option(CLI::App& app, int& turn_timeout_ms);
// The failure class as a JSON key: none, check, mismatch, deadlock, peer_failure,
// determinism.
std::string_view failure_key(sim::Failure f) noexcept;
// [{"rank", "status", "kind", "message"}] of every rank that did not finish.
Json rank_errors_json(const sim::RunResult& r);
// The faults as their specs ("crash:3@12").
Json faults_json(const std::vector<sim::Fault>& faults);
// The failure class of an error a rank raised during a run off the simulator, by its kind:
// mismatch, deadlock, peer failure (a timeout too), else a failed check.
sim::Failure failure_of(const Error& e) noexcept;
// The exit status of every subcommand for the error that ended it: an error of a rank's
// communication by its class (3 mismatch, 4 deadlock, 5 peer failure or timeout), a
// scenario's failed check 1, any other hpref::Error (bad usage or input) 2, any other
// exception 1 (internal).
int exit_code_for(const std::exception& e) noexcept;
// The JSON object of an error that ended a command before or after its run:
// {"ok": false, "failure": "usage" (exit 2), "internal" (exit 1) or the class,
// "exit_code": exit_code_for(e), "error": {"kind", "message"}} on `out`, the error on
// stderr too; returns the exit code.
int json_error(Json& object, const std::exception& e, std::ostream& out);
// The --trace file. Made before the run, so that a path that cannot be written is refused
// before anything runs: an existing file must be writable, and a temporary file beside the
// path (beside what a symlink names) is created then. write() (once) writes the lines, one
// line each (format "text") or as Chrome trace-event JSON (format "chrome",
// hpref/sim/chrome_trace.hpp), gives it the replaced file's mode (a new file's: 0666 less
// the umask), closes it and renames it onto the path. A run that is refused or fails before
// write() leaves the path as it was (the destructor removes the temporary file; a process
// killed by a signal leaves it, as path.XXXXXX). Written in place instead (in_place()): a
// path that exists and is not a regular file (a device, a pipe), and a writable file in a
// directory that takes no new file. Error io naming the path and the reason when it cannot
// be opened, written, flushed, closed or renamed (`--trace /dev/full`).
class TraceFile {
 public:
  explicit TraceFile(std::string path);
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  void write(const std::vector<std::string>& lines, const std::string& format = "text");
  bool in_place() const noexcept { return temp_.empty(); }

 private:
  [[noreturn]] void fail(const char* what) const;
  void open_in_place();
  std::string path_;
  std::string target_;  // what is replaced: path_, or the file a symlink at path_ names
  std::string temp_;    // the file written; empty once renamed (or when written in place)
  mode_t mode_ = 0644;  // the mode it gets
  std::FILE* f_ = nullptr;
};

}  // namespace hpref::cli
