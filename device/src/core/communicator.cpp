// The operation lifecycle of the real backends, written once: check, look up, number,
// agree (checked mode), checksum, launch on the transport; at wait(): cached error,
// transport wait, checksum check, finish.
#include "hpref/device/communicator.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "hpref/detail/checksum.hpp"
#include "hpref/device/transport.hpp"

namespace hpref::device {

namespace {

// A launched operation as the caller holds it.
struct CoreWork final : Work::State {
  OpContext op;
  PendingPtr pending;
  const void* send = nullptr;  // checked mode: the send buffer and its launch checksum
  std::size_t send_bytes = 0;
  std::vector<detail::ByteRun> send_runs;  // all_to_all_v with displacements: what is sent
  std::uint64_t send_sum = 0;
  std::function<void()> finish;  // the float reduction, the checked all_reduce's result
  bool done = false;
  std::optional<CommError> error;

  std::uint64_t checksum() const {
    return send_runs.empty() ? buffer_checksum(send, send_bytes)
                             : detail::runs_checksum(send, send_runs);
  }

  void wait() override {
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

  // Checked mode: every member's signature, all-gathered; comm_mismatch on every member
  // alike when they disagree.
  void agree(const Group& group, const OpSignature& mine, const OpContext& op) {
    int n = group.size();
    std::size_t bytes = signature_wire_bytes(n);
    std::vector<std::uint8_t> send(bytes), all(bytes * static_cast<std::size_t>(n));
    write_signature(mine, n, send.data());
    transport->all_gather(op, send.data(), all.data(), bytes)->wait();
    std::vector<OpSignature> members;
    for (int i = 0; i < n; ++i)
      members.push_back(read_signature(all.data() + bytes * static_cast<std::size_t>(i), n));
    if (auto error = signature_mismatch(group, op.seq, members)) throw *error;
  }

  // The launch preamble: the next sequence number; in checked mode the agreement and the
  // send buffer's checksum (host memory only: the core cannot read device memory).
  // all_to_all_v: `counts` and `displs` say where the bytes are when they are not the first
  // send_bytes of `send` (their runs are found in checked mode only).
  std::shared_ptr<CoreWork> begin(const Group& group, Entry& g, const OpSignature& sig,
                                  const void* send, std::size_t send_bytes,
                                  std::span<const std::size_t> counts = {},
                                  std::span<const std::size_t> displs = {}) {
    auto w = std::make_shared<CoreWork>();
    w->op = {group.id(), g.seq++, sig.kind, g.ranks, transport->rank()};
    if (checked) {
      agree(group, sig, w->op);
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

CoreCommunicator::~CoreCommunicator() = default;

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
  OpContext op{0, -1, OpKind::all_gather, world.ranks, rank()};
  // Agreement first: every rank's request, all-gathered over the world.
  auto n = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> mine = group_request(sorted, backend, size()), all((n + 1) * n);
  t.all_gather(op, mine.data(), all.data(), 8 * (n + 1))->wait();
  if (auto error = group_request_mismatch(rank(), sorted, backend, all, size())) throw *error;
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
  w->pending =
      state_->transport->all_to_all_v(w->op, in.data, in_counts, in_displs, out.data, out_counts);
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
