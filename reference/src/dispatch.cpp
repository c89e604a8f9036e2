// SPEC 8: forward dispatch with a single-use handle, and its exact adjoint.
#include "hpref/dispatch.hpp"

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

}  // namespace

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
  Tensor local;  // the owner shard, sequence axis first
  Route route;
  std::size_t axis = 0;
  std::size_t row = 0;  // bytes per row
  Work work;
  std::vector<std::uint8_t> send, received;
  bool exchange = false;
  bool waited = false;
};

DispatchHandle async_sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                                       int sequence_dim, const Route& route) {
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
  state->route = route;
  state->axis = axis;
  state->row = row_bytes(state->local);
  state->exchange = route.needs_exchange;
  if (state->exchange) {
    std::vector<std::size_t> in_counts, out_counts;
    state->send.reserve(checked_bytes(rows_sent(route), state->row, "rows to send"));
    checked_bytes(route.global_end - route.global_start, state->row, "assembled interval");
    for (auto [offset, count] : route.owner_ranges()) {
      const std::uint8_t* rows =
          state->local.bytes().data() + static_cast<std::size_t>(offset) * state->row;
      state->send.insert(state->send.end(), rows,
                         rows + static_cast<std::size_t>(count) * state->row);
      in_counts.push_back(static_cast<std::size_t>(count) * state->row);
    }
    for (std::int64_t n : route.output_splits)
      out_counts.push_back(static_cast<std::size_t>(n) * state->row);
    state->received.resize(std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}));
    MemorySpace space = space_of(tensor);
    state->work =
        comm.all_to_all_v(group, {state->send.data(), state->send.size(), space}, in_counts,
                          {state->received.data(), state->received.size(), space}, out_counts);
  }
  DispatchHandle handle;
  handle.state_ = std::move(state);
  return handle;
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
  std::size_t before = static_cast<std::size_t>(s.route.local_output_start) * s.row;
  std::vector<std::uint8_t> out;
  out.reserve(s.received.size() + s.local.nbytes());
  out.insert(out.end(), s.received.begin(),
             s.received.begin() + static_cast<std::ptrdiff_t>(before));
  out.insert(out.end(), s.local.bytes().begin(), s.local.bytes().end());
  out.insert(out.end(), s.received.begin() + static_cast<std::ptrdiff_t>(before), s.received.end());
  std::int64_t rows = s.route.global_end - s.route.global_start;
  Tensor assembled = rows_like(s.local, rows, std::move(out));
  s.send = {};  // the exchange is over: release both buffers, not just their contents
  s.received = {};
  return move_front_to_axis(assembled, s.axis);
}

Tensor sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                         int sequence_dim, const Route& route) {
  return async_sequence_dispatch(comm, group, tensor, sequence_dim, route).wait();
}

Tensor sequence_dispatch_backward(Communicator& comm, const Group& group, const Tensor& grad,
                                  int sequence_dim, const Route& route) {
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
  Tensor g = move_axis_to_front(grad, axis);
  std::size_t row = row_bytes(g);
  std::size_t first = static_cast<std::size_t>(route.local_output_start) * row;
  std::size_t last = first + static_cast<std::size_t>(route.local_length) * row;
  std::vector<std::uint8_t> local(g.bytes().begin() + static_cast<std::ptrdiff_t>(first),
                                  g.bytes().begin() + static_cast<std::ptrdiff_t>(last));
  if (route.needs_exchange) {
    std::vector<std::uint8_t> send(g.bytes().begin(),
                                   g.bytes().begin() + static_cast<std::ptrdiff_t>(first));
    send.insert(send.end(), g.bytes().begin() + static_cast<std::ptrdiff_t>(last), g.bytes().end());
    std::vector<std::size_t> in_counts, out_counts;  // the forward splits, swapped
    checked_bytes(rows_sent(route), row, "rows sent back");
    for (std::int64_t n : route.output_splits)
      in_counts.push_back(static_cast<std::size_t>(n) * row);
    for (std::int64_t n : route.input_splits)
      out_counts.push_back(static_cast<std::size_t>(n) * row);
    std::vector<std::uint8_t> received(
        std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}));
    MemorySpace space = space_of(grad);
    comm.all_to_all_v(group, {send.data(), send.size(), space}, in_counts,
                      {received.data(), received.size(), space}, out_counts)
        .wait();
    std::size_t cursor = 0;  // own block first, then peers in ascending rank (SPEC 8.2)
    std::size_t elems_per_row = row / element_size(g.dtype());
    for (auto [offset, count] :
         route.owner_ranges()) {  // a peer's rows are contiguous: one add each
      std::size_t n = static_cast<std::size_t>(count);
      if (n > 0) {
        add_elements(g.dtype(), local.data() + static_cast<std::size_t>(offset) * row,
                     received.data() + cursor, n * elems_per_row);
      }
      cursor += n * row;
    }
  }
  return move_front_to_axis(rows_like(g, route.local_length, std::move(local)), axis);
}

}  // namespace hpref
