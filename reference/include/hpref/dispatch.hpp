// Sequence dispatch (SPEC 8): the all-to-all-v that gives each context-parallel rank the
// rows of the interval its route names, and the backward pass that sends gradient rows
// back and sums them in a fixed order. Any sequence dim (negative counts from the end),
// any row width and dtype forward; backward sums need arithmetic on the dtype.
#pragma once

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
  friend DispatchHandle async_sequence_dispatch(Communicator&, const Group&, const Tensor&, int,
                                                const Route&);
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

// Layout helpers: the tensor with `axis` moved to the front / from the front back to
// `axis` (contiguous copies; the inverse of each other).
Tensor move_axis_to_front(const Tensor& t, std::size_t axis);
Tensor move_front_to_axis(const Tensor& t, std::size_t axis);

}  // namespace hpref
