// Run after every simulator test (ctest fixture cleanup): no shared-memory segment of the
// simulator may be left in /dev/shm.
#include <cstdio>

#include "hpref/sim/cluster.hpp"

int main() {
  auto left = hpref::sim::leftover_segments();
  for (const auto& name : left) std::printf("left behind: /dev/shm/%s\n", name.c_str());
  std::printf("%zu simulator segments left behind\n", left.size());
  return left.empty() ? 0 : 1;
}
