// What a real backend supplies to the operation core (hpref/device/communicator.hpp): raw
// byte operations on the groups the core creates, each returning a Pending that wait()
// completes; the core does the rest. This base class holds what the transports share: the
// deadline poll (SPEC 9.2) and the failed state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/op_signature.hpp"

namespace hpref::device {

// One operation as messages name it; `ranks` (world ranks) is the core's table's.
struct OpContext {
  int group = 0;
  std::int64_t seq = -1;  // -1: new_group's agreement or the world's creation
  OpKind kind = OpKind::barrier;
  std::span<const int> ranks;
  int rank = 0;  // this rank
};

// "all_gather on group 1 [0, 2] seq 4 on rank 2".
std::string op_text(const OpContext& op);

// A transport operation in flight: wait() (called once) returns when its bytes are in the
// caller's buffers, or throws CommError.
struct Pending {
  virtual ~Pending() = default;
  virtual void wait() = 0;
};
using PendingPtr = std::unique_ptr<Pending>;

class Transport {
 public:
  // `name` for messages ("MPI"); `after_failure` says what a failure left behind ("the job
  // must be aborted").
  Transport(const char* name, const char* after_failure, int rank, int size,
            std::int64_t timeout_ms);
  virtual ~Transport() = default;

  // ---- supplied by each backend: raw operations on group op.group ----------------------
  // `bytes` from each member into out (member i at i * bytes).
  virtual PendingPtr all_gather(const OpContext& op, const void* in, void* out,
                                std::size_t bytes) = 0;
  // `root` is the root's member index; `is_root` says whether it is this rank.
  virtual PendingPtr broadcast(const OpContext& op, void* data, std::size_t bytes, int root,
                               bool is_root) = 0;
  // Integer dtypes only (exact in any order); in == out reduces in place.
  virtual PendingPtr all_reduce(const OpContext& op, const void* in, void* out, std::size_t count,
                                DType dtype, ReduceOp reduce) = 0;
  // Block i goes out from in + in_displs[i] (one displacement per member, always given;
  // blocks may overlap); what comes in lands back to back in member order.
  virtual PendingPtr all_to_all_v(const OpContext& op, const void* in,
                                  std::span<const std::size_t> in_counts,
                                  std::span<const std::size_t> in_displs, void* out,
                                  std::span<const std::size_t> out_counts) = 0;
  virtual PendingPtr barrier(const OpContext& op) = 0;
  // new_group, before the agreement: refuse a backend name this transport cannot serve.
  virtual void refuse_backend(const std::string&) {}
  // After it: the Communicator that runs groups of `backend` (NCCL's host groups), or
  // nullptr when this transport runs them.
  virtual Communicator* runner_for(const std::string&) { return nullptr; }
  // After it, on every world rank: group `id` of `ranks`, usable on members only.
  virtual void add_group(const OpContext& op, int id, std::span<const int> ranks, bool member) = 0;
  // Empty when the calling thread may call into the library; else why not (MPI below
  // MPI_THREAD_SERIALIZED, off its main thread). The core asks before a launch changes
  // anything (the sequence number) and before a wait marks its Work done, and refuses
  // with comm_usage: the communicator stays usable from the right thread.
  virtual std::string wrong_thread() const { return {}; }
  // Whether the core may read `p` on the host (send-buffer checksums in checked mode), and
  // a copy between a caller's buffer (device memory, perhaps) and host memory.
  virtual bool host_memory(const void* p) const;
  virtual void copy(void* dst, const void* src, std::size_t bytes);

  // ---- shared: who this is, the deadline, the failed state ----------------------------
  const char* name() const noexcept { return name_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(world_.size()); }
  const std::vector<int>& world_ranks() const noexcept { return world_; }
  // True once an operation failed (timed out, or a peer failed); every later one is refused.
  bool failed() const noexcept { return failed_; }
  Errc failure() const noexcept { return failure_; }
  const char* after_failure() const noexcept { return after_failure_; }
  // Calls done() until it returns true; past the deadline, fail()s with comm_timeout naming
  // `what` (default: op_text(op)).
  void poll(const OpContext& op, const std::function<bool()>& done, const std::string& what = {});
  // Marks this transport failed, abort()s it and throws CommError(code, message) naming
  // the operation's group, sequence number and ranks.
  [[noreturn]] void fail(Errc code, const std::string& message, const OpContext& op);

 protected:
  virtual void abort() {}  // after a failure (NCCL aborts its communicators)
  virtual void idle();     // between polls once an operation is slow (sched_yield)

 private:
  const char* name_;
  const char* after_failure_;
  int rank_;
  std::vector<int> world_;
  std::int64_t timeout_ms_;
  bool failed_ = false;
  Errc failure_ = Errc::comm_timeout;
};

}  // namespace hpref::device
