// hpref::mpi's transport: OpenMPI's non-blocking collectives under the operation core,
// polled against the core's deadline, with counts and displacements beyond int split.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "hpref/device/transport.hpp"
#include "hpref/mpi/communicator.hpp"

namespace hpref::mpi {

namespace {

using device::OpContext;
using device::PendingPtr;

// The tag of an all_to_all_v block's point-to-point tail (its bytes beyond max_count): the
// operation's sequence number, wrapped to MPI_TAG_UB. A tail nobody received (members
// disagreeing on a count, unchecked) then never matches a later operation's tail between
// the same two ranks; with one tag for all, the next exchange took it for its own bytes.
int tail_tag(std::int64_t seq) {
  static const int upper = [] {
    int* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    return found && ub && *ub > 0 ? *ub : 32767;  // MPI guarantees at least 32767
  }();
  return static_cast<int>(std::max<std::int64_t>(seq, 0) % upper);
}
constexpr int kAbortStatus = 5;

std::string error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  return MPI_Error_string(rc, text, &len) == MPI_SUCCESS
             ? std::string(text, static_cast<std::size_t>(len))
             : "MPI error " + std::to_string(rc);
}

std::string failed_text(const char* call, const OpContext& op, int rc) {
  return std::string(call) + " for " + op_kind_name(op.kind) + " on group " +
         std::to_string(op.group) + " seq " + std::to_string(op.seq) + " failed on rank " +
         std::to_string(op.rank) + ": " + error_text(rc);
}

void check(int rc, const char* call, const OpContext& op) {
  if (rc == MPI_SUCCESS) return;
  throw CommError(Errc::comm_backend, failed_text(call, op, rc), op.group, op.seq,
                  std::vector<int>(op.ranks.begin(), op.ranks.end()));
}

// MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF: for the transport's life when it
// initialized MPI, else while a wait polls, the program's handlers put back after (MPI's
// own pattern for a library; four handle calls, ~0.4 us of a 3 us wait, so not when the
// transport owns MPI). Open MPI raises the error of a
// non-blocking collective's request in MPI_Testall on the world's handler, not on the
// request's communicator (whose handler is ERRORS_RETURN): with the default
// MPI_ERRORS_ARE_FATAL a truncated broadcast killed the job instead of raising CommError.
class ErrorsReturn {
 public:
  ErrorsReturn() {
    for (int i = 0; i < 2; ++i) {
      MPI_Comm_get_errhandler(comms_[i], &saved_[i]);
      MPI_Comm_set_errhandler(comms_[i], MPI_ERRORS_RETURN);
    }
  }
  ~ErrorsReturn() {
    for (int i = 0; i < 2; ++i) {
      MPI_Comm_set_errhandler(comms_[i], saved_[i]);
      MPI_Errhandler_free(&saved_[i]);
    }
  }
  ErrorsReturn(const ErrorsReturn&) = delete;
  ErrorsReturn& operator=(const ErrorsReturn&) = delete;

 private:
  MPI_Comm comms_[2] = {MPI_COMM_WORLD, MPI_COMM_SELF};
  MPI_Errhandler saved_[2] = {MPI_ERRHANDLER_NULL, MPI_ERRHANDLER_NULL};
};

// Process-wide: whether hpref initialized MPI (it then finalizes MPI when the last of its
// transports ends, and aborts the job when one failed), how many transports are alive, and
// the thread level MPI was initialized with. Communicators are made and destroyed by the
// thread that drives them (SPEC 9.1), so plain fields.
struct MpiProcess {
  bool ours = false;
  int live = 0;
  int level = MPI_THREAD_SINGLE;
  std::string failed_start;  // why a communicator could not be made, when MPI is ours
};
MpiProcess& mpi_process() {
  static MpiProcess p;
  return p;
}

std::string level_name(int level) {
  const char* name = level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
                     : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
                     : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                     : level == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                                      : "thread level";
  return std::string(name) + " (" + std::to_string(level) + ")";
}

// Below MPI_THREAD_SERIALIZED only MPI's main thread may call MPI (SINGLE: there is no
// other). A Work may be launched or waited from another thread (SPEC 9.1); there hpref
// would call MPI where the program told MPI it never would.
std::string wrong_mpi_thread() {
  if (mpi_process().level >= MPI_THREAD_SERIALIZED) return {};
  int main = 1;
  MPI_Is_thread_main(&main);
  if (main) return {};
  return "a thread other than MPI's main thread, but MPI was initialized with " +
         level_name(mpi_process().level) +
         ", which allows MPI calls on the main thread only; initialize MPI with "
         "MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...) to launch and wait operations on "
         "other threads (SPEC 9.1)";
}

[[noreturn]] void abort_mpi_job(int status) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this is for the compiler
}

// A communicator whose making failed (its MPI_Comm_idup timed out: some rank never made
// one) leaves that request pending for ever, so MPI can be neither finalized nor used
// again. There is no communicator whose end would abort the job (SPEC 9.2), so when hpref
// initialized MPI the process aborts it when it exits; the caller gets the error first.
void fail_start(const std::string& why) {
  MpiProcess& process = mpi_process();
  if (!process.ours || !process.failed_start.empty()) return;
  process.failed_start = why;
  std::atexit([] {
    std::fprintf(stderr,
                 "hpref: aborting the MPI job (status %d) at exit: an MpiCommunicator could not "
                 "be made: %s\n",
                 kAbortStatus, mpi_process().failed_start.c_str());
    abort_mpi_job(kAbortStatus);
  });
}

// A launched operation: its requests and what must outlive them (MPI reads count arrays
// and datatypes until completion).
struct MpiPending final : device::Pending {
  device::Transport* transport = nullptr;
  OpContext op;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<MPI_Request> requests;
  std::vector<int> counts[4];
  std::vector<MPI_Datatype> types[2];
  std::vector<MPI_Datatype> owned;  // committed derived types, freed at completion
  bool program_handlers = false;    // the program owns MPI: ErrorsReturn around the poll
  bool waited = false;

  ~MpiPending() override {
    if (waited && !transport->failed())
      release();  // an unfinished operation may still use its types
  }

  // An MPI error while waiting (a truncated message: members disagreeing on a count, which
  // checked mode would have named) fails the transport: the collective is half done on some
  // members, so the job must be aborted, and each request's own error is named.
  void wait() override {
    waited = true;  // a timed-out operation's types stay allocated: MPI may still use them
    if (!requests.empty()) {
      std::optional<ErrorsReturn> errors_return;
      if (program_handlers) errors_return.emplace();
      std::vector<MPI_Status> statuses(requests.size());
      transport->poll(op, [&] {
        int done = 0;
        int rc =
            MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
        if (rc == MPI_ERR_IN_STATUS) {
          for (const MPI_Status& st : statuses) {
            if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) {
              rc = st.MPI_ERROR;
              break;
            }
          }
        }
        if (rc != MPI_SUCCESS)
          transport->fail(Errc::comm_backend, failed_text("MPI_Testall", op, rc), op);
        return done != 0;
      });
    }
    release();
  }

  MPI_Request* next() { return &requests.emplace_back(); }
  MPI_Datatype commit(MPI_Datatype t) {
    MPI_Type_commit(&t);
    owned.push_back(t);
    return t;
  }
  void release() {
    for (MPI_Datatype& t : owned) MPI_Type_free(&t);
    owned.clear();
  }
};

class MpiTransport final : public device::Transport {
 public:
  // The world's duplicate is made non-blocking and polled against the deadline: every rank
  // of the job must make one, and a rank that never did (its own options refused, an
  // exception before it) held the others in MPI_Comm_dup for ever.
  MpiTransport(const Options& options, int rank, int size)
      : device::Transport("MPI", "the job must be aborted", rank, size, options.timeout_ms),
        limit_(options.max_count) {
    comms_.push_back(MPI_COMM_NULL);
    OpContext op{0, -1, OpKind::barrier, world_ranks(), rank};
    MPI_Request dup = MPI_REQUEST_NULL;
    try {
      check(MPI_Comm_idup(MPI_COMM_WORLD, &comms_[0], &dup), "MPI_Comm_idup", op);
      poll(
          op,
          [&] {
            int done = 0;
            MPI_Test(&dup, &done, MPI_STATUS_IGNORE);
            return done != 0;
          },
          "the MpiCommunicator of rank " + std::to_string(rank) +
              " (MPI_Comm_idup of MPI_COMM_WORLD, which every rank of the job makes)");
    } catch (const std::exception& e) {
      fail_start(e.what());
      throw;
    }
    MPI_Comm_set_errhandler(comms_[0], MPI_ERRORS_RETURN);
    if (mpi_process().ours) {  // MPI is ours: no handler of the program's to put back
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    }
    ++mpi_process().live;
  }

  // MPI is finalized when the last transport ends, if hpref initialized it: finalized under
  // another live communicator, that one's end freed its communicators after MPI_Finalize,
  // which Open MPI answers by ending the job. After the program's own MPI_Finalize nothing
  // is freed (MPI freed them; the calls would end the job the same way).
  ~MpiTransport() override {
    MpiProcess& process = mpi_process();
    --process.live;
    if (failed()) {
      if (process.ours) abort_mpi_job(kAbortStatus);
      return;  // the program owns MPI and must abort the job itself
    }
    if (process.ours && !process.failed_start.empty())
      return;  // MPI cannot be finalized (a dup is pending): the process's exit aborts the job
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Comm& c : comms_) {
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    }
    if (process.ours && process.live == 0) MPI_Finalize();
  }

  PendingPtr all_gather(const OpContext& op, const void* in, void* out,
                        std::size_t bytes) override {
    auto w = start(op);
    gather_into(*w, static_cast<const char*>(in), bytes, static_cast<char*>(out));
    return w;
  }

  PendingPtr broadcast(const OpContext& op, void* data, std::size_t bytes, int root,
                       bool) override {
    auto w = start(op);
    std::size_t off = 0;
    do {  // one Ibcast even for zero bytes, so that every member matches it
      int len = static_cast<int>(std::min(limit_, bytes - off));
      check(MPI_Ibcast(static_cast<char*>(data) + off, len, MPI_BYTE, root, w->comm, w->next()),
            "MPI_Ibcast", op);
      off += static_cast<std::size_t>(len);
    } while (off < bytes);
    return w;
  }

  PendingPtr all_reduce(const OpContext& op, const void* in, void* out, std::size_t count,
                        DType dtype, ReduceOp reduce) override {
    auto w = start(op);
    MPI_Datatype type = dtype == DType::int32 ? MPI_INT32_T : MPI_INT64_T;
    MPI_Op mop = reduce == ReduceOp::sum ? MPI_SUM : reduce == ReduceOp::min ? MPI_MIN : MPI_MAX;
    std::size_t esize = element_size(dtype), off = 0;
    do {
      int len = static_cast<int>(std::min(limit_, count - off));
      const void* send = in == out ? MPI_IN_PLACE : static_cast<const char*>(in) + off * esize;
      check(MPI_Iallreduce(send, static_cast<char*>(out) + off * esize, len, type, mop, w->comm,
                           w->next()),
            "MPI_Iallreduce", op);
      off += static_cast<std::size_t>(len);
    } while (off < count);
    return w;
  }

  PendingPtr all_to_all_v(const OpContext& op, const void* in,
                          std::span<const std::size_t> in_counts,
                          std::span<const std::size_t> in_displs, void* out,
                          std::span<const std::size_t> out_counts) override;

  PendingPtr barrier(const OpContext& op) override {
    auto w = start(op);
    check(MPI_Ibarrier(w->comm, w->next()), "MPI_Ibarrier", op);
    return w;
  }

  void refuse_backend(const std::string& backend) override {
    if (!is_accelerator_backend_name(backend)) return;
    throw CommError(Errc::comm_usage,
                    "new_group on backend '" + backend +
                        "': the mpi world moves host memory only; accelerator groups need the "
                        "nccl world (--backend nccl)");
  }

  std::string wrong_thread() const override { return wrong_mpi_thread(); }

  // MPI_Comm_split over the world, which non-members join with MPI_UNDEFINED.
  void add_group(const OpContext& op, int id, std::span<const int>, bool member) override {
    comms_.resize(static_cast<std::size_t>(id) + 1, MPI_COMM_NULL);
    check(MPI_Comm_split(comms_[0], member ? 0 : MPI_UNDEFINED, rank(), &comms_.back()),
          "MPI_Comm_split", op);
    if (comms_.back() != MPI_COMM_NULL) MPI_Comm_set_errhandler(comms_.back(), MPI_ERRORS_RETURN);
  }

 private:
  std::unique_ptr<MpiPending> start(const OpContext& op) {
    auto w = std::make_unique<MpiPending>();
    w->transport = this;
    w->program_handlers = !mpi_process().ours;
    w->op = op;
    w->comm = comms_[static_cast<std::size_t>(op.group)];
    return w;
  }

  // Adds to `w` the requests of an all-gather of `b` bytes per member into `dst` (member i
  // at i * b): one MPI_Iallgather when counts and displacements fit, else rounds of at most
  // max_count bytes per member through a receive type whose extent is the whole block.
  void gather_into(MpiPending& w, const char* src, std::size_t b, char* dst) {
    if (b <= limit_ && b * (w.op.ranks.size() - 1) <= limit_) {
      check(MPI_Iallgather(src, static_cast<int>(b), MPI_BYTE, dst, static_cast<int>(b), MPI_BYTE,
                           w.comm, w.next()),
            "MPI_Iallgather", w.op);
      return;
    }
    for (std::size_t off = 0; off < b; off += limit_) {
      int len = static_cast<int>(std::min(limit_, b - off));
      MPI_Datatype piece, spaced;
      MPI_Type_contiguous(len, MPI_BYTE, &piece);
      MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(b), &spaced);
      MPI_Type_free(&piece);
      spaced = w.commit(spaced);
      check(MPI_Iallgather(src + off, len, MPI_BYTE, dst + off, 1, spaced, w.comm, w.next()),
            "MPI_Iallgather", w.op);
    }
  }

  std::size_t limit_;
  std::vector<MPI_Comm> comms_;  // by group id; MPI_COMM_NULL where this rank is not a member
};

// One MPI_Ialltoallw carries the first max_count bytes of every block. A block whose
// displacement is beyond max_count travels as a one-block datatype holding its 64-bit
// displacement; the rest of a block longer than max_count follows as point-to-point
// pieces, which only the two ranks concerned need to know about.
PendingPtr MpiTransport::all_to_all_v(const OpContext& op, const void* in,
                                      std::span<const std::size_t> in_counts,
                                      std::span<const std::size_t> in_displs, void* out,
                                      std::span<const std::size_t> out_counts) {
  auto w = start(op);
  std::size_t n = in_counts.size();
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  for (auto& c : w->counts) c.assign(n, 0);
  for (auto& t : w->types) t.assign(n, MPI_BYTE);
  struct Tail {
    const char* send;
    char* recv;
    std::size_t bytes;
    int peer;
  };
  std::vector<Tail> tails;
  auto place = [&](std::size_t i, std::size_t displacement, std::size_t count, int side) {
    std::size_t head = std::min(count, limit_);
    if (head == 0) return;
    if (displacement <= limit_) {
      w->counts[2 * side][i] = static_cast<int>(head);
      w->counts[2 * side + 1][i] = static_cast<int>(displacement);
    } else {
      int len = static_cast<int>(head);
      MPI_Aint where = static_cast<MPI_Aint>(displacement);
      MPI_Datatype t;
      MPI_Type_create_hindexed(1, &len, &where, MPI_BYTE, &t);
      w->types[side][i] = w->commit(t);
      w->counts[2 * side][i] = 1;
    }
  };
  std::size_t rdisp = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto peer = static_cast<int>(i);
    place(i, in_displs[i], in_counts[i], 0);
    place(i, rdisp, out_counts[i], 1);
    if (in_counts[i] > limit_)
      tails.push_back({src + in_displs[i] + limit_, nullptr, in_counts[i] - limit_, peer});
    if (out_counts[i] > limit_)
      tails.push_back({nullptr, dst + rdisp + limit_, out_counts[i] - limit_, peer});
    rdisp += out_counts[i];
  }
  check(MPI_Ialltoallw(src, w->counts[0].data(), w->counts[1].data(), w->types[0].data(), dst,
                       w->counts[2].data(), w->counts[3].data(), w->types[1].data(), w->comm,
                       w->next()),
        "MPI_Ialltoallw", op);
  int tag = tail_tag(op.seq);
  for (const Tail& t : tails) {
    for (std::size_t off = 0; off < t.bytes; off += limit_) {
      int len = static_cast<int>(std::min(limit_, t.bytes - off));
      if (t.send) {
        check(MPI_Isend(t.send + off, len, MPI_BYTE, t.peer, tag, w->comm, w->next()), "MPI_Isend",
              op);
      } else {
        check(MPI_Irecv(t.recv + off, len, MPI_BYTE, t.peer, tag, w->comm, w->next()), "MPI_Irecv",
              op);
      }
    }
  }
  return w;
}

// MPI is initialized (MPI_THREAD_SERIALIZED: a Work may be waited from another thread when
// the caller serializes calls) unless the program already did; the level it has is kept
// (wrong_thread).
std::unique_ptr<device::Transport> open(const Options& options) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw CommError(Errc::comm_usage,
                    "MPI was finalized (by an earlier MpiCommunicator of this process, or by the "
                    "program): MPI cannot be initialized again; keep one MpiCommunicator for the "
                    "process's whole run");
  }
  if (!mpi_process().failed_start.empty()) {
    throw CommError(Errc::comm_usage,
                    "an earlier MpiCommunicator of this process could not be made (" +
                        mpi_process().failed_start +
                        "): MPI cannot be used again in this process, and the job is aborted "
                        "when it exits");
  }
  if (options.max_count < 1 || options.max_count > static_cast<std::size_t>(INT_MAX) ||
      options.timeout_ms < 1) {
    throw Error(Errc::invalid_argument,
                "MPI options need 1 <= max_count <= INT_MAX and a positive timeout_ms, got " +
                    std::to_string(options.max_count) + " and " +
                    std::to_string(options.timeout_ms));
  }
  int initialized = 0, provided = 0, rank = 0, size = 1;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
      throw CommError(Errc::comm_backend,
                      "MPI_Init_thread(MPI_THREAD_SERIALIZED) failed: " + error_text(rc));
    }
    mpi_process().ours = true;
  }
  MPI_Query_thread(&mpi_process().level);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::make_unique<MpiTransport>(options, rank, size);
}

}  // namespace

MpiCommunicator::MpiCommunicator(Options options)
    : CoreCommunicator(open(options), "mpi", options.checked), options_(options) {}

MpiCommunicator::~MpiCommunicator() = default;

const Options& MpiCommunicator::options() const noexcept { return options_; }

void MpiCommunicator::abort_job(int status) { abort_mpi_job(status); }

}  // namespace hpref::mpi
