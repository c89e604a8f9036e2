// Run after every simulator test (ctest fixture cleanup): no shared-memory segment of the
// simulator whose creating process is gone may be left in /dev/shm (SPEC 9.3). A live run's
// segment (another CI job on the machine) is not counted; segment names are removed before
// any rank starts, so a leftover means a name outlived its run.
#include <cstdio>

#include "hpref/sim/cluster.hpp"

int main() {
  auto left = hpref::sim::leftover_segments();
  for (const auto& name : left) std::printf("left behind: /dev/shm/%s\n", name.c_str());
  std::printf("%zu simulator segments left behind\n", left.size());
  return left.empty() ? 0 : 1;
}
