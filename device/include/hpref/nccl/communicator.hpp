// hpref::nccl: the Communicator over NCCL on CUDA GPUs (SPEC 9.1-9.2), plain C++ against
// cudart and nccl (no kernels). The world and every accelerator group ("nccl", "hccl" in
// the name) are NCCL communicators, each with its own CUDA stream; groups are split from
// the world (ncclCommSplit, which non-members join with no colour) in the SPEC 3.2 order.
// all_to_all_v is grouped ncclSend/ncclRecv; a Work is a CUDA event polled against the
// deadline together with ncclCommGetAsyncError, and a communicator that fails or times out
// is aborted (ncclCommAbort). Buffers of an accelerator group may be device memory, used
// in place, or host memory, staged through device memory (SPEC 4.5): that is how host
// control values and this library's host-backed tensors travel. Host groups ("mpi",
// "gloo", ...) run on the host Communicator the world was bootstrapped over. No CUDA or
// NCCL header is needed to use this one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"

namespace hpref::nccl {

struct Options {
  // SPEC 9.2: every wait's deadline; past it the communicator is aborted and wait()
  // raises CommError comm_timeout.
  std::int64_t timeout_ms = 600000;
  // SPEC 9.2 checked mode: each operation's signature is all-gathered over its group first
  // and a disagreement raises comm_mismatch instead of hanging.
  bool checked = false;
};

// The CUDA devices this process sees (0 without a driver or device).
int visible_devices() noexcept;

class NcclCommunicator final : public Communicator {
 public:
  // Under mpirun: one GPU per rank (the node-local rank, from OMPI_COMM_WORLD_LOCAL_RANK,
  // SLURM_LOCALID or LOCAL_RANK, modulo the visible devices). The world communicator's
  // unique id is broadcast over `host`'s world; host-backend groups are created on `host`,
  // which must outlive this communicator.
  static std::unique_ptr<NcclCommunicator> over(Communicator& host, Options options = {});
  // One process, a thread per GPU (ncclCommInitAll over GPUs 0..devices-1): rank i uses
  // GPU i and must be driven by its own thread. There is no host transport: host-backend
  // groups are refused.
  static std::vector<std::unique_ptr<NcclCommunicator>> clique(int devices, Options options = {});

  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string world_backend() const override { return "nccl"; }
  Group world() const override;
  Group new_group(std::span<const int> ranks, const std::string& backend) override;
  Work all_gather(const Group& group, ConstBuffer in, MutableBuffer out) override;
  Work broadcast(const Group& group, MutableBuffer buffer, int root) override;
  // Integers: ncclAllReduce. Floats: all-gathered and reduced in group order on the host,
  // the order SPEC 9.1 fixes, so results are bitwise those of the simulator and MPI.
  Work all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) override;
  Work all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts, MutableBuffer out,
                    std::span<const std::size_t> out_counts) override;
  Work barrier(const Group& group) override;

  int device() const noexcept;  // the CUDA device of this rank
  bool failed() const noexcept;  // true once a communicator was aborted

  struct Impl;
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpref::nccl
