// How the simulator's processes share one CPU: the pin and the rank's time slice (used by
// Cluster::run and measure_handoff_floor alike, so the floor is measured as ranks run).
#pragma once

#include <sched.h>

#include <cstdint>

namespace hpref::sim::detail {

// The kernel's struct sched_attr (sched_getattr / sched_setattr; its header clashes with
// glibc's sched.h).
struct SchedAttr {
  std::uint32_t size, sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime, sched_deadline, sched_period;
  std::uint32_t sched_util_min, sched_util_max;
};

// Pins the calling thread (and so the processes it forks) to its current CPU; restores on
// exit.
class CpuPin {
 public:
  explicit CpuPin(bool enabled);
  ~CpuPin();
  CpuPin(const CpuPin&) = delete;
  CpuPin& operator=(const CpuPin&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

// Asks the kernel (Linux 6.12+, EEVDF) for the shortest time slice, 0.1 ms, for the calling
// rank process; its policy and nice value stay as they are (sched_getattr first: a rank of a
// niced run stays niced). Why: a rank woken by the monitor then runs at once, preempting the
// monitor inside its sem_post, and its own post back needs no wake-up (the monitor is not
// waiting yet): one round trip is two switches. With the default slice the monitor often ran
// on to sleep first, and ~10% of decisions took an extra switch and wake-up (8 ranks: 2.20
// switches per decision, now 2.03; 1 KiB all_to_all_v ~10% faster). The slice only sets how
// often a task may be preempted, not its share of the CPU. Older kernels ignore the field;
// a refusal (seccomp, say) leaves the default: it is a hint, nothing depends on it.
void request_short_slice();

}  // namespace hpref::sim::detail
