// hpref::nccl's transport: NCCL collectives on each group's CUDA stream under the operation
// core, a CUDA event per operation polled against the core's deadline together with
// NCCL's asynchronous error, and host buffers staged through device memory.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "hpref/device/transport.hpp"
#include "hpref/nccl/communicator.hpp"

namespace hpref::nccl {

namespace {

using device::OpContext;
using device::PendingPtr;

void cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  throw CommError(Errc::comm_backend, std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                          cudaGetErrorString(e) + ")");
}

bool nccl_failed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }

void nccl_ok(ncclResult_t r, const char* call) {
  if (nccl_failed(r))
    throw CommError(Errc::comm_backend, std::string(call) + " failed: " + ncclGetErrorString(r));
}

bool on_device(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // a plain host pointer on older runtimes
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// The node-local rank under a launcher, or -1.
int local_rank_from_environment() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

// One buffer of an operation in device memory: the caller's own, or a staged copy.
struct Staged {
  void* device = nullptr;
  void* host = nullptr;  // the caller's host buffer, when staged (the copy is owned)
  std::size_t bytes = 0;
  bool copy_back = false;
};

// An NCCL communicator and its stream; null where this rank is not a member.
struct NcclComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// A launched operation: its CUDA event and its staged buffers.
struct NcclPending final : device::Pending {
  device::Transport* transport = nullptr;
  OpContext op;
  int device = 0;
  NcclComm comm;
  cudaEvent_t event = nullptr;
  std::vector<Staged> staged;

  ~NcclPending() override {
    if (event && !transport->failed()) cudaEventDestroy(event);
  }

  // The device address of a buffer: the caller's own, or a staged copy made here.
  void* stage(const void* data, std::size_t bytes, bool copy_in, bool copy_back) {
    Staged s{const_cast<void*>(data), nullptr, bytes, false};
    if (!on_device(data)) {
      cuda_ok(cudaMallocAsync(&s.device, std::max<std::size_t>(bytes, 1), comm.stream),
              "cudaMallocAsync");
      s = {s.device, const_cast<void*>(data), bytes, copy_back};
      if (copy_in && bytes) {
        cuda_ok(cudaMemcpyAsync(s.device, data, bytes, cudaMemcpyHostToDevice, comm.stream),
                "cudaMemcpyAsync");
      }
    }
    staged.push_back(s);
    return s.device;
  }

  void wait() override {
    cuda_ok(cudaSetDevice(device), "cudaSetDevice");
    transport->poll(op, [&] {
      cudaError_t e = cudaEventQuery(event);
      if (e != cudaErrorNotReady) {
        cuda_ok(e, "cudaEventQuery");
        return true;
      }
      ncclResult_t async = ncclSuccess;
      if (comm.comm) ncclCommGetAsyncError(comm.comm, &async);
      if (nccl_failed(async)) {
        transport->fail(Errc::comm_peer_failed,
                        device::op_text(op) + ": NCCL reported " + ncclGetErrorString(async) +
                            "; " + transport->after_failure(),
                        op);
      }
      return false;
    });
    for (Staged& s : staged) {
      if (s.copy_back && s.bytes)
        cuda_ok(cudaMemcpy(s.host, s.device, s.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      if (s.host) cuda_ok(cudaFreeAsync(s.device, comm.stream), "cudaFreeAsync");
    }
  }
};

}  // namespace

class NcclTransport final : public device::Transport {
 public:
  NcclTransport(int rank, int size, int device, Communicator* host, std::int64_t timeout_ms)
      : device::Transport("NCCL", "the communicators were aborted", rank, size, timeout_ms),
        device_(device),
        host_(host) {
    use_device();
    cuda_ok(cudaMalloc(&scratch_, sizeof(std::int32_t)), "cudaMalloc");
  }

  ~NcclTransport() override {
    cudaSetDevice(device_);
    for (NcclComm& c : comms_) {
      if (c.comm && failed()) {
        ncclCommAbort(c.comm);
      } else if (c.comm) {
        ncclCommFinalize(c.comm);
        ncclResult_t state = ncclInProgress;
        while (ncclCommGetAsyncError(c.comm, &state) == ncclSuccess && state == ncclInProgress)
          sched_yield();
        ncclCommDestroy(c.comm);
      }
      if (c.stream) cudaStreamDestroy(c.stream);
    }
    if (scratch_) cudaFree(scratch_);
  }

  PendingPtr all_gather(const OpContext& op, const void* in, void* out,
                        std::size_t bytes) override {
    auto w = start(op);
    void* src = w->stage(in, bytes, true, false);
    void* dst = w->stage(out, bytes * op.ranks.size(), false, true);
    nccl_ok(ncclAllGather(src, dst, bytes, ncclUint8, w->comm.comm, w->comm.stream),
            "ncclAllGather");
    return launched(std::move(w));
  }

  PendingPtr broadcast(const OpContext& op, void* data, std::size_t bytes, int root,
                       bool is_root) override {
    auto w = start(op);
    void* d = w->stage(data, bytes, is_root, !is_root);
    nccl_ok(ncclBroadcast(d, d, bytes, ncclUint8, root, w->comm.comm, w->comm.stream),
            "ncclBroadcast");
    return launched(std::move(w));
  }

  PendingPtr all_reduce(const OpContext& op, const void* in, void* out, std::size_t count,
                        DType dtype, ReduceOp reduce) override {
    auto w = start(op);
    std::size_t bytes = count * element_size(dtype);
    void* src = w->stage(in, bytes, true, in == out);
    void* dst = in == out ? src : w->stage(out, bytes, false, true);
    ncclDataType_t type = dtype == DType::int32 ? ncclInt32 : ncclInt64;
    ncclRedOp_t nop = reduce == ReduceOp::sum   ? ncclSum
                      : reduce == ReduceOp::min ? ncclMin
                                                : ncclMax;
    nccl_ok(ncclAllReduce(src, dst, count, type, nop, w->comm.comm, w->comm.stream),
            "ncclAllReduce");
    return launched(std::move(w));
  }

  PendingPtr all_to_all_v(const OpContext& op, const void* in,
                          std::span<const std::size_t> in_counts,
                          std::span<const std::size_t> in_displs, void* out,
                          std::span<const std::size_t> out_counts) override {
    auto w = start(op);
    std::size_t extent = 0;  // the send buffer's bytes up to the end of its last block
    for (std::size_t i = 0; i < in_counts.size(); ++i)
      if (in_counts[i]) extent = std::max(extent, in_displs[i] + in_counts[i]);
    std::size_t received = std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0});
    auto* src = static_cast<char*>(w->stage(in, extent, true, false));
    auto* dst = static_cast<char*>(w->stage(out, received, false, true));
    auto [comm, stream] = w->comm;
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0, rdisp = 0; i < in_counts.size(); ++i) {
      auto peer = static_cast<int>(i);
      if (in_counts[i]) {
        nccl_ok(ncclSend(src + in_displs[i], in_counts[i], ncclUint8, peer, comm, stream),
                "ncclSend");
      }
      if (out_counts[i])
        nccl_ok(ncclRecv(dst + rdisp, out_counts[i], ncclUint8, peer, comm, stream), "ncclRecv");
      rdisp += out_counts[i];
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    return launched(std::move(w));
  }

  PendingPtr barrier(const OpContext& op) override {
    auto w = start(op);
    nccl_ok(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, w->comm.comm, w->comm.stream),
            "ncclAllReduce");
    return launched(std::move(w));
  }

  // Host groups ("mpi", "gloo", ...) are created on and run by the host Communicator.
  Communicator* runner_for(const std::string& backend) override {
    if (is_accelerator_backend_name(backend)) return nullptr;
    if (!host_) {
      throw CommError(Errc::comm_usage,
                      "new_group on host backend '" + backend +
                          "': this NCCL clique has no host transport (start it under mpirun)");
    }
    return host_;
  }

  void add_group(const OpContext& op, int id, std::span<const int> ranks, bool member) override;

  bool host_memory(const void* p) const override { return !on_device(p); }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (!on_device(dst) && !on_device(src)) return device::Transport::copy(dst, src, bytes);
    use_device();
    cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }

  int device() const noexcept { return device_; }
  void use_device() const { cuda_ok(cudaSetDevice(device_), "cudaSetDevice"); }

  // Stores group `id`'s communicator and makes its stream.
  void add(int id, ncclComm_t comm) {
    comms_.resize(std::max(comms_.size(), static_cast<std::size_t>(id) + 1));
    NcclComm& c = comms_[static_cast<std::size_t>(id)];
    c.comm = comm;
    if (comm)
      cuda_ok(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  }

  // A non-blocking communicator's call returns ncclInProgress until it has settled.
  void settle(ncclComm_t comm, const OpContext& op) {
    poll(op, [&] {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      return state != ncclInProgress;
    });
  }

 protected:
  void abort() override {
    for (NcclComm& c : comms_) {
      if (c.comm) ncclCommAbort(c.comm);
      c.comm = nullptr;
    }
  }
  void idle() override { std::this_thread::sleep_for(std::chrono::microseconds(20)); }

 private:
  std::unique_ptr<NcclPending> start(const OpContext& op) {
    use_device();
    auto w = std::make_unique<NcclPending>();
    w->transport = this;
    w->op = op;
    w->device = device_;
    w->comm = comms_[static_cast<std::size_t>(op.group)];
    return w;
  }

  PendingPtr launched(std::unique_ptr<NcclPending> w) {
    settle(w->comm.comm, w->op);
    cuda_ok(cudaEventCreateWithFlags(&w->event, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
    cuda_ok(cudaEventRecord(w->event, w->comm.stream), "cudaEventRecord");
    return w;
  }

  int device_;
  Communicator* host_;
  std::vector<NcclComm> comms_;  // by group id; 0 is the world
  void* scratch_ = nullptr;      // one device int for barriers
};

// Accelerator groups are split from the world in the SPEC 3.2 order.
void NcclTransport::add_group(const OpContext& op, int id, std::span<const int> ranks,
                              bool member) {
  use_device();
  ncclComm_t comm = nullptr;
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // Every world rank joins the split (non-members with no colour); the child inherits the
  // world's configuration, non-blocking under mpirun.
  (void)ranks;
  nccl_ok(ncclCommSplit(comms_[0].comm, member ? 0 : NCCL_SPLIT_NOCOLOR, rank(), &comm, nullptr),
          "ncclCommSplit");
  settle(comms_[0].comm, op);
  if (comm) settle(comm, op);
#else
  // Older NCCL: the group's first member makes an id and the world broadcasts it over the
  // host transport; members initialize from it.
  if (!host_) {
    throw CommError(Errc::comm_usage,
                    "NCCL before 2.18 has no ncclCommSplit, and this clique has no host transport");
  }
  ncclUniqueId uid{};
  if (rank() == ranks.front()) nccl_ok(ncclGetUniqueId(&uid), "ncclGetUniqueId");
  host_->broadcast(host_->world(), {&uid, sizeof uid, MemorySpace::host}, ranks.front()).wait();
  if (member) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int index =
        static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank()) - ranks.begin());
    nccl_ok(ncclCommInitRankConfig(&comm, static_cast<int>(ranks.size()), uid, index, &config),
            "ncclCommInitRankConfig");
    settle(comm, op);
  }
#endif
  add(id, member ? comm : nullptr);
}

int visible_devices() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<NcclTransport> transport, Options options)
    : CoreCommunicator(std::move(transport), "nccl", options.checked) {}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::device() const noexcept {
  return static_cast<const NcclTransport&>(transport()).device();
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::over(Communicator& host, Options options) {
  int devices = visible_devices();
  if (devices < 1)
    throw CommError(Errc::comm_backend,
                    "the nccl backend needs a CUDA device; this process sees none");
  int local = local_rank_from_environment();
  auto t = std::make_unique<NcclTransport>(host.rank(), host.size(),
                                           (local >= 0 ? local : host.rank()) % devices, &host,
                                           options.timeout_ms);
  ncclUniqueId id{};
  if (host.rank() == 0) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host.broadcast(host.world(), {&id, sizeof id, MemorySpace::host}, 0).wait();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once; settle() polls them against the deadline
  ncclComm_t comm = nullptr;
  nccl_ok(ncclCommInitRankConfig(&comm, host.size(), id, host.rank(), &config),
          "ncclCommInitRankConfig");
  t->add(0, comm);
  t->settle(comm, OpContext{0, -1, OpKind::barrier, t->world_ranks(), host.rank()});
  return std::make_unique<NcclCommunicator>(std::move(t), options);
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::clique(int devices,
                                                                        Options options) {
  if (devices < 1 || devices > visible_devices()) {
    throw CommError(Errc::comm_usage, "a clique of " + std::to_string(devices) +
                                          " GPUs, but this process sees " +
                                          std::to_string(visible_devices()));
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(devices));
  nccl_ok(ncclCommInitAll(comms.data(), devices, nullptr), "ncclCommInitAll");
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int i = 0; i < devices; ++i) {
    auto t = std::make_unique<NcclTransport>(i, devices, i, nullptr, options.timeout_ms);
    t->add(0, comms[static_cast<std::size_t>(i)]);
    out.push_back(std::make_unique<NcclCommunicator>(std::move(t), options));
  }
  return out;
}

}  // namespace hpref::nccl
