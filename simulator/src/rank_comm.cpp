// The rank side of the simulator (see rank_comm.hpp).
#include "rank_comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>

#include "hpref/detail/checksum.hpp"

#ifdef HPREF_GCOV_DUMP
// Coverage builds (HPREF_COVERAGE): a rank ends with _exit, which skips gcov's atexit writer.
extern "C" void __gcov_dump(void);
#endif

namespace hpref::sim::detail {

// What a launch stages and how its wait delivers.
struct RankComm::Launch {
  const Group& group;
  OpSignature sig;
  ConstBuffer send;  // staged at launch, checked unchanged at wait
  MutableBuffer recv;
  // all_to_all_v: the bytes the rank sends itself, not staged (copied at its wait).
  std::size_t self_begin = 0, self_end = 0;
  // all_to_all_v with displacements (empty: `send` is the blocks back to back). Then `send`
  // spans the runs of sent bytes and the staged bytes are sig.bytes, the counts' sum.
  std::span<const std::size_t> counts = {}, displs = {};
  std::size_t self = 0;  // this rank's member index
};

struct RankComm::SimWork final : Work::State {
  RankComm* comm = nullptr;
  std::uint64_t id = 0;
  OpKind kind = OpKind::barrier;
  int group = -1;
  ConstBuffer send;
  std::uint64_t send_sum = 0;
  // With displacements: the runs of `send` that went out, and where the own block starts.
  bool displaced = false;
  std::vector<hpref::detail::ByteRun> runs;
  std::size_t own_src = 0;
  MutableBuffer recv;
  // Held for a whole wait: a second thread waiting on the same Work waits for the first to
  // finish and then finds it done (it found it not done yet, then asked the monitor about a
  // work already answered: comm_usage "waited on an unknown work").
  std::mutex waiting;
  bool done = false;
  std::optional<CommError> error;
  void wait() override { comm->wait_work(*this); }
};

RankComm::RankComm(Control* control, char* base, int rank, int size, std::string world_backend,
                   std::uint64_t crash_at_call)
    : control_(control),
      base_(base),
      rank_(rank),
      size_(size),
      world_backend_(std::move(world_backend)),
      crash_at_(crash_at_call),
      pid_(getpid()) {}

Group RankComm::world() const {
  std::vector<int> all(static_cast<std::size_t>(size_));
  std::iota(all.begin(), all.end(), 0);
  return Group(0, std::move(all), world_backend_, rank_);
}

// SPEC 9.1: one thread at a time drives a Communicator. The slot holds one request: a second
// thread's call while one was in flight overwrote it, and the monitor served garbage (the
// whole run failed: "map::at"). The second caller gets comm_usage instead.
class RankComm::InCall {
 public:
  explicit InCall(RankComm& c) : c_(c) {
    if (c.in_call_.exchange(true)) {
      throw CommError(Errc::comm_usage,
                      "rank " + std::to_string(c.rank_) +
                          "'s communicator was called from two threads at once: the calls must "
                          "be serialized (SPEC 9.1; a Work may be waited from another thread "
                          "while no other call is in flight)");
    }
  }
  ~InCall() { c_.in_call_.store(false); }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;

 private:
  RankComm& c_;
};

void RankComm::call() {
  sem_post(&control_->wake);
  while (sem_wait(&slot().go) != 0) {
    if (errno != EINTR) std::abort();
  }
}

void RankComm::own_process() const {
  if (getpid() != pid_) {
    // A process the rank forked shares its slot: a call from it would act as the rank.
    throw CommError(Errc::comm_usage,
                    "rank " + std::to_string(rank_) + "'s communicator called from process " +
                        std::to_string(getpid()) +
                        ", which the rank forked: only the rank's own process may call it");
  }
}

void RankComm::point() {
  own_process();
  if (++calls_ == crash_at_) {
    std::fflush(nullptr);
#ifdef HPREF_GCOV_DUMP
    __gcov_dump();  // SIGKILL skips gcov's writer too; the monitor waits for the baton meanwhile
#endif
    control_->slots[rank_].crashed = 1;  // the fault fired (a death of another cause did not)
    kill(getpid(), SIGKILL);             // the crash fault: die holding the baton
  }
}

void RankComm::throw_response() {
  const Slot& s = control_->slots[rank_];
  std::vector<int> ranks(s.err_ranks, s.err_ranks + s.err_nranks);
  throw CommError(static_cast<Errc>(s.status), s.message, s.err_group, s.err_seq, std::move(ranks));
}

Group RankComm::new_group(std::span<const int> ranks, const std::string& backend) {
  std::vector<int> sorted = checked_group_ranks(ranks, backend, size_);
  if (backend.size() >= kNameBytes) {
    throw CommError(Errc::comm_usage,
                    "new_group backend name of " + std::to_string(backend.size()) +
                        " bytes is longer than the simulator's " + std::to_string(kNameBytes - 1));
  }
  InCall one(*this);
  point();
  Slot& s = slot();
  s.req = Req::new_group;
  s.nranks = static_cast<std::int32_t>(sorted.size());
  std::copy(sorted.begin(), sorted.end(), s.ranks);
  std::snprintf(s.backend, sizeof s.backend, "%s", backend.c_str());
  call();
  if (s.status != 0) throw_response();
  return Group(static_cast<int>(s.handle), std::move(sorted), backend, rank_);
}

Work RankComm::launch(const Launch& l) {
  InCall one(*this);
  point();
  Slot& s = slot();
  s.req = Req::launch;
  s.group = l.group.id();
  write_signature(l.sig, l.group.size(), s.signature);
  bool displaced = !l.displs.empty();
  std::size_t staged = displaced ? l.sig.bytes : l.send.bytes;
  s.stage_bytes = staged;
  auto work = std::make_shared<SimWork>();
  // The data is taken at launch: small sends travel in the slot, larger ones are copied
  // into the spare staging area the monitor keeps for this rank when they fit, else into
  // one it hands out first (a second round trip).
  s.inline_data = staged <= kInlineBytes;
  s.in_spare = !s.inline_data && staged <= s.spare_bytes;
  char* stage = nullptr;
  if (s.inline_data) {
    stage = reinterpret_cast<char*>(s.data);
  } else if (s.in_spare) {
    stage = base_ + s.spare;
  } else {
    call();
    if (s.status != 0) throw_response();
    stage = base_ + s.handle;
  }
  work->send_sum = displaced ? stage_blocks(stage, l, *work)
                             : hpref::detail::checksum_copy(stage, l.send.data, l.send.bytes,
                                                            l.self_begin, l.self_end);
  s.checksum = work->send_sum;
  s.req = Req::launch_staged;
  call();
  if (s.status != 0) throw_response();
  work->comm = this;
  work->id = s.work_id;
  work->kind = l.sig.kind;
  work->group = l.group.id();
  work->send = l.send;
  work->recv = l.recv;
  return Work(work);
}

std::uint64_t RankComm::stage_blocks(char* stage, const Launch& l, SimWork& w) {
  namespace hd = hpref::detail;
  const auto* in = static_cast<const char*>(l.send.data);
  std::size_t n = l.counts.size();
  std::vector<std::size_t> at = hd::packed_displs(l.counts);  // places in the staging layout
  bool stream = l.sig.bytes >= hd::kStreamBytes;
  w.displaced = true;
  w.own_src = l.displs[l.self];
  w.runs = hd::block_runs(l.counts, l.displs);
  if (w.runs.empty()) return hd::runs_checksum(in, w.runs);
  std::uint64_t folded = 0;
  for (std::size_t k = 0; k < w.runs.size(); ++k) {
    const hd::ByteRun& run = w.runs[k];
    auto inside = [&](std::size_t j) {
      return j != l.self && l.counts[j] && run.begin <= l.displs[j] &&
             l.displs[j] + l.counts[j] <= run.end;
    };
    // One read of the run: its checksum, and a copy of its largest block to a peer; the
    // run's other blocks to peers are copied after (they overlap what was read).
    std::size_t best = n;
    for (std::size_t j = 0; j < n; ++j) {
      if (inside(j) && (best == n || l.counts[j] > l.counts[best])) best = j;
    }
    std::size_t bytes = run.end - run.begin;
    std::uint64_t sum =
        best == n ? hd::checksum_copy(nullptr, in + run.begin, bytes)
                  : hd::checksum_copy_range(stage + at[best], in + run.begin, bytes,
                                            l.displs[best] - run.begin,
                                            l.displs[best] - run.begin + l.counts[best], stream);
    for (std::size_t j = 0; j < n; ++j) {
      if (j != best && inside(j))
        hd::copy_bytes(stage + at[j], in + l.displs[j], l.counts[j], stream);
    }
    folded = hd::fold_run_checksum(folded, sum, k);
  }
  return folded;
}

void RankComm::wait_work(SimWork& w) {
  own_process();  // before the lock: a fork copies it held if a thread of the rank waits
  std::lock_guard<std::mutex> one_wait(w.waiting);
  if (w.done) {
    if (w.error) throw *w.error;
    return;
  }
  InCall one(*this);
  point();
  Slot& s = slot();
  s.req = Req::wait;
  s.work = w.id;
  call();
  w.done = true;
  if (s.status != 0) {
    try {
      throw_response();
    } catch (const CommError& e) {
      w.error = e;
      throw;
    }
  }
  auto* out = static_cast<char*>(w.recv.data);
  const auto* in = static_cast<const char*>(w.send.data);
  bool stream = w.recv.bytes >= hpref::detail::kStreamBytes;
  // all_to_all_v's own block (handle 0) comes from the send buffer, after the mutation
  // check. Where it does not overlap the send buffer, the check's pass copies it (one read
  // of the send buffer, not a checksum and then a memmove of the block); if that finds the
  // buffer changed, the operation fails with the block written.
  // The runs of sent bytes: the whole send buffer, or (with displacements) the blocks' union.
  const Piece* own = nullptr;
  for (std::int32_t i = 0; i < s.npieces; ++i) {
    if (s.pieces[i].bytes && s.pieces[i].handle == 0) own = &s.pieces[i];
  }
  hpref::detail::ByteRun whole{0, w.send.bytes};
  std::span<const hpref::detail::ByteRun> runs(&whole, w.send.bytes ? 1 : 0);
  if (w.displaced) runs = w.runs;
  std::size_t own_src = own == nullptr ? 0 : w.displaced ? w.own_src : own->offset;
  bool fused = false;
  if (own != nullptr) {
    auto to = reinterpret_cast<std::uintptr_t>(out + own->dst);
    auto from = reinterpret_cast<std::uintptr_t>(in + runs.front().begin);
    auto past = reinterpret_cast<std::uintptr_t>(in + runs.back().end);
    fused = to + own->bytes <= from || past <= to;
  }
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    std::size_t bytes = runs[k].end - runs[k].begin;
    const char* run = in + runs[k].begin;
    std::uint64_t run_sum = 0;
    if (fused && runs[k].begin <= own_src && own_src + own->bytes <= runs[k].end) {
      std::size_t begin = own_src - runs[k].begin;
      run_sum = hpref::detail::checksum_copy_range(out + own->dst, run, bytes, begin,
                                                   begin + own->bytes, stream);
    } else {
      run_sum = buffer_checksum(run, bytes);
    }
    sum = hpref::detail::fold_run_checksum(sum, run_sum, k);
  }
  if (!runs.empty() && sum != w.send_sum) {
    w.error =
        CommError(Errc::comm_buffer_mutated,
                  std::string("rank ") + std::to_string(rank_) + " changed its send buffer of " +
                      op_kind_name(w.kind) + " on group " + std::to_string(w.group) +
                      " between launch and wait (real backends read it later)",
                  w.group, -1, {rank_});
    throw *w.error;
  }
  // Otherwise the own block first: the output may overlap the send buffer, and the other
  // pieces come from staging.
  if (own != nullptr && !fused) std::memmove(out + own->dst, in + own_src, own->bytes);
  for (std::int32_t i = 0; i < s.npieces; ++i) {
    const Piece& p = s.pieces[i];
    if (p.bytes && p.handle != 0)
      hpref::detail::copy_bytes(out + p.dst, base_ + p.handle + p.offset, p.bytes, stream);
  }
  if (s.flip_byte >= 0 && static_cast<std::size_t>(s.flip_byte) < w.recv.bytes) {
    out[s.flip_byte] = static_cast<char>(out[s.flip_byte] ^ 0xff);
  }
}

Work RankComm::all_gather(const Group& group, ConstBuffer in, MutableBuffer out) {
  return launch({group, check_all_gather(group, rank_, in, out), in, out});
}

Work RankComm::broadcast(const Group& group, MutableBuffer buffer, int root) {
  OpSignature sig = check_broadcast(group, rank_, buffer, root);
  if (root == rank_) return launch({group, std::move(sig), buffer, {}});
  return launch({group, std::move(sig), {}, buffer});
}

Work RankComm::all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) {
  return launch({group, check_all_reduce(group, rank_, buffer, dtype, op), buffer, buffer});
}

Work RankComm::all_to_all_v(const Group& group, ConstBuffer in,
                            std::span<const std::size_t> in_counts,
                            std::span<const std::size_t> in_displs, MutableBuffer out,
                            std::span<const std::size_t> out_counts) {
  OpSignature sig = check_all_to_all_v(group, rank_, in, in_counts, out, out_counts, in_displs);
  std::size_t received = std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0});
  auto m = static_cast<std::size_t>(group.index_of(rank_));
  std::size_t self = std::accumulate(in_counts.begin(), in_counts.begin() + m, std::size_t{0});
  // Displacements that put the blocks back to back from in's start are the packed form (the
  // same staging, checksum and trace).
  if (hpref::detail::displs_are_packed(in_counts, in_displs)) {
    ConstBuffer send{in.data, sig.bytes, in.space};
    return launch(
        {group, std::move(sig), send, {out.data, received, out.space}, self, self + in_counts[m]});
  }
  Launch l{group, std::move(sig), in, {out.data, received, out.space}};
  l.counts = in_counts;
  l.displs = in_displs;
  l.self = m;
  return launch(l);
}

Work RankComm::barrier(const Group& group) {
  return launch({group, check_barrier(group, rank_), {}, {}});
}

void RankComm::finish(Finish how, Errc code, const std::string& text) {
  if (getpid() != pid_) {
    // A process the rank forked that returned from the rank function (a Python os.fork()
    // child without os._exit): it is not the rank, whose slot it must not report on (the
    // monitor would wait for the rank's exit while the rank waits for its turn).
    std::fflush(nullptr);
    _exit(how == Finish::ok ? 0 : 1);
  }
  Slot& s = slot();
  s.req = Req::finish;
  s.stage_bytes = text.size();
  call();
  if (s.status == 0 && !text.empty()) std::memcpy(base_ + s.handle, text.data(), text.size());
  s.req = Req::finish_staged;
  s.finish = how;
  s.finish_code = static_cast<std::int32_t>(code);
  std::fflush(nullptr);
#ifdef HPREF_GCOV_DUMP
  __gcov_dump();  // while holding the baton: the monitor waits, the run is unchanged
#endif
  if (on_reporting) on_reporting(rank_);
  sem_post(&control_->wake);
  if (on_reported) on_reported(rank_);
  _exit(0);
}

}  // namespace hpref::sim::detail
