// hpref::mpi: launch/wait over OpenMPI's non-blocking collectives, with deadlines, checked
// mode and the splitting of counts beyond int.
#include "hpref/mpi/communicator.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>

#include "hpref/op_signature.hpp"

namespace hpref::mpi {

namespace {

constexpr int kRemainderTag = 17;  // point-to-point tails of all_to_all_v blocks beyond max_count
constexpr int kAbortStatus = 5;

struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> ranks;
  std::string backend;
  std::int64_t seq = 0;
};

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    case DType::float32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::min: return MPI_MIN;
    default: return MPI_MAX;
  }
}

}  // namespace

struct MpiCommunicator::Impl {
  Options options;
  bool initialized_here = false;
  bool failed = false;
  int rank = 0, size = 1;
  std::vector<GroupComm> groups;  // index: group id; 0 is the world

  // The launch context of one operation, for messages.
  struct Op {
    int group = 0;
    std::int64_t seq = 0;
    OpKind kind = OpKind::barrier;
  };

  [[noreturn]] void backend_error(int rc, const char* call, const Op& op) const {
    const GroupComm& g = groups[static_cast<std::size_t>(op.group)];
    throw CommError(Errc::comm_backend,
                    std::string(call) + " for " + op_kind_name(op.kind) + " on group " + std::to_string(op.group) +
                        " seq " + std::to_string(op.seq) + " failed on rank " + std::to_string(rank) + ": " +
                        mpi_error_text(rc),
                    op.group, op.seq, g.ranks);
  }

  void check(int rc, const char* call, const Op& op) const {
    if (rc != MPI_SUCCESS) backend_error(rc, call, op);
  }

  GroupComm& lookup(const Group& group) {
    auto id = static_cast<std::size_t>(group.id());
    if (group.id() < 0 || id >= groups.size() || groups[id].ranks != group.ranks()) {
      throw CommError(Errc::comm_usage, "group " + std::to_string(group.id()) + " " + rank_list_text(group.ranks()) +
                                            " was not created by this MPI communicator",
                      group.id());
    }
    if (failed) {
      throw CommError(Errc::comm_timeout, "this MPI communicator timed out earlier; its job must be aborted",
                      group.id());
    }
    return groups[id];
  }

  // Polls until every request completes, or raises comm_timeout past the deadline.
  void wait_all(std::vector<MPI_Request>& requests, const Op& op) {
    if (requests.empty()) return;
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
    for (unsigned spin = 0;; ++spin) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall", op);
      if (done) return;
      if ((spin & 31) == 31 && std::chrono::steady_clock::now() > deadline) {
        failed = true;
        const GroupComm& g = groups[static_cast<std::size_t>(op.group)];
        throw CommError(Errc::comm_timeout,
                        std::string(op_kind_name(op.kind)) + " on group " + std::to_string(op.group) + " " +
                            rank_list_text(g.ranks) + " seq " + std::to_string(op.seq) + " did not complete within " +
                            std::to_string(options.timeout_ms) +
                            " ms on rank " + std::to_string(rank) +
                            ": a member is missing, dead or running other operations; the job must be aborted "
                            "(SPEC 9.2)",
                        op.group, op.seq, g.ranks);
      }
      if (spin >= 64) sched_yield();  // oversubscribed ranks share cores
    }
  }

  // Checked mode: every member's signature, all-gathered; comm_mismatch on disagreement.
  void agree(const Group& group, GroupComm& g, const OpSignature& mine, const Op& op) {
    int n = group.size();
    std::size_t bytes = signature_wire_bytes(n);
    std::vector<std::uint8_t> send(bytes), all(bytes * static_cast<std::size_t>(n));
    write_signature(mine, n, send.data());
    std::vector<MPI_Request> request(1);
    check(MPI_Iallgather(send.data(), static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE,
                         g.comm, request.data()),
          "MPI_Iallgather", op);
    wait_all(request, op);
    std::vector<OpSignature> members;
    for (int i = 0; i < n; ++i) members.push_back(read_signature(all.data() + bytes * static_cast<std::size_t>(i), n));
    if (auto error = signature_mismatch(group, op.seq, members)) throw *error;
  }
};

namespace {

// A launched operation: its requests, what must outlive them (MPI reads count arrays and
// datatypes until completion), and what happens at completion.
struct MpiWork final : Work::State {
  MpiCommunicator::Impl* impl = nullptr;
  MpiCommunicator::Impl::Op op;
  std::vector<MPI_Request> requests;
  std::vector<int> counts[4];
  std::vector<MPI_Datatype> types[2];
  std::vector<MPI_Datatype> owned;  // committed derived types, freed at completion
  const void* send = nullptr;       // checked mode: the send buffer and its launch checksum
  std::size_t send_bytes = 0;
  std::uint64_t send_sum = 0;
  std::function<void()> finish;  // e.g. the ordered float reduction
  bool done = false;
  std::optional<CommError> error;

  ~MpiWork() override {
    if (done && !impl->failed) release();  // an unfinished operation may still use its types
  }

  void release() {
    for (MPI_Datatype& t : owned) MPI_Type_free(&t);
    owned.clear();
  }

  void wait() override {
    if (done) {
      if (error) throw *error;
      return;
    }
    try {
      impl->wait_all(requests, op);
    } catch (const CommError& e) {
      done = true;  // a timed-out operation's types stay allocated: MPI may still use them
      error = e;
      throw;
    }
    done = true;
    release();
    if (send_bytes && buffer_checksum(send, send_bytes) != send_sum) {
      error = CommError(Errc::comm_buffer_mutated,
                        "rank " + std::to_string(impl->rank) + " changed its send buffer of " +
                            op_kind_name(op.kind) + " on group " + std::to_string(op.group) + " seq " +
                            std::to_string(op.seq) + " between launch and wait",
                        op.group, op.seq, {impl->rank});
      throw *error;
    }
    if (finish) finish();
  }
};

MPI_Datatype commit(MpiWork& w, MPI_Datatype t) {
  MPI_Type_commit(&t);
  w.owned.push_back(t);
  return t;
}

// Adds the requests of an all-gather of `b` bytes per member into `dst` (member i at i * b):
// one MPI_Iallgather when counts and displacements fit, else rounds of at most `limit`
// bytes per member through a receive type whose extent is the whole block.
void gather_into(MpiCommunicator::Impl& impl, MPI_Comm comm, MpiWork& w, const char* src, std::size_t b, char* dst,
                 std::size_t n) {
  std::size_t limit = impl.options.max_count;
  if (b <= limit && b * (n - 1) <= limit) {
    w.requests.emplace_back();
    impl.check(MPI_Iallgather(src, static_cast<int>(b), MPI_BYTE, dst, static_cast<int>(b), MPI_BYTE, comm,
                              &w.requests.back()),
               "MPI_Iallgather", w.op);
    return;
  }
  for (std::size_t off = 0; off < b; off += limit) {
    int len = static_cast<int>(std::min(limit, b - off));
    MPI_Datatype piece, spaced;
    MPI_Type_contiguous(len, MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(b), &spaced);
    MPI_Type_free(&piece);
    spaced = commit(w, spaced);
    w.requests.emplace_back();
    impl.check(MPI_Iallgather(src + off, len, MPI_BYTE, dst + off, 1, spaced, comm, &w.requests.back()),
               "MPI_Iallgather", w.op);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (options.max_count < 1 || options.max_count > static_cast<std::size_t>(INT_MAX) || options.timeout_ms < 1) {
    throw Error(Errc::invalid_argument, "MPI options need 1 <= max_count <= INT_MAX and a positive timeout_ms, got " +
                                            std::to_string(options.max_count) + " and " +
                                            std::to_string(options.timeout_ms));
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      throw CommError(Errc::comm_backend, "MPI_Init_thread failed");
    }
    impl_->initialized_here = true;
  }
  GroupComm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world.comm);
  MPI_Comm_set_errhandler(world.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world.comm, &impl_->rank);
  MPI_Comm_size(world.comm, &impl_->size);
  world.ranks.resize(static_cast<std::size_t>(impl_->size));
  std::iota(world.ranks.begin(), world.ranks.end(), 0);
  world.backend = "mpi";
  impl_->groups.push_back(std::move(world));
}

MpiCommunicator::~MpiCommunicator() {
  if (impl_->failed) {
    if (impl_->initialized_here) abort_job(kAbortStatus);
    return;  // the program owns MPI and must abort the job itself
  }
  for (GroupComm& g : impl_->groups) {
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
  }
  if (impl_->initialized_here) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
const Options& MpiCommunicator::options() const noexcept { return impl_->options; }
bool MpiCommunicator::failed() const noexcept { return impl_->failed; }

void MpiCommunicator::abort_job(int status) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this is for the compiler
}

Group MpiCommunicator::world() const { return Group(0, impl_->groups[0].ranks, "mpi", impl_->rank); }

Group MpiCommunicator::new_group(std::span<const int> ranks, const std::string& backend) {
  std::vector<int> sorted = checked_group_ranks(ranks, backend, impl_->size);
  if (is_accelerator_backend_name(backend)) {
    throw CommError(Errc::comm_usage, "new_group on backend '" + backend +
                                          "': the mpi world moves host memory only; accelerator groups need the "
                                          "nccl world (--backend nccl)");
  }
  Impl::Op op{0, -1, OpKind::all_gather};
  GroupComm& world = impl_->lookup(this->world());
  // Agreement first: every rank's request, all-gathered (MPI_Comm_split has no deadline).
  auto n = static_cast<std::size_t>(impl_->size);
  std::vector<std::uint64_t> mine = group_request(sorted, backend, impl_->size), all((n + 1) * n);
  std::vector<MPI_Request> request(1);
  impl_->check(MPI_Iallgather(mine.data(), static_cast<int>(8 * (n + 1)), MPI_BYTE, all.data(),
                              static_cast<int>(8 * (n + 1)), MPI_BYTE, world.comm, request.data()),
               "MPI_Iallgather", op);
  impl_->wait_all(request, op);
  if (auto error = group_request_mismatch(impl_->rank, sorted, backend, all, impl_->size)) throw *error;
  bool member = std::binary_search(sorted.begin(), sorted.end(), impl_->rank);
  GroupComm g;
  impl_->check(MPI_Comm_split(world.comm, member ? 0 : MPI_UNDEFINED, impl_->rank, &g.comm), "MPI_Comm_split", op);
  if (g.comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  g.ranks = sorted;
  g.backend = backend;
  int id = static_cast<int>(impl_->groups.size());
  impl_->groups.push_back(std::move(g));
  return Group(id, std::move(sorted), backend, impl_->rank);
}

Work MpiCommunicator::all_gather(const Group& group, ConstBuffer in, MutableBuffer out) {
  OpSignature sig = check_all_gather(group, impl_->rank, in, out);
  GroupComm& g = impl_->lookup(group);
  auto w = std::make_shared<MpiWork>();
  w->impl = impl_.get();
  w->op = {group.id(), g.seq++, OpKind::all_gather};
  if (impl_->options.checked) {
    impl_->agree(group, g, sig, w->op);
    w->send = in.data;
    w->send_bytes = in.bytes;
    w->send_sum = buffer_checksum(in.data, in.bytes);
  }
  gather_into(*impl_, g.comm, *w, static_cast<const char*>(in.data), in.bytes, static_cast<char*>(out.data),
              static_cast<std::size_t>(group.size()));
  return Work(w);
}

Work MpiCommunicator::broadcast(const Group& group, MutableBuffer buffer, int root) {
  OpSignature sig = check_broadcast(group, impl_->rank, buffer, root);
  GroupComm& g = impl_->lookup(group);
  auto w = std::make_shared<MpiWork>();
  w->impl = impl_.get();
  w->op = {group.id(), g.seq++, OpKind::broadcast};
  if (impl_->options.checked) {
    impl_->agree(group, g, sig, w->op);
    if (root == impl_->rank) {
      w->send = buffer.data;
      w->send_bytes = buffer.bytes;
      w->send_sum = buffer_checksum(buffer.data, buffer.bytes);
    }
  }
  auto* data = static_cast<char*>(buffer.data);
  std::size_t limit = impl_->options.max_count;
  std::size_t off = 0;
  do {  // one Ibcast even for zero bytes, so that every member matches it
    int len = static_cast<int>(std::min(limit, buffer.bytes - off));
    w->requests.emplace_back();
    impl_->check(MPI_Ibcast(data + off, len, MPI_BYTE, group.index_of(root), g.comm, &w->requests.back()),
                 "MPI_Ibcast", w->op);
    off += static_cast<std::size_t>(len);
  } while (off < buffer.bytes);
  return Work(w);
}

Work MpiCommunicator::all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) {
  OpSignature sig = check_all_reduce(group, impl_->rank, buffer, dtype, op);
  GroupComm& g = impl_->lookup(group);
  auto w = std::make_shared<MpiWork>();
  w->impl = impl_.get();
  w->op = {group.id(), g.seq++, OpKind::all_reduce};
  if (impl_->options.checked) impl_->agree(group, g, sig, w->op);
  std::size_t esize = element_size(dtype), count = buffer.bytes / esize, limit = impl_->options.max_count;
  auto* data = static_cast<char*>(buffer.data);
  if (dtype == DType::int32 || dtype == DType::int64) {
    // Integer reductions are exact in any order.
    std::size_t off = 0;
    do {
      int len = static_cast<int>(std::min(limit, count - off));
      w->requests.emplace_back();
      impl_->check(MPI_Iallreduce(MPI_IN_PLACE, data + off * esize, len, mpi_type(dtype), mpi_op(op), g.comm,
                                  &w->requests.back()),
                   "MPI_Iallreduce", w->op);
      off += static_cast<std::size_t>(len);
    } while (off < count);
    return Work(w);
  }
  // Floats: gather every member's values and reduce them in group order at wait().
  auto n = static_cast<std::size_t>(group.size());
  auto gathered = std::make_shared<std::vector<char>>(buffer.bytes * n);
  auto copy = std::make_shared<std::vector<char>>(data, data + buffer.bytes);
  gather_into(*impl_, g.comm, *w, copy->data(), buffer.bytes, gathered->data(), n);
  w->finish = [gathered, copy, data, bytes = buffer.bytes, n, dtype, op, count] {
    std::memcpy(data, gathered->data(), bytes);
    for (std::size_t i = 1; i < n; ++i) reduce_into(dtype, op, data, gathered->data() + i * bytes, count);
  };
  return Work(w);
}

Work MpiCommunicator::all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts,
                                   MutableBuffer out, std::span<const std::size_t> out_counts) {
  OpSignature sig = check_all_to_all_v(group, impl_->rank, in, in_counts, out, out_counts);
  GroupComm& g = impl_->lookup(group);
  auto w = std::make_shared<MpiWork>();
  w->impl = impl_.get();
  w->op = {group.id(), g.seq++, OpKind::all_to_all_v};
  if (impl_->options.checked) {
    impl_->agree(group, g, sig, w->op);
    w->send = in.data;
    w->send_bytes = sig.bytes;
    w->send_sum = buffer_checksum(in.data, sig.bytes);
  }
  auto n = static_cast<std::size_t>(group.size());
  std::size_t limit = impl_->options.max_count;
  const auto* src = static_cast<const char*>(in.data);
  auto* dst = static_cast<char*>(out.data);
  for (auto& c : w->counts) c.assign(n, 0);
  for (auto& t : w->types) t.assign(n, MPI_BYTE);
  // One MPI_Ialltoallw carries the first `limit` bytes of every block. A block whose
  // displacement is beyond `limit` travels as a one-block datatype holding its 64-bit
  // displacement; the rest of a block longer than `limit` follows as point-to-point
  // pieces, which only the two ranks concerned need to know about.
  struct Tail {
    const char* send;
    char* recv;
    std::size_t bytes;
    int peer;
  };
  std::vector<Tail> tails;
  auto place = [&](std::size_t i, std::size_t displacement, std::size_t count, int side) {
    std::size_t head = std::min(count, limit);
    if (head == 0) return;
    if (displacement <= limit) {
      w->counts[2 * side][i] = static_cast<int>(head);
      w->counts[2 * side + 1][i] = static_cast<int>(displacement);
    } else {
      int len = static_cast<int>(head);
      MPI_Aint where = static_cast<MPI_Aint>(displacement);
      MPI_Datatype t;
      MPI_Type_create_hindexed(1, &len, &where, MPI_BYTE, &t);
      w->types[side][i] = commit(*w, t);
      w->counts[2 * side][i] = 1;
    }
  };
  std::size_t sdisp = 0, rdisp = 0;
  for (std::size_t i = 0; i < n; ++i) {
    place(i, sdisp, in_counts[i], 0);
    place(i, rdisp, out_counts[i], 1);
    if (in_counts[i] > limit) tails.push_back({src + sdisp + limit, nullptr, in_counts[i] - limit, static_cast<int>(i)});
    if (out_counts[i] > limit) tails.push_back({nullptr, dst + rdisp + limit, out_counts[i] - limit, static_cast<int>(i)});
    sdisp += in_counts[i];
    rdisp += out_counts[i];
  }
  w->requests.emplace_back();
  impl_->check(MPI_Ialltoallw(src, w->counts[0].data(), w->counts[1].data(), w->types[0].data(), dst,
                              w->counts[2].data(), w->counts[3].data(), w->types[1].data(), g.comm,
                              &w->requests.back()),
               "MPI_Ialltoallw", w->op);
  for (const Tail& t : tails) {
    for (std::size_t off = 0; off < t.bytes; off += limit) {
      int len = static_cast<int>(std::min(limit, t.bytes - off));
      w->requests.emplace_back();
      if (t.send) {
        impl_->check(MPI_Isend(t.send + off, len, MPI_BYTE, t.peer, kRemainderTag, g.comm, &w->requests.back()),
                     "MPI_Isend", w->op);
      } else {
        impl_->check(MPI_Irecv(t.recv + off, len, MPI_BYTE, t.peer, kRemainderTag, g.comm, &w->requests.back()),
                     "MPI_Irecv", w->op);
      }
    }
  }
  return Work(w);
}

Work MpiCommunicator::barrier(const Group& group) {
  OpSignature sig = check_barrier(group, impl_->rank);
  GroupComm& g = impl_->lookup(group);
  auto w = std::make_shared<MpiWork>();
  w->impl = impl_.get();
  w->op = {group.id(), g.seq++, OpKind::barrier};
  if (impl_->options.checked) impl_->agree(group, g, sig, w->op);
  w->requests.resize(1);
  impl_->check(MPI_Ibarrier(g.comm, w->requests.data()), "MPI_Ibarrier", w->op);
  return Work(w);
}

}  // namespace hpref::mpi
