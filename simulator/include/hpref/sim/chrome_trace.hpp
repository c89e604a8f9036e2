// A simulator run's trace (RunResult::trace) as Chrome trace-event JSON, the format
// PyTorch's profiler writes and Perfetto and chrome://tracing read (issue 12): one track per
// rank; one complete ("X") slice per operation from its launch to its completion on the
// scheduling-step clock (1 us per trace line; a collective completes when its last member
// launches it); group and sequence number in the slice's args; the slices of a mismatch
// (a rank's last launch before it exited on comm_mismatch), of a deadlock and of an
// operation that never completed marked with args.problem and a red colour; exits, deaths,
// flips, new_group and deadlock lines as instant events.
#pragma once

#include <span>
#include <string>

namespace hpref::sim {

std::string chrome_trace(std::span<const std::string> lines);

}  // namespace hpref::sim
