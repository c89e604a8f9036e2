// hpref::nccl: the Communicator over NCCL on CUDA GPUs (SPEC 9.1-9.2), plain C++ against
// cudart and nccl (no kernels). The world and every accelerator group ("nccl", "hccl" in
// the name) are NCCL communicators, each with its own CUDA stream; groups are split from
// the world (ncclCommSplit, which non-members join with no colour) in the SPEC 3.2 order.
// all_to_all_v is grouped ncclSend/ncclRecv; a Work is a CUDA event polled against the
// deadline together with ncclCommGetAsyncError, and a communicator that fails or times out
// is aborted (ncclCommAbort). Buffers of an accelerator group may be device memory, used
// in place, or host memory, staged through device memory (SPEC 4.5): that is how host
// control values and this library's host-backed tensors travel. Host groups ("mpi",
// "gloo", ...) run on the host Communicator the world was bootstrapped over. The operation
// lifecycle (checks, sequence numbers, checked mode, float reductions) is the core's
// (hpref/device/communicator.hpp); this is its NCCL transport (device/src/nccl/transport.cpp).
// No CUDA or NCCL header is needed to use this one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hpref/device/communicator.hpp"

namespace hpref::nccl {

struct Options {
  // SPEC 9.2: every wait's deadline; past it the communicator is aborted and wait()
  // raises CommError comm_timeout.
  std::int64_t timeout_ms = 600000;
  // SPEC 9.2 checked mode: each operation's signature is all-gathered over its group first
  // and a disagreement raises comm_mismatch instead of hanging; each send buffer in host
  // memory is checksummed at launch and compared at wait() (comm_buffer_mutated).
  bool checked = false;
};

// The CUDA devices this process sees (0 without a driver or device).
int visible_devices() noexcept;

class NcclTransport;  // device/src/nccl/transport.cpp

class NcclCommunicator final : public device::CoreCommunicator {
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

  NcclCommunicator(std::unique_ptr<NcclTransport> transport, Options options);
  ~NcclCommunicator() override;
  int device() const noexcept;  // the CUDA device of this rank
};

}  // namespace hpref::nccl
