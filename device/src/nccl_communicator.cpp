// hpref::nccl: launch/wait over NCCL with CUDA events, deadlines, asynchronous error
// polling, checked mode and host buffers staged through device memory.
#include "hpref/nccl/communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <thread>

#include "hpref/op_signature.hpp"

namespace hpref::nccl {

namespace {

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

void cuda_ok(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw CommError(Errc::comm_backend, std::string(call) + " failed: " + cuda_text(e));
}

bool nccl_failed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }

void nccl_ok(ncclResult_t r, const char* call) {
  if (nccl_failed(r)) throw CommError(Errc::comm_backend, std::string(call) + " failed: " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    case DType::float32: return ncclFloat32;
    default: return ncclFloat64;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::min: return ncclMin;
    default: return ncclMax;
  }
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
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

struct NcclGroup {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<int> ranks;
  std::string backend;
  std::int64_t seq = 0;
  std::optional<Group> host;  // a host-backend group, run by the host Communicator
};

}  // namespace

struct NcclCommunicator::Impl {
  Options options;
  Communicator* host = nullptr;
  int rank = 0, size = 1, device = 0;
  bool failed = false;
  std::vector<NcclGroup> groups;  // by group id; 0 is the world
  void* scratch = nullptr;        // one device int for barriers

  struct Op {
    int group = 0;
    std::int64_t seq = 0;
    OpKind kind = OpKind::barrier;
  };

  void use_device() const { cuda_ok(cudaSetDevice(device), "cudaSetDevice"); }

  NcclGroup& lookup(const Group& group) {
    auto id = static_cast<std::size_t>(group.id());
    if (group.id() < 0 || id >= groups.size() || groups[id].ranks != group.ranks()) {
      throw CommError(Errc::comm_usage, "group " + std::to_string(group.id()) + " " + rank_list_text(group.ranks()) +
                                            " was not created by this NCCL communicator",
                      group.id());
    }
    if (failed) {
      throw CommError(Errc::comm_peer_failed, "this NCCL communicator was aborted after an earlier failure",
                      group.id());
    }
    return groups[id];
  }

  std::string where(const Op& op) const {
    return std::string(op_kind_name(op.kind)) + " on group " + std::to_string(op.group) + " " +
           rank_list_text(groups[static_cast<std::size_t>(op.group)].ranks) + " seq " + std::to_string(op.seq) +
           " on rank " + std::to_string(rank);
  }

  [[noreturn]] void abort_and_throw(Errc code, const std::string& message, const Op& op) {
    failed = true;
    for (NcclGroup& g : groups) {
      if (g.comm) ncclCommAbort(g.comm);
      g.comm = nullptr;
    }
    throw CommError(code, message, op.group, op.seq, groups[static_cast<std::size_t>(op.group)].ranks);
  }

  // Polls `done` against the deadline and the communicator's asynchronous error.
  void poll(ncclComm_t comm, const Op& op, const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
    for (unsigned spin = 0;; ++spin) {
      if (done()) return;
      ncclResult_t async = ncclSuccess;
      if (comm) ncclCommGetAsyncError(comm, &async);
      if (nccl_failed(async)) {
        abort_and_throw(Errc::comm_peer_failed,
                        where(op) + ": NCCL reported " + ncclGetErrorString(async) + "; the communicators were aborted",
                        op);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort_and_throw(Errc::comm_timeout,
                        where(op) + " did not complete within " + std::to_string(options.timeout_ms) +
                            " ms: a member is missing, dead or running other operations; the communicators were "
                            "aborted (SPEC 9.2)",
                        op);
      }
      if (spin >= 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // A non-blocking communicator's call returns ncclInProgress until it has settled.
  void settle(ncclComm_t comm, const Op& op) {
    poll(comm, op, [&] {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      return state != ncclInProgress;
    });
  }

  void add_group(ncclComm_t comm, std::vector<int> ranks, std::string backend) {
    NcclGroup g;
    g.comm = comm;
    g.ranks = std::move(ranks);
    g.backend = std::move(backend);
    if (comm) cuda_ok(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    groups.push_back(std::move(g));
  }
};

namespace {

// One buffer of an operation in device memory: the caller's own, or a staged copy.
struct Staged {
  void* device = nullptr;
  void* host = nullptr;  // the caller's host buffer, when staged
  std::size_t bytes = 0;
  bool owned = false;
  bool copy_back = false;
};

struct NcclWork final : Work::State {
  NcclCommunicator::Impl* impl = nullptr;
  NcclCommunicator::Impl::Op op;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  std::vector<Staged> staged;
  const void* send = nullptr;  // checked mode: a host send buffer and its launch checksum
  std::size_t send_bytes = 0;
  std::uint64_t send_sum = 0;
  std::function<void()> finish;
  bool done = false;
  std::optional<CommError> error;

  ~NcclWork() override {
    if (event && !impl->failed) cudaEventDestroy(event);
  }

  Staged& stage(const void* data, std::size_t bytes, bool copy_in, bool copy_back) {
    Staged s;
    s.bytes = bytes;
    if (on_device(data)) {
      s.device = const_cast<void*>(data);
    } else {
      cuda_ok(cudaMallocAsync(&s.device, std::max<std::size_t>(bytes, 1), stream), "cudaMallocAsync");
      s.owned = true;
      s.host = const_cast<void*>(data);
      s.copy_back = copy_back;
      if (copy_in && bytes) {
        cuda_ok(cudaMemcpyAsync(s.device, data, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
      }
    }
    staged.push_back(s);
    return staged.back();
  }

  void record() {
    cuda_ok(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cuda_ok(cudaEventRecord(event, stream), "cudaEventRecord");
  }

  void wait() override {
    if (done) {
      if (error) throw *error;
      return;
    }
    try {
      impl->use_device();
      impl->poll(comm, op, [&] {
        cudaError_t e = cudaEventQuery(event);
        if (e == cudaErrorNotReady) return false;
        cuda_ok(e, "cudaEventQuery");
        return true;
      });
      for (Staged& s : staged) {
        if (s.copy_back && s.bytes) {
          cuda_ok(cudaMemcpy(s.host, s.device, s.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        }
        if (s.owned) cuda_ok(cudaFreeAsync(s.device, stream), "cudaFreeAsync");
      }
      done = true;
      if (send_bytes && buffer_checksum(send, send_bytes) != send_sum) {
        throw CommError(Errc::comm_buffer_mutated,
                        "rank " + std::to_string(impl->rank) + " changed its send buffer of " + op_kind_name(op.kind) +
                            " on group " + std::to_string(op.group) + " seq " + std::to_string(op.seq) +
                            " between launch and wait",
                        op.group, op.seq, {impl->rank});
      }
      if (finish) finish();
    } catch (const CommError& e) {
      done = true;
      error = e;
      throw;
    }
  }
};

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->use_device();
  cuda_ok(cudaMalloc(&impl_->scratch, sizeof(std::int32_t)), "cudaMalloc");
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(impl_->device);
  for (NcclGroup& g : impl_->groups) {
    if (g.comm) {
      if (impl_->failed) {
        ncclCommAbort(g.comm);
      } else {
        ncclCommFinalize(g.comm);
        ncclResult_t state = ncclInProgress;
        while (ncclCommGetAsyncError(g.comm, &state) == ncclSuccess && state == ncclInProgress) sched_yield();
        ncclCommDestroy(g.comm);
      }
    }
    if (g.stream) cudaStreamDestroy(g.stream);
  }
  if (impl_->scratch) cudaFree(impl_->scratch);
}

int visible_devices() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::over(Communicator& host, Options options) {
  int devices = visible_devices();
  if (devices < 1) throw CommError(Errc::comm_backend, "the nccl backend needs a CUDA device; this process sees none");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->host = &host;
  impl->rank = host.rank();
  impl->size = host.size();
  int local = local_rank_from_environment();
  impl->device = (local >= 0 ? local : host.rank()) % devices;
  impl->use_device();
  ncclUniqueId id{};
  if (host.rank() == 0) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host.broadcast(host.world(), {&id, sizeof id, MemorySpace::host}, 0).wait();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once; settle() polls them against the deadline
  ncclComm_t comm = nullptr;
  nccl_ok(ncclCommInitRankConfig(&comm, impl->size, id, impl->rank, &config), "ncclCommInitRankConfig");
  impl->add_group(comm, {}, "nccl");
  impl->groups[0].ranks.resize(static_cast<std::size_t>(impl->size));
  std::iota(impl->groups[0].ranks.begin(), impl->groups[0].ranks.end(), 0);
  impl->settle(comm, Impl::Op{0, -1, OpKind::barrier});
  return std::make_unique<NcclCommunicator>(std::move(impl));
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::clique(int devices, Options options) {
  if (devices < 1 || devices > visible_devices()) {
    throw CommError(Errc::comm_usage, "a clique of " + std::to_string(devices) + " GPUs, but this process sees " +
                                          std::to_string(visible_devices()));
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(devices));
  nccl_ok(ncclCommInitAll(comms.data(), devices, nullptr), "ncclCommInitAll");
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int i = 0; i < devices; ++i) {
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->rank = i;
    impl->size = devices;
    impl->device = i;
    impl->use_device();
    std::vector<int> all(static_cast<std::size_t>(devices));
    std::iota(all.begin(), all.end(), 0);
    impl->add_group(comms[static_cast<std::size_t>(i)], all, "nccl");
    out.push_back(std::make_unique<NcclCommunicator>(std::move(impl)));
  }
  return out;
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
int NcclCommunicator::device() const noexcept { return impl_->device; }
bool NcclCommunicator::failed() const noexcept { return impl_->failed; }

Group NcclCommunicator::world() const { return Group(0, impl_->groups[0].ranks, "nccl", impl_->rank); }

namespace {

// Launches an all-gather of `bytes` per member on `g` into `w` (staging as needed).
void launch_all_gather(NcclCommunicator::Impl& impl, NcclGroup& g, NcclWork& w, const void* in, void* out,
                       std::size_t bytes) {
  (void)impl;
  Staged& src = w.stage(in, bytes, true, false);
  Staged& dst = w.stage(out, bytes * g.ranks.size(), false, true);
  nccl_ok(ncclAllGather(src.device, dst.device, bytes, ncclUint8, g.comm, g.stream), "ncclAllGather");
}

std::shared_ptr<NcclWork> new_work(NcclCommunicator::Impl& impl, NcclGroup& g, int id, OpKind kind) {
  auto w = std::make_shared<NcclWork>();
  w->impl = &impl;
  w->op = {id, g.seq++, kind};
  w->comm = g.comm;
  w->stream = g.stream;
  return w;
}

// Checked mode: the members' signatures, all-gathered over the group; comm_mismatch on
// disagreement, on every member alike.
void agree(NcclCommunicator::Impl& impl, const Group& group, NcclGroup& g, const OpSignature& mine,
           const NcclCommunicator::Impl::Op& op) {
  int n = group.size();
  std::size_t bytes = signature_wire_bytes(n);
  std::vector<std::uint8_t> send(bytes), all(bytes * static_cast<std::size_t>(n));
  write_signature(mine, n, send.data());
  NcclWork w;
  w.impl = &impl;
  w.op = op;
  w.comm = g.comm;
  w.stream = g.stream;
  launch_all_gather(impl, g, w, send.data(), all.data(), bytes);
  impl.settle(g.comm, op);
  w.record();
  w.wait();
  std::vector<OpSignature> members;
  for (int i = 0; i < n; ++i) members.push_back(read_signature(all.data() + bytes * static_cast<std::size_t>(i), n));
  if (auto error = signature_mismatch(group, op.seq, members)) throw *error;
}

}  // namespace

Group NcclCommunicator::new_group(std::span<const int> ranks, const std::string& backend) {
  std::vector<int> sorted = checked_group_ranks(ranks, backend, impl_->size);
  impl_->use_device();
  NcclGroup& world = impl_->lookup(this->world());
  Impl::Op op{0, -1, OpKind::all_gather};
  // Agreement first: every rank's request, all-gathered over the world.
  auto n = static_cast<std::size_t>(impl_->size);
  std::vector<std::uint64_t> mine = group_request(sorted, backend, impl_->size), all((n + 1) * n);
  {
    NcclWork w;
    w.impl = impl_.get();
    w.op = op;
    w.comm = world.comm;
    w.stream = world.stream;
    launch_all_gather(*impl_, world, w, mine.data(), all.data(), 8 * (n + 1));
    impl_->settle(world.comm, op);
    w.record();
    w.wait();
  }
  if (auto error = group_request_mismatch(impl_->rank, sorted, backend, all, impl_->size)) throw *error;
  int id = static_cast<int>(impl_->groups.size());
  bool member = std::binary_search(sorted.begin(), sorted.end(), impl_->rank);
  if (!is_accelerator_backend_name(backend)) {
    if (!impl_->host) {
      throw CommError(Errc::comm_usage, "new_group on host backend '" + backend +
                                            "': this NCCL clique has no host transport (start it under mpirun)");
    }
    Group host_group = impl_->host->new_group(sorted, backend);
    impl_->add_group(nullptr, sorted, backend);
    impl_->groups.back().host = host_group;
    return Group(id, std::move(sorted), backend, impl_->rank);
  }
  ncclComm_t comm = nullptr;
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // Every world rank joins the split (non-members with no colour); the child inherits the
  // world's configuration, non-blocking under mpirun.
  nccl_ok(ncclCommSplit(world.comm, member ? 0 : NCCL_SPLIT_NOCOLOR, impl_->rank, &comm, nullptr), "ncclCommSplit");
  impl_->settle(world.comm, op);
  if (comm) impl_->settle(comm, op);
#else
  // Older NCCL: the group's first member makes an id and the world broadcasts it over the
  // host transport; members initialize from it.
  if (!impl_->host) {
    throw CommError(Errc::comm_usage, "NCCL before 2.18 has no ncclCommSplit, and this clique has no host transport");
  }
  ncclUniqueId uid{};
  if (impl_->rank == sorted.front()) nccl_ok(ncclGetUniqueId(&uid), "ncclGetUniqueId");
  impl_->host->broadcast(impl_->host->world(), {&uid, sizeof uid, MemorySpace::host}, sorted.front()).wait();
  if (member) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int index = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), impl_->rank) - sorted.begin());
    nccl_ok(ncclCommInitRankConfig(&comm, static_cast<int>(sorted.size()), uid, index, &config),
            "ncclCommInitRankConfig");
    impl_->settle(comm, op);
  }
#endif
  impl_->add_group(member ? comm : nullptr, sorted, backend);
  return Group(id, std::move(sorted), backend, impl_->rank);
}

Work NcclCommunicator::all_gather(const Group& group, ConstBuffer in, MutableBuffer out) {
  NcclGroup& g = impl_->lookup(group);
  if (g.host) return impl_->host->all_gather(*g.host, in, out);
  OpSignature sig = check_all_gather(group, impl_->rank, in, out);
  impl_->use_device();
  auto w = new_work(*impl_, g, group.id(), OpKind::all_gather);
  if (impl_->options.checked) {
    agree(*impl_, group, g, sig, w->op);
    if (!on_device(in.data)) {
      w->send = in.data;
      w->send_bytes = in.bytes;
      w->send_sum = buffer_checksum(in.data, in.bytes);
    }
  }
  launch_all_gather(*impl_, g, *w, in.data, out.data, in.bytes);
  impl_->settle(g.comm, w->op);
  w->record();
  return Work(w);
}

Work NcclCommunicator::broadcast(const Group& group, MutableBuffer buffer, int root) {
  NcclGroup& g = impl_->lookup(group);
  if (g.host) return impl_->host->broadcast(*g.host, buffer, root);
  OpSignature sig = check_broadcast(group, impl_->rank, buffer, root);
  impl_->use_device();
  auto w = new_work(*impl_, g, group.id(), OpKind::broadcast);
  if (impl_->options.checked) agree(*impl_, group, g, sig, w->op);
  bool root_here = root == impl_->rank;
  Staged& s = w->stage(buffer.data, buffer.bytes, root_here, !root_here);
  nccl_ok(ncclBroadcast(s.device, s.device, buffer.bytes, ncclUint8, group.index_of(root), g.comm, g.stream),
          "ncclBroadcast");
  impl_->settle(g.comm, w->op);
  w->record();
  return Work(w);
}

Work NcclCommunicator::all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) {
  NcclGroup& g = impl_->lookup(group);
  if (g.host) return impl_->host->all_reduce(*g.host, buffer, dtype, op);
  OpSignature sig = check_all_reduce(group, impl_->rank, buffer, dtype, op);
  impl_->use_device();
  auto w = new_work(*impl_, g, group.id(), OpKind::all_reduce);
  if (impl_->options.checked) agree(*impl_, group, g, sig, w->op);
  std::size_t count = buffer.bytes / element_size(dtype);
  if (dtype == DType::int32 || dtype == DType::int64) {  // exact in any order
    Staged& s = w->stage(buffer.data, buffer.bytes, true, true);
    nccl_ok(ncclAllReduce(s.device, s.device, count, nccl_type(dtype), nccl_op(op), g.comm, g.stream),
            "ncclAllReduce");
  } else {
    // Floats: gather every member's values, reduce them on the host in group order.
    auto n = g.ranks.size();
    auto mine = std::make_shared<std::vector<char>>(buffer.bytes);
    auto gathered = std::make_shared<std::vector<char>>(buffer.bytes * n);
    bool device_buffer = on_device(buffer.data);
    if (device_buffer) {
      cuda_ok(cudaMemcpy(mine->data(), buffer.data, buffer.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    } else {
      std::memcpy(mine->data(), buffer.data, buffer.bytes);
    }
    launch_all_gather(*impl_, g, *w, mine->data(), gathered->data(), buffer.bytes);
    void* data = buffer.data;
    std::size_t bytes = buffer.bytes;
    w->finish = [mine, gathered, data, bytes, n, dtype, op, count, device_buffer] {
      std::vector<char> result(gathered->begin(), gathered->begin() + static_cast<std::ptrdiff_t>(bytes));
      for (std::size_t i = 1; i < n; ++i) reduce_into(dtype, op, result.data(), gathered->data() + i * bytes, count);
      if (device_buffer) {
        cuda_ok(cudaMemcpy(data, result.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      } else {
        std::memcpy(data, result.data(), bytes);
      }
    };
  }
  impl_->settle(g.comm, w->op);
  w->record();
  return Work(w);
}

Work NcclCommunicator::all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts,
                                    MutableBuffer out, std::span<const std::size_t> out_counts) {
  NcclGroup& g = impl_->lookup(group);
  if (g.host) return impl_->host->all_to_all_v(*g.host, in, in_counts, out, out_counts);
  OpSignature sig = check_all_to_all_v(group, impl_->rank, in, in_counts, out, out_counts);
  impl_->use_device();
  auto w = new_work(*impl_, g, group.id(), OpKind::all_to_all_v);
  if (impl_->options.checked) {
    agree(*impl_, group, g, sig, w->op);
    if (!on_device(in.data)) {
      w->send = in.data;
      w->send_bytes = sig.bytes;
      w->send_sum = buffer_checksum(in.data, sig.bytes);
    }
  }
  std::size_t received = std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0});
  auto* src = static_cast<char*>(w->stage(in.data, sig.bytes, true, false).device);
  auto* dst = static_cast<char*>(w->stage(out.data, received, false, true).device);
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  std::size_t sdisp = 0, rdisp = 0;
  for (std::size_t i = 0; i < in_counts.size(); ++i) {
    if (in_counts[i]) {
      nccl_ok(ncclSend(src + sdisp, in_counts[i], ncclUint8, static_cast<int>(i), g.comm, g.stream), "ncclSend");
    }
    if (out_counts[i]) {
      nccl_ok(ncclRecv(dst + rdisp, out_counts[i], ncclUint8, static_cast<int>(i), g.comm, g.stream), "ncclRecv");
    }
    sdisp += in_counts[i];
    rdisp += out_counts[i];
  }
  nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  impl_->settle(g.comm, w->op);
  w->record();
  return Work(w);
}

Work NcclCommunicator::barrier(const Group& group) {
  NcclGroup& g = impl_->lookup(group);
  if (g.host) return impl_->host->barrier(*g.host);
  OpSignature sig = check_barrier(group, impl_->rank);
  impl_->use_device();
  auto w = new_work(*impl_, g, group.id(), OpKind::barrier);
  if (impl_->options.checked) agree(*impl_, group, g, sig, w->op);
  nccl_ok(ncclAllReduce(impl_->scratch, impl_->scratch, 1, ncclInt32, ncclSum, g.comm, g.stream), "ncclAllReduce");
  impl_->settle(g.comm, w->op);
  w->record();
  return Work(w);
}

}  // namespace hpref::nccl
