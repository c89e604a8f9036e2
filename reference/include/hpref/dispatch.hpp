// Sequence dispatch (SPEC 8): the all-to-all-v that gives each context-parallel rank the
// rows of the interval its route names, and the backward pass that sends gradient rows
// back and sums them in a fixed order. Any sequence dim (negative counts from the end),
// any row width and dtype forward; backward sums need arithmetic on the dtype.
#pragma once

#include <cstddef>
#include <memory>

#include "hpref/communicator.hpp"
#include "hpref/routes.hpp"
#include "hpref/tensor.hpp"

namespace hpref {

// A launched forward dispatch. It owns its send rows until the exchange completes; wait()
// returns the assembled bank in the input's layout, once (a second wait is Error
// dispatch_reused, SPEC 8.3).
class DispatchHandle {
 public:
  Tensor wait();

 private:
  friend struct DispatchAccess;  // dispatch.cpp's launch
  struct State;
  std::shared_ptr<State> state_;
};

// SPEC 8.1. `group` is the context-parallel group in sequence-shard order (member i has
// route index i). Errors: dispatch_axis (sequence_dim outside [-ndim, ndim)),
// dispatch_length (axis length != route.local_length), dispatch_group (a route for
// another number of ranks), dispatch_route (a route that is not valid for this rank,
// Route::problem(group.index()), or whose rows do not fit in memory), checked in that
// order but the route before the axis.
DispatchHandle async_sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                                       int sequence_dim, const Route& route);
Tensor sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                         int sequence_dim, const Route& route);

// SPEC 8.2: the adjoint. `grad` is the output gradient (its sequence axis spans
// [global_start, global_end)); returns the gradient of the owner shard: its own block,
// then each peer's rows added at that peer's send offset in ascending rank order. The
// same errors as the forward (dispatch_length: axis length != the route's interval).
Tensor sequence_dispatch_backward(Communicator& comm, const Group& group, const Tensor& grad,
                                  int sequence_dim, const Route& route);

// Memory that dispatch reuses from one call to the next: the packed send rows, the
// backward's received rows and the outputs. Without it every call takes fresh memory, whose
// first touch costs a page fault per 4 KiB (more than copying the page), and how many of
// those a step pays depends on the allocator's history (glibc trims or maps large blocks
// by thresholds it moves as blocks are freed). An output is a tensor viewing one of these
// buffers: a later call writes that buffer again only once no tensor views it any more,
// else it takes another, so outputs a caller keeps are never changed. At most
// kMaxBuffers are kept. Not thread-safe: one per thread (several async dispatches in
// flight on one object are fine, each holds its own buffers until its wait).
class DispatchBuffers {
 public:
  static constexpr std::size_t kMaxBuffers = 8;
  DispatchBuffers();
  ~DispatchBuffers();
  DispatchBuffers(DispatchBuffers&&) noexcept;
  DispatchBuffers& operator=(DispatchBuffers&&) noexcept;
  // Buffers kept, whether a tensor still views them or not.
  std::size_t count() const noexcept;

 private:
  friend struct DispatchAccess;
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

// The same operations writing into `buffers` (same results, same errors, same
// communication): a loop that passes one DispatchBuffers every step touches warm memory
// only, once its outputs of the step before are released.
DispatchHandle async_sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                                       int sequence_dim, const Route& route,
                                       DispatchBuffers& buffers);
Tensor sequence_dispatch(Communicator& comm, const Group& group, const Tensor& tensor,
                         int sequence_dim, const Route& route, DispatchBuffers& buffers);
Tensor sequence_dispatch_backward(Communicator& comm, const Group& group, const Tensor& grad,
                                  int sequence_dim, const Route& route, DispatchBuffers& buffers);

// Layout helpers: the tensor with `axis` moved to the front / from the front back to
// `axis` (contiguous copies; the inverse of each other).
Tensor move_axis_to_front(const Tensor& t, std::size_t axis);
Tensor move_front_to_axis(const Tensor& t, std::size_t axis);

}  // namespace hpref
