// SPEC 8: forward dispatch with a single-use handle, and its exact adjoint.
#include "hpref/dispatch.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "hpref/error.hpp"
#include "hpref/oracle.hpp"

namespace hpref {
namespace {

// (outer, len, inner bytes) -> (len, outer, inner bytes): the 3-D transpose behind both
// axis moves.
std::vector<std::uint8_t> swap_blocks(const std::uint8_t* src, std::size_t outer, std::size_t len,
                                      std::size_t inner) {
  std::vector<std::uint8_t> out(outer * len * inner);
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < len; ++i) {
      if (inner)
        std::memcpy(out.data() + (i * outer + o) * inner, src + (o * len + i) * inner, inner);
    }
  }
  return out;
}

std::size_t product(std::span<const std::int64_t> dims) {
  return std::accumulate(
      dims.begin(), dims.end(), std::size_t{1},
      [](std::size_t a, std::int64_t b) { return a * static_cast<std::size_t>(b); });
}

std::size_t normalize_axis(int dim, std::size_t ndim) {
  auto n = static_cast<long>(ndim);
  if (dim < -n || dim >= n) {
    throw Error(Errc::dispatch_axis, "sequence_dim " + std::to_string(dim) + " is outside [" +
                                         std::to_string(-n) + ", " + std::to_string(n) +
                                         ") for a " + std::to_string(ndim) + "-d tensor");
  }
  return static_cast<std::size_t>(dim < 0 ? dim + n : dim);
}

MemorySpace space_of(const Tensor& t) {
  return t.device().type == DeviceType::cpu ? MemorySpace::host : MemorySpace::accelerator;
}

void check_group(const Group& group, const Route& route) {
  if (!group.is_member() || static_cast<std::size_t>(group.size()) != route.send_offsets.size()) {
    throw Error(Errc::dispatch_group,
                "a route for " + std::to_string(route.send_offsets.size()) +
                    " ranks cannot run on group " + std::to_string(group.id()) + " of " +
                    std::to_string(group.size()) + " ranks" +
                    (group.is_member() ? "" : " (this rank is not a member)"));
  }
}

// The route indexes every buffer dispatch touches: refuse a hand-built or corrupted one
// before any of it is used (the planners' is_valid(), plus this rank's own entries).
void check_route(const Group& group, const Route& route) {
  std::string problem = route.problem(group.index());
  if (!problem.empty()) {
    throw Error(Errc::dispatch_route, "invalid route for rank " + std::to_string(group.index()) +
                                          " of group " + std::to_string(group.id()) + ": " +
                                          problem);
  }
}

// rows * row bytes, refused when it does not fit in memory's address space.
std::size_t checked_bytes(std::int64_t rows, std::size_t row, const char* what) {
  std::size_t out;
  if (__builtin_mul_overflow(static_cast<std::size_t>(rows), row, &out) ||
      out > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())) {
    throw Error(Errc::dispatch_route, std::string("the route's ") + what + " of " +
                                          std::to_string(rows) + " rows of " + std::to_string(row) +
                                          " bytes do not fit in memory");
  }
  return out;
}

// The rows of input_splits (each within the shard), saturated at int64's maximum: the sum
// may not fit, and checked_bytes then refuses it.
std::int64_t rows_sent(const Route& route) {
  std::int64_t rows = 0;
  for (std::int64_t n : route.input_splits) {
    if (__builtin_add_overflow(rows, n, &rows)) return std::numeric_limits<std::int64_t>::max();
  }
  return rows;
}

// The bytes of one buffer of a DispatchBuffers pool: default-initialised (a buffer is
// always written whole before it is read, so no zero fill).
struct Block {
  explicit Block(std::size_t bytes) : data(new std::uint8_t[bytes]), capacity(bytes) {}
  std::unique_ptr<std::uint8_t[]> data;
  std::size_t capacity;
};
using BlockPtr = std::shared_ptr<Block>;

// A tensor of `like`'s dtype, row shape and device with `rows` rows in the front of `block`
// (which it keeps alive).
Tensor rows_in(const Tensor& like, std::int64_t rows, std::size_t bytes, const BlockPtr& block) {
  std::vector<std::int64_t> shape(like.shape().begin(), like.shape().end());
  shape[0] = rows;
  SharedBytes view(std::shared_ptr<const void>(block, block->data.get()),
                   {block->data.get(), bytes});
  return Tensor(like.dtype(), std::move(shape), std::move(view), like.device());
}

// SPEC 8.2's sum into `out` (rows x row bytes): the owner's own block, then each peer's
// received rows (consecutive in `received`, ascending rank) added at its send offset. One
// pass per row range: a row's first sum is written as own + received, later ones are added
// in place, rows no peer sent are copied; the same additions in the same order as copying
// the block and adding each peer in turn.
void sum_gradient(DType dtype, std::size_t row, const std::uint8_t* own, std::size_t rows,
                  const std::uint8_t* received, const Route& route, std::uint8_t* out) {
  std::size_t per_row = row / element_size(dtype);
  std::vector<std::pair<std::size_t, std::size_t>> covered;  // sorted, disjoint [start, end)
  const std::uint8_t* peer = received;
  auto add = [&](std::size_t from, std::size_t to, std::size_t start, bool first) {
    add_elements(dtype, out + from * row, (first ? own : out) + from * row,
                 peer + (from - start) * row, (to - from) * per_row);
  };
  for (auto [offset, count] : route.owner_ranges()) {
    if (count == 0) continue;
    std::size_t a = static_cast<std::size_t>(offset), b = a + static_cast<std::size_t>(count);
    auto it = std::lower_bound(covered.begin(), covered.end(), a,
                               [](const auto& r, std::size_t x) { return r.second < x; });
    std::size_t at = a, lo = a, hi = b;
    auto first = it;
    for (; it != covered.end() && it->first <= b; ++it) {  // overlapping or adjacent ranges
      if (at < std::min(it->first, b)) add(at, std::min(it->first, b), a, true);
      at = std::max(at, it->first);
      if (at < std::min(it->second, b)) add(at, std::min(it->second, b), a, false);
      at = std::max(at, std::min(it->second, b));
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
    }
    if (at < b) add(at, b, a, true);
    it = covered.erase(first, it);
    covered.insert(it, {lo, hi});
    peer += static_cast<std::size_t>(count) * row;
  }
  std::size_t at = 0;
  for (auto [start, end] : covered) {
    if (at < start) std::memcpy(out + at * row, own + at * row, (start - at) * row);
    at = end;
  }
  if (at < rows) std::memcpy(out + at * row, own + at * row, (rows - at) * row);
}

}  // namespace

struct DispatchBuffers::Pool {
  std::vector<BlockPtr> blocks;

  // A buffer of at least `bytes` that no tensor views: the smallest free one that holds
  // them, else the largest free one grown, else a new one (dropping from the pool, not
  // freeing, a buffer a tensor still views when kMaxBuffers are kept).
  BlockPtr take(std::size_t bytes) {
    BlockPtr* fit = nullptr;
    BlockPtr* largest = nullptr;
    for (BlockPtr& b : blocks) {
      if (b.use_count() != 1) continue;
      if (b->capacity >= bytes && (!fit || b->capacity < (*fit)->capacity)) fit = &b;
      if (!largest || b->capacity > (*largest)->capacity) largest = &b;
    }
    if (fit) return *fit;
    if (largest) return *largest = std::make_shared<Block>(bytes);
    if (blocks.size() >= kMaxBuffers) {
      blocks.erase(blocks.begin());  // every kept buffer is viewed: the oldest leaves
    }
    return blocks.emplace_back(std::make_shared<Block>(bytes));
  }
};

DispatchBuffers::DispatchBuffers() : pool_(std::make_unique<Pool>()) {}
DispatchBuffers::~DispatchBuffers() = default;
DispatchBuffers::DispatchBuffers(DispatchBuffers&&) noexcept = default;
DispatchBuffers& DispatchBuffers::operator=(DispatchBuffers&&) noexcept = default;

std::size_t DispatchBuffers::count() const noexcept { return pool_ ? pool_->blocks.size() : 0; }

Tensor move_axis_to_front(const Tensor& t, std::size_t axis) {
  if (axis == 0) return t;
  auto s = t.shape();
  std::size_t outer = product(s.subspan(0, axis));
  std::size_t inner = product(s.subspan(axis + 1)) * element_size(t.dtype());
  auto bytes = swap_blocks(t.bytes().data(), outer, static_cast<std::size_t>(s[axis]), inner);
  std::vector<std::int64_t> shape = {s[axis]};
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != axis) shape.push_back(s[i]);
  }
  return Tensor(t.dtype(), std::move(shape), SharedBytes::adopt(std::move(bytes)), t.device());
}

Tensor move_front_to_axis(const Tensor& t, std::size_t axis) {
  if (axis == 0) return t;
  auto s = t.shape();  // (len, d0 .. d_{axis-1}, d_{axis+1} ..)
  std::size_t len = static_cast<std::size_t>(s[0]);
  std::size_t outer = product(s.subspan(1, axis));
  std::size_t inner = product(s.subspan(axis + 1)) * element_size(t.dtype());
  auto bytes = swap_blocks(t.bytes().data(), len, outer, inner);  // (len, outer) -> (outer, len)
  std::vector<std::int64_t> shape(s.begin() + 1, s.begin() + 1 + static_cast<std::ptrdiff_t>(axis));
  shape.push_back(s[0]);
  shape.insert(shape.end(), s.begin() + 1 + static_cast<std::ptrdiff_t>(axis), s.end());
  return Tensor(t.dtype(), std::move(shape), SharedBytes::adopt(std::move(bytes)), t.device());
}

struct DispatchHandle::State {
  Tensor local;              // the owner shard, sequence axis first
  std::int64_t rows = 0;     // of the assembled interval
  std::size_t before = 0;    // bytes received from ranks before this one
  std::size_t received = 0;  // bytes received in all
  std::size_t axis = 0;
  std::size_t row = 0;  // bytes per row
  BlockPtr send;        // the packed send rows (none when they are sent from `local` itself)
  BlockPtr out;         // the assembled interval; the exchange receives into its front
  // After the buffers it uses, so destroyed before them: a handle dropped unwaited has its
  // exchange completed by the Work's end (MPI, NCCL) while they still exist (SPEC 8.3).
  Work work;
  bool exchange = false;
  bool assembled = false;  // the exchange carried the own rows too: `out` is complete
  bool waited = false;
};

struct DispatchAccess {
  static DispatchBuffers::Pool& pool(DispatchBuffers& buffers) {
    if (!buffers.pool_) buffers.pool_ = std::make_unique<DispatchBuffers::Pool>();
    return *buffers.pool_;
  }

  // SPEC 8.1's launch. With `send_in_place` (the caller waits before it can change the
  // shard, or the shard is this dispatch's own copy) every block goes out from where it is
  // in the shard, the own rows included, so the exchange writes the whole interval in peer
  // order and nothing is copied here (the simulator copies the own rows in the pass that
  // checks the shard unchanged). Otherwise the send rows are copied out first, in peer
  // order, one memcpy per contiguous run, and the own rows are put in at wait().
  static DispatchHandle launch(Communicator& comm, const Group& group, const Tensor& tensor,
                               int sequence_dim, const Route& route, DispatchBuffers::Pool& pool,
                               bool send_in_place) {
    check_group(group, route);
    check_route(group, route);
    std::size_t axis = normalize_axis(sequence_dim, tensor.dim());
    if (tensor.shape()[axis] != route.local_length) {
      throw Error(Errc::dispatch_length, "sequence axis " + std::to_string(axis) + " has " +
                                             std::to_string(tensor.shape()[axis]) +
                                             " rows but the route's owner shard has " +
                                             std::to_string(route.local_length));
    }
    auto state = std::make_shared<DispatchHandle::State>();
    state->local = move_axis_to_front(tensor, axis);
    state->axis = axis;
    state->row = row_bytes(state->local);
    state->exchange = route.needs_exchange;
    if (state->exchange)
      launch_exchange(comm, group, route, pool, send_in_place || axis != 0, *state);
    DispatchHandle handle;
    handle.state_ = std::move(state);
    return handle;
  }

  static void launch_exchange(Communicator& comm, const Group& group, const Route& route,
                              DispatchBuffers::Pool& pool, bool send_in_place,
                              DispatchHandle::State& s) {
    std::size_t row = s.row, sent = checked_bytes(rows_sent(route), row, "rows to send");
    s.rows = route.global_end - route.global_start;
    std::size_t total = checked_bytes(s.rows, row, "assembled interval");
    const std::uint8_t* shard = s.local.bytes().data();
    std::vector<std::size_t> in_counts, out_counts;
    MemorySpace space = space_of(s.local);
    for (std::int64_t n : route.output_splits) {
      out_counts.push_back(static_cast<std::size_t>(n) * row);
      s.received += out_counts.back();
    }
    s.before = static_cast<std::size_t>(route.local_output_start) * row;
    s.out = pool.take(total);
    if (send_in_place) {
      auto m = static_cast<std::size_t>(group.index_of(comm.rank()));
      std::vector<std::size_t> displs;
      for (auto [offset, count] : route.owner_ranges()) {
        in_counts.push_back(static_cast<std::size_t>(count) * row);
        displs.push_back(static_cast<std::size_t>(offset) * row);
      }
      in_counts[m] = out_counts[m] = s.local.nbytes();
      displs[m] = 0;
      s.assembled = true;
      s.work = comm.all_to_all_v(group, {shard, s.local.nbytes(), space}, in_counts, displs,
                                 {s.out->data.get(), total, space}, out_counts);
      return;
    }
    std::vector<std::pair<std::size_t, std::size_t>> runs;  // (first byte, bytes) in the shard
    for (auto [offset, count] : route.owner_ranges()) {
      std::size_t first = static_cast<std::size_t>(offset) * row;
      std::size_t bytes = static_cast<std::size_t>(count) * row;
      in_counts.push_back(bytes);
      if (bytes == 0) continue;
      if (!runs.empty() && runs.back().first + runs.back().second == first) {
        runs.back().second += bytes;
      } else {
        runs.emplace_back(first, bytes);
      }
    }
    const std::uint8_t* send = nullptr;
    if (!runs.empty()) {
      s.send = pool.take(sent);
      std::uint8_t* at = s.send->data.get();
      for (auto [first, bytes] : runs)
        at = static_cast<std::uint8_t*>(std::memcpy(at, shard + first, bytes)) + bytes;
      send = s.send->data.get();
    }
    s.work = comm.all_to_all_v(group, {send, sent, space}, in_counts,
                               {s.out->data.get(), s.received, space}, out_counts);
  }
};

DispatchHandle async_sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                                       int sequence_dim, const Route& route) {
  DispatchBuffers fresh;
  return DispatchAccess::launch(comm, group, tensor, sequence_dim, route,
                                DispatchAccess::pool(fresh), false);
}

DispatchHandle async_sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                                       int sequence_dim, const Route& route,
                                       DispatchBuffers& buffers) {
  return DispatchAccess::launch(comm, group, tensor, sequence_dim, route,
                                DispatchAccess::pool(buffers), false);
}

Tensor DispatchHandle::wait() {
  if (!state_ || state_->waited) {
    throw Error(Errc::dispatch_reused,
                "a sequence dispatch handle cannot be waited twice (SPEC 8.3)");
  }
  State& s = *state_;
  s.waited = true;
  if (!s.exchange) return move_front_to_axis(s.local, s.axis);
  s.work.wait();
  s.send = nullptr;  // the exchange is over: the send rows go back to the pool
  // received[:before] ++ local ++ received[before:]: the rows after this rank's move up
  // past the shard's place.
  std::uint8_t* out = s.out->data.get();
  std::size_t local = s.local.nbytes();
  if (!s.assembled) {
    if (s.received > s.before)
      std::memmove(out + s.before + local, out + s.before, s.received - s.before);
    if (local) std::memcpy(out + s.before, s.local.bytes().data(), local);
  }
  Tensor assembled = rows_in(s.local, s.rows, s.received + local, s.out);
  s.out = nullptr;
  return move_front_to_axis(assembled, s.axis);
}

Tensor sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                         int sequence_dim, const Route& route) {
  DispatchBuffers fresh;
  return sequence_dispatch(comm, group, tensor, sequence_dim, route, fresh);
}

Tensor sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                         int sequence_dim, const Route& route, DispatchBuffers& buffers) {
  // Waited before returning: the shard cannot change in between, so its rows may go out
  // from where they are.
  return DispatchAccess::launch(comm, group, tensor, sequence_dim, route,
                                DispatchAccess::pool(buffers), true)
      .wait();
}

Tensor sequence_dispatch_backward(Communicator& comm, const Group& group, const Tensor& grad,
                                  int sequence_dim, const Route& route) {
  DispatchBuffers fresh;
  return sequence_dispatch_backward(comm, group, grad, sequence_dim, route, fresh);
}

Tensor sequence_dispatch_backward(Communicator& comm, const Group& group, const Tensor& grad,
                                  int sequence_dim, const Route& route, DispatchBuffers& buffers) {
  check_group(group, route);
  check_route(group, route);
  std::size_t axis = normalize_axis(sequence_dim, grad.dim());
  std::int64_t rows = route.global_end - route.global_start;
  if (grad.shape()[axis] != rows) {
    throw Error(Errc::dispatch_length, "gradient sequence axis " + std::to_string(axis) + " has " +
                                           std::to_string(grad.shape()[axis]) +
                                           " rows but the route's interval has " +
                                           std::to_string(rows));
  }
  auto& pool = DispatchAccess::pool(buffers);
  Tensor g = move_axis_to_front(grad, axis);
  std::size_t row = row_bytes(g);
  std::size_t first = static_cast<std::size_t>(route.local_output_start) * row;
  std::size_t local = static_cast<std::size_t>(route.local_length) * row;
  const std::uint8_t* bytes = g.bytes().data();
  BlockPtr out = pool.take(local);
  if (!route.needs_exchange) {
    if (local) std::memcpy(out->data.get(), bytes + first, local);
    return move_front_to_axis(rows_in(g, route.local_length, local, out), axis);
  }
  // The rows outside the own block go back from where they are in the gradient: the
  // interval in peer order, the own block (no rows sent) at `first`.
  std::vector<std::size_t> in_counts, displs, out_counts;  // the forward splits, swapped
  checked_bytes(rows_sent(route), row, "rows sent back");
  auto m = static_cast<std::size_t>(group.index_of(comm.rank()));
  for (std::size_t j = 0, at = 0; j < route.output_splits.size(); ++j) {
    if (j == m) at += local;
    in_counts.push_back(static_cast<std::size_t>(route.output_splits[j]) * row);
    displs.push_back(at);
    at += in_counts.back();
  }
  std::size_t received = 0;
  for (std::int64_t n : route.input_splits) {
    out_counts.push_back(static_cast<std::size_t>(n) * row);
    received += out_counts.back();
  }
  BlockPtr in = pool.take(received);
  MemorySpace space = space_of(grad);
  comm.all_to_all_v(group, {bytes, g.nbytes(), space}, in_counts, displs,
                    {in->data.get(), received, space}, out_counts)
      .wait();
  sum_gradient(g.dtype(), row, bytes + first, static_cast<std::size_t>(route.local_length),
               in->data.get(), route, out->data.get());
  return move_front_to_axis(rows_in(g, route.local_length, local, out), axis);
}

}  // namespace hpref
