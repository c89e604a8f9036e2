// Cluster::run: the segment, the rank processes, cleanup on every exit path; failure
// classes.
#include "hpref/sim/cluster.hpp"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <vector>

#include "cpu.hpp"
#include "faults.hpp"
#include "rank_comm.hpp"
#include "scheduler.hpp"

namespace hpref::sim {
namespace {

namespace bip = boost::interprocess;
constexpr const char* kPrefix = "hpref-sim-";
constexpr std::size_t kMinSegmentBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxSegmentBytes = std::size_t{1} << 44;

// State the interrupt handler needs (async-signal-safe: plain arrays).
pid_t g_children[detail::kMaxRanks];
std::atomic<int> g_child_count{0};
struct sigaction g_old_int, g_old_term, g_old_chld;
std::atomic<bool> g_keep_interrupt{false};
std::atomic<int> g_kept_signal{0};

void on_interrupt(int sig) {
  int n = g_child_count.load();
  for (int i = 0; i < n; ++i) kill(g_children[i], SIGKILL);
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  const struct sigaction& old = sig == SIGINT ? g_old_int : g_old_term;
  if (g_keep_interrupt.load() && old.sa_handler != SIG_DFL) {
    g_kept_signal.store(sig);  // Options::keep_interrupt: the caller raises it when it can
  } else {
    raise(sig);
  }
}

// The segment, its name removed whether or not mapping it succeeds (a mapping the address
// space limit refused left the name in /dev/shm), Boost's refusal said in our words.
bip::managed_shared_memory create_segment(const std::string& name, std::size_t bytes) {
  try {
    bip::managed_shared_memory segment(bip::create_only, name.c_str(), bytes);
    bip::shared_memory_object::remove(name.c_str());
    return segment;
  } catch (const bip::interprocess_exception& e) {
    bip::shared_memory_object::remove(name.c_str());
    throw Error(Errc::comm_resource, "the simulator cannot make its shared memory segment of " +
                                         std::to_string(bytes) +
                                         " bytes (Options::segment_bytes): " + e.what());
  }
}

// Reaps the ranks however run() ends. The segment's name is removed as soon as it is mapped:
// the ranks inherit the mapping through fork() and nobody opens it by name, so not even a
// SIGKILL of this process can leave it in /dev/shm (SPEC 9.3); the memory goes with the
// last process that maps it.
class Session {
 public:
  Session(const std::string& name, std::size_t bytes, bool keep_interrupt)
      : name_(name), segment_(create_segment(name, bytes)) {
    g_keep_interrupt.store(keep_interrupt);
    // A caller that ignores SIGCHLD (or sets SA_NOCLDWAIT) has its children reaped by the
    // kernel: waitpid then finds no rank, and a death would be noticed only at the turn
    // timeout. The default action (no signal, the zombie kept for waitpid) for the run's
    // length; the ranks get the caller's back (rank_main).
    sigaction(SIGCHLD, nullptr, &g_old_chld);
    if (g_old_chld.sa_handler == SIG_IGN || (g_old_chld.sa_flags & SA_NOCLDWAIT) != 0) {
      struct sigaction chld {};
      chld.sa_handler = SIG_DFL;
      sigemptyset(&chld.sa_mask);
      sigaction(SIGCHLD, &chld, nullptr);
    }
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    // A signal the process ignores stays ignored (a background job's SIGINT, say).
    sigaction(SIGINT, nullptr, &g_old_int);
    sigaction(SIGTERM, nullptr, &g_old_term);
    if (g_old_int.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, nullptr);
    if (g_old_term.sa_handler != SIG_IGN) sigaction(SIGTERM, &sa, nullptr);
  }
  ~Session() {
    int n = g_child_count.exchange(0);
    for (int i = 0; i < n; ++i) {
      if (waitpid(g_children[i], nullptr, WNOHANG) == 0) {
        kill(g_children[i], SIGKILL);
        waitpid(g_children[i], nullptr, 0);
      }
    }
    if (control_) {
      sem_destroy(&control_->wake);
      for (int r = 0; r < control_->nranks; ++r) sem_destroy(&control_->slots[r].go);
    }
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    sigaction(SIGCHLD, &g_old_chld, nullptr);
  }
  bip::managed_shared_memory& segment() { return segment_; }
  detail::Control* control_ = nullptr;

 private:
  std::string name_;
  bip::managed_shared_memory segment_;
};

[[noreturn]] void rank_main(detail::Control* control, char* base, int rank, int size,
                            const Options& options, const RankFn& fn, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigaction(SIGCHLD, &g_old_chld, nullptr);  // the rank's own children: as the caller had it
  detail::request_short_slice();
  while (sem_wait(&control->slots[rank].go) != 0) {
  }
  detail::RankComm comm(control, base, rank, size, options.world_backend,
                        detail::FaultPlan::crash_call(options.faults, rank));
  comm.on_reporting = options.on_reporting;
  comm.on_reported = options.on_reported;
  using detail::Finish;
  try {
    comm.finish(Finish::ok, Errc::internal, fn(comm));
  } catch (const Error& e) {
    comm.finish(Finish::error, e.code(), e.what());
  } catch (const std::exception& e) {
    comm.finish(Finish::exception, Errc::internal, e.what());
  } catch (...) {
    comm.finish(Finish::exception, Errc::internal, "a non-standard exception");
  }
}

}  // namespace

std::string_view failure_name(Failure f) noexcept {
  switch (f) {
    case Failure::none:
      return "none";
    case Failure::check:
      return "check failed";
    case Failure::mismatch:
      return "collective mismatch";
    case Failure::deadlock:
      return "deadlock";
    case Failure::peer_failure:
      return "peer failure";
    case Failure::determinism:
      return "determinism violation";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Failure f) { return os << failure_name(f); }

std::ostream& operator<<(std::ostream& os, RankOutcome::Status s) {
  const char* names[] = {"ok", "error", "died"};
  return os << names[static_cast<int>(s)];
}

int exit_code(Failure f) noexcept {
  switch (f) {
    case Failure::none:
      return 0;
    case Failure::check:
      return 1;
    case Failure::mismatch:
      return 3;
    case Failure::deadlock:
      return 4;
    case Failure::peer_failure:
      return 5;
    case Failure::determinism:
      return 6;
  }
  return 1;
}

Failure RunResult::failure() const {
  // A detection the simulator makes itself (a send buffer changed before wait, a buffer in
  // the wrong memory space) is the cause when its rank's exit makes its peers fail.
  bool mismatch = false, deadlock = false, detected = false, peer = false, other = false;
  for (const RankOutcome& o : outcomes) {
    if (o.status == RankOutcome::Status::died) peer = true;
    if (o.status != RankOutcome::Status::error) continue;
    switch (o.code.value_or(Errc::internal)) {
      case Errc::comm_mismatch:
        mismatch = true;
        break;
      case Errc::comm_deadlock:
        deadlock = true;
        break;
      case Errc::comm_buffer_mutated:
      case Errc::comm_memory_space:
        detected = true;
        break;
      case Errc::comm_peer_failed:
        peer = true;
        break;
      default:
        other = true;
    }
  }
  if (mismatch) return Failure::mismatch;
  if (deadlock) return Failure::deadlock;
  if (detected) return Failure::check;
  if (peer) return Failure::peer_failure;
  return other ? Failure::check : Failure::none;
}

std::vector<std::string> leftover_segments(int creator) {
  std::vector<std::string> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  const std::size_t n = std::strlen(kPrefix);
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, kPrefix, n) != 0) continue;
    // The name is kPrefix + creator pid + "-" + counter.
    int pid = 0;
    const char* digits = e->d_name + n;
    auto [end, ec] = std::from_chars(digits, digits + std::strlen(digits), pid);
    bool parsed = ec == std::errc() && *end == '-' && pid > 0;
    if (creator > 0 ? (parsed && pid == creator)
                    : (!parsed || (kill(pid, 0) != 0 && errno == ESRCH))) {
      out.emplace_back(e->d_name);
    }
  }
  closedir(dir);
  return out;
}

int take_interrupt() noexcept { return g_kept_signal.exchange(0); }

void check_faults(std::span<const Fault> faults, int ranks) {
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const Fault& f = faults[i];
    if (f.rank < 0 || f.rank >= ranks) {
      throw Error(Errc::invalid_argument, "fault " + f.str() + " names rank " +
                                              std::to_string(f.rank) + " of a " +
                                              std::to_string(ranks) + "-rank cluster");
    }
    for (std::size_t j = 0; j < i; ++j) {
      const Fault& g = faults[j];
      if (f.kind == Fault::Kind::crash && g.kind == Fault::Kind::crash && f.rank == g.rank) {
        // A rank dies once: the later fault could never fire (the last one in the list was
        // taken, and the other one reported as fired, until 2026-12-02).
        throw Error(Errc::invalid_argument, "faults " + g.str() + " and " + f.str() +
                                                " both crash rank " + std::to_string(f.rank) +
                                                ": a rank dies once");
      }
      if (f.kind == Fault::Kind::flip && g.kind == Fault::Kind::flip && f.rank == g.rank &&
          f.at == g.at) {
        // One byte is flipped per received payload: both were traced as fired and only the
        // last applied (until 2026-12-02).
        throw Error(Errc::invalid_argument, "faults " + g.str() + " and " + f.str() +
                                                " both flip what rank " + std::to_string(f.rank) +
                                                " receives at its collective " +
                                                std::to_string(f.at) + ": one flip per payload");
      }
    }
  }
  // The delays of one rank add up (FaultPlan); a total past 2^64 - 1 wrapped to a short delay.
  std::vector<std::uint64_t> delayed(static_cast<std::size_t>(ranks), 0);
  for (const Fault& f : faults) {
    if (f.kind != Fault::Kind::delay) continue;
    std::uint64_t& total = delayed[static_cast<std::size_t>(f.rank)];
    if (f.at > std::numeric_limits<std::uint64_t>::max() - total) {
      throw Error(Errc::invalid_argument,
                  "fault " + f.str() + " takes the delays of rank " + std::to_string(f.rank) +
                      " past " + std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                      " decisions in all (the delays of one rank add up)");
    }
    total += f.at;
  }
}

RunResult Cluster::run(int ranks, const Options& options, const RankFn& fn) {
  if (ranks < 1 || ranks > detail::kMaxRanks) {
    throw Error(Errc::invalid_argument, "a simulated cluster has 1 to " +
                                            std::to_string(detail::kMaxRanks) + " ranks, got " +
                                            std::to_string(ranks));
  }
  if (options.segment_bytes < kMinSegmentBytes || options.segment_bytes > kMaxSegmentBytes) {
    throw Error(Errc::invalid_argument,
                "Options::segment_bytes must be " + std::to_string(kMinSegmentBytes) + " to " +
                    std::to_string(kMaxSegmentBytes) + " (1 MiB to 16 TiB), got " +
                    std::to_string(options.segment_bytes));
  }
  check_faults(options.faults, ranks);
  static std::atomic<unsigned> counter{0};
  std::string name = kPrefix + std::to_string(getpid()) + "-" + std::to_string(counter++);
  bip::shared_memory_object::remove(name.c_str());
  std::fflush(nullptr);  // children must not inherit unflushed output
  detail::CpuPin pin(options.pin_to_one_cpu);
  Session session(name, options.segment_bytes, options.keep_interrupt);
  auto* control = session.segment().construct<detail::Control>(bip::anonymous_instance)();
  session.control_ = control;
  control->nranks = ranks;
  sem_init(&control->wake, 1, 0);
  for (int r = 0; r < ranks; ++r) sem_init(&control->slots[r].go, 1, 0);
  char* base = static_cast<char*>(session.segment().get_address());
  pid_t parent = getpid();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw Error(Errc::comm_resource, "fork failed for rank " + std::to_string(r));
    if (pid == 0) rank_main(control, base, r, ranks, options, fn, parent);
    pids.push_back(pid);
    g_children[g_child_count++] = pid;
  }
  if (options.on_started) options.on_started(std::vector<int>(pids.begin(), pids.end()));
  return detail::Scheduler(control, session.segment(), ranks, options, pids).run();
}

}  // namespace hpref::sim
