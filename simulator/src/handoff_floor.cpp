// measure_handoff_floor (cluster.hpp): the cost of a scheduling decision without the
// simulator's work, on bare processes placed as its ranks are (cpu.hpp).
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "hpref/error.hpp"
#include "hpref/sim/cluster.hpp"
#include "hpref/splitmix64.hpp"
#include "shared.hpp"

namespace hpref::sim {
namespace {

constexpr int kStuckSeconds = 10;  // a pass this late means a process is gone

// Shared by the parent and the baton holders (an anonymous shared mapping, so nothing is
// left behind however the run ends).
struct Baton {
  sem_t ready;  // each holder once; then the holder that makes the last direct pass
  sem_t back;   // monitor mode: the holder hands the baton back
  sem_t go[detail::kMaxRanks];
  SplitMix64 rng{1};
  long decisions = 0;  // passes to make
  long made = 0;       // passes made, counted by the holders (the parent reads it too)
  bool direct = false;
  bool stop = false;
};

double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

[[noreturn]] void stuck(const char* what) {
  throw Error(Errc::comm_resource, std::string("handoff floor: ") + what + " took over " +
                                       std::to_string(kStuckSeconds) + " s");
}

// Waits for `s` up to kStuckSeconds; false if it was not posted by then.
bool posted_in_time(sem_t* s) {
  timespec due;
  clock_gettime(CLOCK_MONOTONIC, &due);
  due.tv_sec += kStuckSeconds;
  while (sem_clockwait(s, CLOCK_MONOTONIC, &due) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

void wait_or_throw(sem_t* s, const char* what) {
  if (!posted_in_time(s)) stuck(what);
}

[[noreturn]] void holder(Baton* b, int r, int n, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  detail::request_short_slice();
  sem_post(&b->ready);
  for (;;) {
    while (sem_wait(&b->go[r]) != 0) {
    }
    if (b->stop) _exit(0);
    long made = __atomic_add_fetch(&b->made, 1, __ATOMIC_RELAXED);
    if (!b->direct) {
      sem_post(&b->back);
      continue;
    }
    if (made == b->decisions) {  // the last pass: release the others and the parent
      b->stop = true;
      for (int k = 0; k < n; ++k) {
        if (k != r) sem_post(&b->go[k]);
      }
      sem_post(&b->ready);
      _exit(0);
    }
    sem_post(&b->go[b->rng.next() % static_cast<std::uint64_t>(n)]);  // itself too
  }
}

// One timed run of `decisions` passes among n holders; microseconds per pass.
double run_once(int n, long decisions, bool direct) {
  void* mem =
      mmap(nullptr, sizeof(Baton), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error(Errc::comm_resource, "handoff floor: mmap failed");
  auto* b = new (mem) Baton;
  b->decisions = decisions;
  b->direct = direct;
  sem_init(&b->ready, 1, 0);
  sem_init(&b->back, 1, 0);
  for (int r = 0; r < n; ++r) sem_init(&b->go[r], 1, 0);
  std::vector<pid_t> pids;
  pids.reserve(static_cast<std::size_t>(n));  // no allocation failure after a fork
  auto reap = [&](bool kill_them) {
    for (pid_t pid : pids) {
      if (kill_them) kill(pid, SIGKILL);
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    pids.clear();
    munmap(mem, sizeof(Baton));
  };
  try {
    pid_t parent = getpid();
    for (int r = 0; r < n; ++r) {
      pid_t pid = fork();
      if (pid < 0) throw Error(Errc::comm_resource, "handoff floor: fork failed");
      if (pid == 0) holder(b, r, n, parent);
      pids.push_back(pid);
    }
    for (int r = 0; r < n; ++r) wait_or_throw(&b->ready, "a process's start");
    double start = now_us();
    if (direct) {  // the parent sees only the end: stuck when no pass was made in 10 s
      sem_post(&b->go[0]);
      for (long seen = -1; !posted_in_time(&b->ready);) {
        long made = __atomic_load_n(&b->made, __ATOMIC_RELAXED);
        if (made == seen) stuck("a pass");
        seen = made;
      }
    } else {
      for (long d = 0; d < decisions; ++d) {
        sem_post(&b->go[b->rng.next() % static_cast<std::uint64_t>(n)]);
        wait_or_throw(&b->back, "a pass");
      }
    }
    double us = (now_us() - start) / static_cast<double>(decisions);
    long made = b->made;
    b->stop = true;
    for (int r = 0; r < n; ++r) sem_post(&b->go[r]);
    reap(false);
    if (made != decisions) {
      throw Error(Errc::internal, "handoff floor: " + std::to_string(made) + " passes made of " +
                                      std::to_string(decisions));
    }
    return us;
  } catch (...) {
    if (!pids.empty()) reap(true);
    throw;
  }
}

}  // namespace

HandoffFloor measure_handoff_floor(int ranks, int decisions) {
  if (ranks < 1 || ranks > detail::kMaxRanks || decisions < 1) {
    throw Error(Errc::invalid_argument, "handoff floor: 1 to " + std::to_string(detail::kMaxRanks) +
                                            " ranks and at least 1 decision, got " +
                                            std::to_string(ranks) + " and " +
                                            std::to_string(decisions));
  }
  detail::CpuPin pin(true);
  HandoffFloor best{1e300, 1e300};
  for (int round = 0; round < 3; ++round) {  // the least of three: the floor, not the noise
    best.via_monitor_us = std::min(best.via_monitor_us, run_once(ranks, decisions, false));
    best.direct_us = std::min(best.direct_us, run_once(ranks, decisions, true));
  }
  return best;
}

}  // namespace hpref::sim
