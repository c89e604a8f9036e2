// The operation lifecycle of the real backends, written once: check, look up, number,
// agree (checked mode), checksum, launch on the transport; at wait(): cached error,
// transport wait, checksum check, finish.
#include "hpref/device/communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpref/detail/checksum.hpp"
#include "hpref/device/transport.hpp"

namespace hpref::device {

namespace {

// Checked mode's new_group as an operation of the world's sequence (SPEC 9.1), in the
// signature's wire form and size, so that a rank making a new_group meets a peer that
// launched an operation instead, or asked for another group, in the same exchange and every
// rank is told (hpref.torch's checked groups do the same): an operation's signature of a
// barrier whose kind word is kNewGroupKind, the backend name's hash in the byte-count word,
// a flag per world rank asked for, then the backend name cut to 8 x members bytes. (Apart,
// the agreement was an exchange of another size, outside the sequence: a rank that skipped
// a new_group met its peer's request with an operation's signature, and MPI truncated one.)
constexpr std::uint64_t kNewGroupKind = 5;

std::uint64_t word_at(const std::uint8_t* p, std::size_t i) {
  std::uint64_t w;
  std::memcpy(&w, p + 8 * i, 8);
  return w;
}

void set_word(std::uint8_t* p, std::size_t i, std::uint64_t w) { std::memcpy(p + 8 * i, &w, 8); }

std::vector<std::uint8_t> new_group_launch(std::span<const int> sorted, const std::string& backend,
                                           int members) {
  std::vector<std::uint8_t> out(signature_wire_bytes(members));
  OpSignature barrier;
  barrier.kind = OpKind::barrier;
  write_signature(barrier, members, out.data());
  set_word(out.data(), 1, kNewGroupKind);
  set_word(out.data(), 5, fnv1a64(backend.data(), backend.size()));
  for (int r : sorted) set_word(out.data(), 6 + static_cast<std::size_t>(r), 1);
  auto room = 8 * static_cast<std::size_t>(members);
  std::memcpy(out.data() + 8 * (6 + static_cast<std::size_t>(members)), backend.data(),
              std::min(room, backend.size()));
  return out;
}

// One member's launch from its wire form: a new_group request or an operation's signature
// (read_signature, comm_mismatch when it is neither).
Launch read_launch(const std::uint8_t* in, int members) {
  static const std::uint64_t magic = [] {  // write_signature's first word
    std::vector<std::uint8_t> one(signature_wire_bytes(1));
    write_signature(OpSignature{}, 1, one.data());
    return word_at(one.data(), 0);
  }();
  if (word_at(in, 0) != magic || word_at(in, 1) != kNewGroupKind) {
    return Launch{false, {}, {}, read_signature(in, members)};
  }
  Launch l;
  l.new_group = true;
  auto n = static_cast<std::size_t>(members);
  for (std::size_t r = 0; r < n; ++r) {
    if (word_at(in, 6 + r)) l.members.push_back(static_cast<int>(r));
  }
  const auto* name = reinterpret_cast<const char*>(in + 8 * (6 + n));
  l.backend.assign(name, strnlen(name, 8 * n));
  if (l.backend.size() == 8 * n) {  // cut to the room: the hash tells such names apart
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(word_at(in, 5)));
    l.backend += std::string("... (fnv1a64 ") + hash + ")";
  }
  return l;
}

// The first disagreement among the members' launches (group order), or nothing.
std::optional<CommError> launches_mismatch(const Group& group, std::int64_t seq,
                                           const std::vector<std::uint8_t>& all, int n) {
  std::size_t bytes = signature_wire_bytes(n);
  std::vector<Launch> launches;
  bool any_new_group = false;
  for (int i = 0; i < n; ++i) {
    launches.push_back(read_launch(all.data() + bytes * static_cast<std::size_t>(i), n));
    any_new_group |= launches.back().new_group;
  }
  if (any_new_group) {
    const auto& ranks = group.ranks();
    for (std::size_t i = 1; i < launches.size(); ++i) {
      if (auto error =
              new_group_mismatch(group.id(), seq, ranks[0], launches[0], ranks[i], launches[i])) {
        return error;
      }
    }
    return std::nullopt;
  }
  std::vector<OpSignature> members;
  for (Launch& l : launches) members.push_back(std::move(l.op));
  return signature_mismatch(group, seq, members);
}

// comm_usage when this thread may not call into the transport's library
// (Transport::wrong_thread): `what` "was launched" / "was waited" on it. Nothing has changed
// yet, so the communicator stays usable from the right thread.
// `what()` is made only then (a wait must not build a string each time).
template <class What>
void refuse_wrong_thread(const Transport& t, What what, int group, std::int64_t seq) {
  std::string why = t.wrong_thread();
  if (!why.empty()) throw CommError(Errc::comm_usage, what() + " on " + why, group, seq);
}

// What the transport may still run and write when a Work cannot be completed (its
// communicator failed, or this thread may not call the library): never freed.
void abandon(PendingPtr& pending, std::function<void()>& finish) noexcept {
  (void)pending.release();
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): deliberately leaked, as above
  (void)new (std::nothrow) std::function<void()>(std::move(finish));
}

// A launched operation as the caller holds it.
struct CoreWork final : Work::State {
  Transport* transport = nullptr;
  OpContext op;
  PendingPtr pending;
  const void* send = nullptr;  // checked mode: the send buffer and its launch checksum
  std::size_t send_bytes = 0;
  std::vector<detail::ByteRun> send_runs;  // all_to_all_v with displacements: what is sent
  std::uint64_t send_sum = 0;
  std::function<void()> finish;  // the float reduction, the checked all_reduce's result
  bool done = false;
  std::optional<CommError> error;

  // A Work dropped before wait(): the transport may still write the caller's buffers and
  // this work's own (a checked all_reduce's result, declared after `pending` and so freed
  // before it), so the operation is completed here, within the deadline, its error dropped
  // with it (a timeout still fails the transport; later operations say so). Freed under a
  // running MPI request, they were written after the free: a crash in the job.
  ~CoreWork() override {
    if (done || !pending || transport->failed()) return;  // (detached: pending is null)
    if (!transport->wrong_thread().empty()) {             // dropped where it may not be completed
      abandon(pending, finish);
      return;
    }
    try {
      pending->wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): nobody is left to tell
    }
    pending.reset();
  }

  // Its communicator is being destroyed while the caller still holds it (a Work may outlive
  // its communicator): completed now as wait() would (within the deadline; its outcome, an
  // error included, is what the caller's wait() then gives), and its transport operation
  // released while the transport is alive. It used to keep a pointer to the freed
  // transport: dropping it later read freed memory, or crashed while MPI still ran it.
  void detach() noexcept {
    std::string why = done || !pending ? std::string() : transport->wrong_thread();
    if (!done && pending && !transport->failed() && why.empty()) {
      try {
        wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): kept in `error` for the caller's wait()
      }
    }
    if (!std::exchange(done, true) && pending) {  // it cannot be completed now
      bool failed = transport->failed();
      std::string end = failed
                            ? ", failed earlier (" + std::string(errc_name(transport->failure())) +
                                  "), was destroyed"
                            : " was destroyed on " + why;
      error = CommError(
          failed ? transport->failure() : Errc::comm_usage,
          op_text(op) + " was not waited before its " + transport->name() + " communicator" + end,
          op.group, op.seq, std::vector<int>(op.ranks.begin(), op.ranks.end()));
      abandon(pending, finish);
    }
    pending.reset();
    finish = nullptr;
    transport = nullptr;
    op.ranks = {};  // the communicator's group table
  }

  std::uint64_t checksum() const {
    return send_runs.empty() ? buffer_checksum(send, send_bytes)
                             : detail::runs_checksum(send, send_runs);
  }

  void wait() override {
    if (!done && pending) {
      refuse_wrong_thread(
          *transport, [&] { return op_text(op) + " was waited"; }, op.group, op.seq);
    }
    if (std::exchange(done, true)) {
      if (error) throw *error;
      return;
    }
    try {
      pending->wait();
      if (send && checksum() != send_sum) {
        throw buffer_mutated_error(op.rank, op.kind, op.group, op.seq);
      }
      if (finish) finish();
    } catch (const CommError& e) {
      error = e;
      throw;
    } catch (const std::exception& e) {  // (no memory): every later wait() fails too
      error = CommError(Errc::comm_backend, op_text(op) + ": wait() failed: " + e.what(), op.group,
                        op.seq, std::vector<int>(op.ranks.begin(), op.ranks.end()));
      throw;
    }
  }
};

}  // namespace

struct CoreCommunicator::State {
  // One group of the table (index: group id; 0 is the world).
  struct Entry {
    std::vector<int> ranks;
    std::int64_t seq = 0;
    Communicator* runner = nullptr;  // a group another Communicator runs (NCCL's host groups)
    Group runner_group;
  };

  std::unique_ptr<Transport> transport;
  std::string world_backend;
  bool checked = false;
  std::vector<Entry> groups;
  // The Works launched, to detach() those still held when the communicator ends. Expired
  // entries at the back are dropped at each launch, before the new Work is allocated (the
  // usual program waits and drops each Work before the next launch: its memory, kept by the
  // weak reference until then, is then reused at once, still in cache; keeping it until a
  // sweep cost ~0.25 us per operation, bench_mpi_overhead at 1 KiB); the others whenever the
  // list has doubled since the last sweep.
  std::vector<std::weak_ptr<CoreWork>> works;
  std::size_t sweep_at = 64;

  Entry& lookup(const Group& group) {
    auto id = static_cast<std::size_t>(group.id());
    if (group.id() < 0 || id >= groups.size() || groups[id].ranks != group.ranks()) {
      throw CommError(Errc::comm_usage,
                      "group " + std::to_string(group.id()) + " " + rank_list_text(group.ranks()) +
                          " was not created by this " + transport->name() + " communicator",
                      group.id());
    }
    if (transport->failed()) {
      throw CommError(transport->failure(),
                      std::string("this ") + transport->name() + " communicator failed earlier (" +
                          std::string(errc_name(transport->failure())) + "); " +
                          transport->after_failure(),
                      group.id());
    }
    return groups[id];
  }

  // Checked mode: every member's launch (signature_wire_bytes), all-gathered;
  // comm_mismatch on every member alike when they disagree.
  void agree(const Group& group, const std::vector<std::uint8_t>& mine, const OpContext& op) {
    int n = group.size();
    std::vector<std::uint8_t> all(mine.size() * static_cast<std::size_t>(n));
    transport->all_gather(op, mine.data(), all.data(), mine.size())->wait();
    if (auto error = launches_mismatch(group, op.seq, all, n)) throw *error;
  }

  // The launch preamble: the next sequence number; in checked mode the agreement and the
  // send buffer's checksum (host memory only: the core cannot read device memory).
  // all_to_all_v: `counts` and `displs` say where the bytes are when they are not the first
  // send_bytes of `send` (their runs are found in checked mode only).
  std::shared_ptr<CoreWork> begin(const Group& group, Entry& g, const OpSignature& sig,
                                  const void* send, std::size_t send_bytes,
                                  std::span<const std::size_t> counts = {},
                                  std::span<const std::size_t> displs = {}) {
    refuse_wrong_thread(
        *transport,
        [&] {
          return std::string(op_kind_name(sig.kind)) + " on group " + std::to_string(group.id()) +
                 " " + rank_list_text(g.ranks) + " was launched";
        },
        group.id(), g.seq);
    while (!works.empty() && works.back().expired()) works.pop_back();
    auto w = std::make_shared<CoreWork>();
    w->transport = transport.get();
    w->op = {group.id(), g.seq++, sig.kind, g.ranks, transport->rank()};
    works.push_back(w);
    if (works.size() >= sweep_at) {
      std::erase_if(works, [](const std::weak_ptr<CoreWork>& x) { return x.expired(); });
      sweep_at = std::max<std::size_t>(64, 2 * works.size());
    }
    if (checked) {
      std::vector<std::uint8_t> mine(signature_wire_bytes(group.size()));
      write_signature(sig, group.size(), mine.data());
      agree(group, mine, w->op);
      if (send_bytes && transport->host_memory(send)) {
        w->send = send;
        w->send_bytes = send_bytes;
        if (!detail::displs_are_packed(counts, displs))
          w->send_runs = detail::block_runs(counts, displs);
        w->send_sum = w->checksum();
      }
    }
    return w;
  }
};

CoreCommunicator::CoreCommunicator(std::unique_ptr<Transport> transport, std::string world_backend,
                                   bool checked)
    : state_(std::make_unique<State>()) {
  state_->transport = std::move(transport);
  state_->world_backend = std::move(world_backend);
  state_->checked = checked;
  state_->groups.push_back({state_->transport->world_ranks(), 0, nullptr, Group()});
}

CoreCommunicator::~CoreCommunicator() {
  for (const std::weak_ptr<CoreWork>& weak : state_->works) {
    if (auto w = weak.lock()) w->detach();
  }
}

int CoreCommunicator::rank() const { return state_->transport->rank(); }
int CoreCommunicator::size() const { return state_->transport->size(); }
std::string CoreCommunicator::world_backend() const { return state_->world_backend; }
bool CoreCommunicator::failed() const noexcept { return state_->transport->failed(); }
Transport& CoreCommunicator::transport() const noexcept { return *state_->transport; }

Group CoreCommunicator::world() const {
  return Group(0, state_->groups[0].ranks, state_->world_backend, rank());
}

Group CoreCommunicator::new_group(std::span<const int> ranks, const std::string& backend) {
  Transport& t = *state_->transport;
  std::vector<int> sorted = checked_group_ranks(ranks, backend, size());
  t.refuse_backend(backend);
  State::Entry& world = state_->lookup(this->world());
  refuse_wrong_thread(
      t, [&] { return "new_group " + rank_list_text(sorted) + " was made"; }, 0, -1);
  // Agreement first: every rank's request, all-gathered over the world; in checked mode as
  // the world's next operation (new_group_launch).
  OpContext op{0, -1, OpKind::all_gather, world.ranks, rank()};
  if (state_->checked) {
    op.seq = world.seq++;
    state_->agree(this->world(), new_group_launch(sorted, backend, size()), op);
  } else {
    auto n = static_cast<std::size_t>(size());
    std::vector<std::uint64_t> mine = group_request(sorted, backend, size()), all((n + 1) * n);
    t.all_gather(op, mine.data(), all.data(), 8 * (n + 1))->wait();
    if (auto error = group_request_mismatch(rank(), sorted, backend, all, size())) throw *error;
  }
  int id = static_cast<int>(state_->groups.size());
  State::Entry g{sorted, 0, nullptr, Group()};
  if ((g.runner = t.runner_for(backend))) {
    g.runner_group = g.runner->new_group(sorted, backend);
  } else {
    t.add_group(op, id, sorted, std::binary_search(sorted.begin(), sorted.end(), rank()));
  }
  state_->groups.push_back(std::move(g));
  return Group(id, std::move(sorted), backend, rank());
}

Work CoreCommunicator::all_gather(const Group& group, ConstBuffer in, MutableBuffer out) {
  OpSignature sig = check_all_gather(group, rank(), in, out);
  State::Entry& g = state_->lookup(group);
  if (g.runner) return g.runner->all_gather(g.runner_group, in, out);
  auto w = state_->begin(group, g, sig, in.data, in.bytes);
  w->pending = state_->transport->all_gather(w->op, in.data, out.data, in.bytes);
  return Work(w);
}

Work CoreCommunicator::broadcast(const Group& group, MutableBuffer buffer, int root) {
  OpSignature sig = check_broadcast(group, rank(), buffer, root);
  State::Entry& g = state_->lookup(group);
  if (g.runner) return g.runner->broadcast(g.runner_group, buffer, root);
  bool is_root = root == rank();
  auto w = state_->begin(group, g, sig, buffer.data, is_root ? buffer.bytes : 0);
  w->pending =
      state_->transport->broadcast(w->op, buffer.data, buffer.bytes, group.index_of(root), is_root);
  return Work(w);
}

Work CoreCommunicator::all_reduce(const Group& group, MutableBuffer buffer, DType dtype,
                                  ReduceOp op) {
  OpSignature sig = check_all_reduce(group, rank(), buffer, dtype, op);
  State::Entry& g = state_->lookup(group);
  if (g.runner) return g.runner->all_reduce(g.runner_group, buffer, dtype, op);
  auto w = state_->begin(group, g, sig, buffer.data, buffer.bytes);
  Transport* t = state_->transport.get();
  std::size_t bytes = buffer.bytes, count = bytes / element_size(dtype);
  void* data = buffer.data;
  if (dtype == DType::int32 || dtype == DType::int64) {
    if (!w->send) {  // in place
      w->pending = t->all_reduce(w->op, data, data, count, dtype, op);
      return Work(w);
    }
    // Checked: the buffer must stay as launched until wait() compares its checksum, so the
    // result lands beside it and is copied in at the end.
    auto result = std::make_shared<std::vector<char>>(bytes);
    w->pending = t->all_reduce(w->op, data, result->data(), count, dtype, op);
    w->finish = [t, result, data, bytes] { t->copy(data, result->data(), bytes); };
    return Work(w);
  }
  // Floats: every member's values, gathered from a copy taken now, reduced in group order.
  auto n = static_cast<std::size_t>(group.size());
  auto mine = std::make_shared<std::vector<char>>(bytes);
  auto gathered = std::make_shared<std::vector<char>>(bytes * n);
  t->copy(mine->data(), data, bytes);
  w->pending = t->all_gather(w->op, mine->data(), gathered->data(), bytes);
  w->finish = [t, mine, gathered, data, bytes, n, dtype, op, count] {
    char* sum = gathered->data();
    for (std::size_t i = 1; i < n; ++i) reduce_into(dtype, op, sum, sum + i * bytes, count);
    t->copy(data, sum, bytes);
  };
  return Work(w);
}

Work CoreCommunicator::all_to_all_v(const Group& group, ConstBuffer in,
                                    std::span<const std::size_t> in_counts,
                                    std::span<const std::size_t> in_displs, MutableBuffer out,
                                    std::span<const std::size_t> out_counts) {
  OpSignature sig = check_all_to_all_v(group, rank(), in, in_counts, out, out_counts, in_displs);
  State::Entry& g = state_->lookup(group);
  if (g.runner) {
    return g.runner->all_to_all_v(g.runner_group, in, in_counts, in_displs, out, out_counts);
  }
  auto w = state_->begin(group, g, sig, in.data, sig.bytes, in_counts, in_displs);
  // The transports always take displacements: the packed ones when none were given.
  std::vector<std::size_t> packed;
  if (in_displs.empty()) {
    packed = detail::packed_displs(in_counts);
    in_displs = packed;
  }
  // An output that overlaps the send buffer (the simulator allows it: it reads the send
  // buffer at launch) is received beside it and copied in after wait()'s send-buffer check:
  // MPI forbids the aliasing, and checked mode took the received bytes for a mutation.
  Transport* t = state_->transport.get();
  auto in_at = reinterpret_cast<std::uintptr_t>(in.data);
  auto out_at = reinterpret_cast<std::uintptr_t>(out.data);
  auto* out_bytes = static_cast<char*>(out.data);
  if (in.bytes && out.bytes && in_at < out_at + out.bytes && out_at < in_at + in.bytes &&
      t->host_memory(out.data)) {
    auto staged = std::make_shared<std::vector<char>>(out.bytes);
    w->pending = t->all_to_all_v(w->op, in.data, in_counts, in_displs, staged->data(), out_counts);
    std::size_t bytes = out.bytes;
    w->finish = [t, staged, out_bytes, bytes] { t->copy(out_bytes, staged->data(), bytes); };
    return Work(w);
  }
  w->pending = t->all_to_all_v(w->op, in.data, in_counts, in_displs, out.data, out_counts);
  return Work(w);
}

Work CoreCommunicator::barrier(const Group& group) {
  OpSignature sig = check_barrier(group, rank());
  State::Entry& g = state_->lookup(group);
  if (g.runner) return g.runner->barrier(g.runner_group);
  auto w = state_->begin(group, g, sig, nullptr, 0);
  w->pending = state_->transport->barrier(w->op);
  return Work(w);
}

}  // namespace hpref::device
