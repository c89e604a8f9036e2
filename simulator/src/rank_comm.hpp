// The Communicator a rank process sees: each call posts a request in its slot, hands the
// baton to the monitor and waits for its turn; data is copied only while it holds the
// baton, and it never allocates in the segment.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>

#include "hpref/communicator.hpp"
#include "shared.hpp"

namespace hpref::sim::detail {

class RankComm final : public Communicator {
 public:
  RankComm(Control* control, char* base, int rank, int size, std::string world_backend,
           std::uint64_t crash_at_call);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string world_backend() const override { return world_backend_; }
  Group world() const override;
  Group new_group(std::span<const int> ranks, const std::string& backend) override;
  Work all_gather(const Group& group, ConstBuffer in, MutableBuffer out) override;
  Work broadcast(const Group& group, MutableBuffer buffer, int root) override;
  Work all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) override;
  using Communicator::all_to_all_v;
  Work all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts,
                    std::span<const std::size_t> in_displs, MutableBuffer out,
                    std::span<const std::size_t> out_counts) override;
  Work barrier(const Group& group) override;

  // Reports the rank function's outcome to the monitor and ends the process.
  // `text`: the returned value, or the error's message; `code`: Finish::error's kind.
  [[noreturn]] void finish(Finish how, Errc code, const std::string& text);
  // Options::on_reporting and on_reported, called by finish() before and after the report.
  std::function<void(int rank)> on_reporting;
  std::function<void(int rank)> on_reported;

  struct Launch;
  struct SimWork;
  void wait_work(SimWork& work);

 private:
  Slot& slot() { return control_->slots[rank_]; }
  void call();               // hand the baton to the monitor, wait for the turn
  void own_process() const;  // comm_usage when called from a process the rank forked
  void point();              // a scheduling point: count it, and crash here if the plan says so
  class InCall;              // one call at a time (comm_usage for a second thread's)
  [[noreturn]] void throw_response();
  Work launch(const Launch& l);
  // A launch whose blocks have displacements: the peers' blocks into `stage` (their packed
  // places), and the checksum of the runs they come from (hpref/detail/checksum.hpp).
  static std::uint64_t stage_blocks(char* stage, const Launch& l, SimWork& work);

  Control* control_;
  char* base_;
  int rank_;
  int size_;
  std::string world_backend_;
  std::uint64_t crash_at_;
  std::uint64_t calls_ = 0;
  pid_t pid_;  // the rank's process: a process it forks has a copy of this, not the slot
  std::atomic<bool> in_call_{false};
};

}  // namespace hpref::sim::detail
