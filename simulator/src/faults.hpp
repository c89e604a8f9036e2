// A run's fault plan as the monitor applies it (Fault, its parsing and drawing: cluster.hpp
// and faults.cpp). A crash is the rank's own doing (RankComm::point at crash_call); a delay
// keeps a rank out of the scheduler's choice; a flip changes a byte a wait delivers.
// SPEC 9.3: no fault is ignored silently, unfired() says why each one never took effect.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hpref/sim/cluster.hpp"
#include "trace.hpp"

namespace hpref::sim::detail {

class FaultPlan {
 public:
  FaultPlan(const std::vector<Fault>& faults, int ranks, std::uint64_t seed);
  // The Communicator call (1-based) at which `rank` kills itself; 0: never.
  static std::uint64_t crash_call(const std::vector<Fault>& faults, int rank);
  bool delayed(int rank) const { return delay_[static_cast<std::size_t>(rank)] > 0; }
  // `rank` was ready and another was chosen: one decision of its delay is spent.
  void passed_over(int rank);
  // The byte to flip of the `received` bytes `rank` gets from its k-th operation (group,
  // seq), or -1; flips past the payload are traced as not applied.
  std::int64_t flip(int rank, std::uint64_t k, std::uint64_t received, int group, std::int64_t seq,
                    Trace& trace);
  // `crashed[r]`: rank r died by its crash fault (the rank says so just before; a rank that
  // died of anything else, an OOM kill, did not fire it).
  std::vector<std::string> unfired(std::span<const RankOutcome> outcomes,
                                   const std::vector<bool>& crashed) const;

 private:
  const std::vector<Fault>& faults_;
  std::uint64_t seed_;
  std::vector<std::uint64_t> delay_;  // per rank: decisions it still sits out
  std::vector<bool> delay_fired_;     // per rank
  std::vector<bool> flip_fired_;      // per fault
};

}  // namespace hpref::sim::detail
