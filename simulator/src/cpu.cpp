// The simulator's CPU pin and rank time slice (cpu.hpp).
#include "cpu.hpp"

#include <sys/syscall.h>
#include <unistd.h>

namespace hpref::sim::detail {

CpuPin::CpuPin(bool enabled) {
  if (!enabled || sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
}

CpuPin::~CpuPin() {
  if (pinned_) sched_setaffinity(0, sizeof saved_, &saved_);
}

void request_short_slice() {
  SchedAttr attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return;
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) return;
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  attr.sched_runtime = 100 * 1000;  // ns, the kernel's minimum
  syscall(SYS_sched_setattr, 0, &attr, 0);
}

}  // namespace hpref::sim::detail
