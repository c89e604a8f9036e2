// The deterministic cluster simulator (SPEC 9.3): n forked rank processes over one
// Boost.Interprocess segment, exactly one running at a time. A monitor (the calling
// process) owns every piece of scheduling state; ranks only post requests and copy data
// while they hold the baton, so a rank killed at any instant cannot wedge the others.
// Every Communicator call is a scheduling point where the next runnable rank is
// runnable[next() % count] of a splitmix64 generator seeded with the run's seed: the same
// program and seed give the same schedule, results and trace hash on every machine.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/splitmix64.hpp"

namespace hpref::sim {

// A fault plan (SPEC 9.3), written "crash:R@K" (rank R dies by SIGKILL when it makes its
// K-th Communicator call, 1-based, holding the baton), "flip:R@K" or "flip:R@K:B" (byte B,
// or a byte drawn from the seed, of what rank R receives from its K-th operation is
// flipped) and "delay:R@K" (rank R is not chosen for K scheduling decisions while another
// rank can run).
struct Fault {
  enum class Kind { crash, flip, delay };
  Kind kind = Kind::crash;
  int rank = 0;
  std::uint64_t at = 1;
  std::int64_t byte = -1;
  // Error invalid_argument naming the text.
  static Fault parse(std::string_view spec);
  // A fault drawn from the seed for a run of `ranks` ranks ("--fault random"): any kind,
  // any rank, `at` in 1..kDrawnAtMost (a flip's byte left to the plan).
  static Fault drawn(std::uint64_t seed, int ranks);
  static constexpr std::uint64_t kDrawnAtMost = 8;
  // Every fault drawn() can give for `ranks` ranks.
  static std::vector<Fault> drawable(int ranks);
  std::string str() const;
};

struct Options {
  std::uint64_t seed = 1;
  std::vector<Fault> faults;
  std::string world_backend = "sim";
  // Shared segment size (virtual; pages are used as data is staged).
  std::size_t segment_bytes = std::size_t{1} << 30;  // 1 MiB to 16 TiB (invalid_argument)
  // A rank that holds the baton longer than this is killed and reported dead.
  int turn_timeout_ms = 120000;
  // Run the monitor and every rank on the CPU the caller is on (only one of them runs at
  // a time; a baton handed across CPUs costs a cross-CPU wake-up, ~10x a local switch on
  // VMs). The caller's affinity is restored afterwards.
  bool pin_to_one_cpu = true;
  // Test hook: called in the monitor once every rank process exists.
  std::function<void(std::span<const int> pids)> on_started;
  // Test hooks for windows a test cannot reach otherwise. on_turn_tick: called in the
  // monitor each time it has waited another 20 ms for the rank holding the baton (whose
  // rank it is given), before it looks whether that rank died. on_reporting: called in a
  // rank's process once its outcome is staged, just before it reports it to the monitor.
  // on_reported: called in a rank's process once it has reported its outcome to the
  // monitor, just before it exits.
  std::function<void(int rank)> on_turn_tick;
  std::function<void(int rank)> on_reporting;
  std::function<void(int rank)> on_reported;
  // A SIGINT or SIGTERM during run() kills the ranks and restores the caller's handlers.
  // false: the signal is then raised again at once, so the caller's handler (or the default
  // action) sees it as it would have. true: it is kept for take_interrupt() instead, and run()
  // returns or throws as the dead ranks make it; for a caller that must do something first
  // (Python runs its after-fork hooks, which would take the KeyboardInterrupt themselves).
  // A signal whose action is the default is always raised again at once: the process ends.
  bool keep_interrupt = false;
  // false: RunResult::trace is left empty; its hash and line count are the same. The monitor
  // then does not grow by a line (~100 bytes) per launch over a long run.
  bool keep_trace = true;
};

// Error invalid_argument naming the fault(s): a fault of a rank outside 0..ranks-1, two
// crashes of one rank, or two flips of one payload (same rank and operation). Cluster::run
// calls it; a command can call it first, before it prints anything.
void check_faults(std::span<const Fault> faults, int ranks);

// The signal a run() with Options::keep_interrupt kept (see there), 0 if none; cleared.
int take_interrupt() noexcept;

struct RankOutcome {
  enum class Status { ok, error, died };
  Status status = Status::ok;
  std::string value;         // ok: what the rank function returned
  std::string kind;          // error: errc_name(code) ("comm_deadlock", ...), or "exception"
  std::string message;       // error: what(); died: how
  std::optional<Errc> code;  // error: the hpref::Error's code; none for another exception
};

std::ostream& operator<<(std::ostream& os, RankOutcome::Status s);

// Failure classes, each with its own exit code (TigerBeetle's idea).
enum class Failure { none, check, mismatch, deadlock, peer_failure, determinism };
std::string_view failure_name(Failure f) noexcept;
std::ostream& operator<<(std::ostream& os, Failure f);
int exit_code(Failure f) noexcept;  // 0, 1, 3, 4, 5, 6 (2 is bad usage)

struct RunResult {
  std::vector<RankOutcome> outcomes;
  std::vector<std::string> trace;  // one line per operation, in schedule order (keep_trace)
  std::uint64_t trace_hash = 0;    // FNV-1a 64 over the trace lines
  std::uint64_t trace_lines = 0;   // how many (kept or not)
  std::uint64_t decisions = 0;     // scheduling decisions taken
  // Faults of Options::faults that never took effect, one line each with why: "delay:1@3:
  // rank 1 was never passed over while another rank was ready", "crash:0@9: rank 0 never
  // reached call 9", a flip past the received payload.
  std::vector<std::string> unfired_faults;
  // mismatch > deadlock > a buffer the simulator caught (comm_buffer_mutated,
  // comm_memory_space: a check) > peer failure > any other error (a check); none if all ok.
  Failure failure() const;
};

using RankFn = std::function<std::string(Communicator&)>;

class Cluster {
 public:
  // Runs fn on `ranks` forked processes (1..64). Never hangs on a deadlock or a dead
  // rank; the segment is removed on every exit path.
  static RunResult run(int ranks, const Options& options, const RankFn& fn);
};

// The least a scheduling decision costs on this machine, for benchmarks to measure in the
// same run: a baton passed `decisions` times among `ranks` bare forked processes, pinned to
// one CPU and sliced as a cluster's ranks are, the next holder drawn as the scheduler draws
// it (all runnable). Microseconds per decision, the least of three runs: through a monitor
// process, as Cluster::run hands it (holder -> monitor -> next holder), and handed directly
// (holder -> next holder, as a schedule kept in shared state could; the draw picks the
// holder itself 1 time in `ranks`, a pass without a switch). Error comm_resource if a process
// cannot be made or no pass is made for 10 s.
struct HandoffFloor {
  double via_monitor_us = 0;
  double direct_us = 0;
};
HandoffFloor measure_handoff_floor(int ranks, int decisions);

// The trace hash: FNV-1a 64 over the lines, each followed by '\n'.
std::uint64_t trace_hash(std::span<const std::string> lines) noexcept;

// Names of this simulator's segments left in /dev/shm: with creator > 0, those process
// `creator` made; otherwise those whose creating process no longer exists (another live
// run's segment is not a leftover). Segment names are removed before any rank starts, so
// tests check this is empty.
std::vector<std::string> leftover_segments(int creator = 0);

}  // namespace hpref::sim
