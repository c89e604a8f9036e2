// The operation core of the real backends (docs/architecture.md, "The operation core"):
// Communicator implemented once over a Transport (hpref/device/transport.hpp). It owns the
// group table and sequence numbers, checks every call (op_signature.hpp), agrees on
// new_group and, in checked mode (SPEC 9.2), on every operation's signature over the
// transport's own all-gather, checksums every send buffer (the broadcast root's and the
// all_reduce buffer included) and reduces floats in group order (SPEC 9.1). A Work's
// wait() is: the cached error, if any; the transport's wait; the checksum check; the
// finishing step (the float reduction, the checked all_reduce's result). hpref::mpi and
// hpref::nccl derive from it and supply only their transport.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "hpref/communicator.hpp"

namespace hpref::device {

class Transport;

class CoreCommunicator : public Communicator {
 public:
  // Works the caller still holds are completed here as their wait() would complete them
  // (within the deadline) and let go of the transport; their wait() then gives that outcome.
  ~CoreCommunicator() override;
  CoreCommunicator(const CoreCommunicator&) = delete;
  CoreCommunicator& operator=(const CoreCommunicator&) = delete;

  int rank() const final;
  int size() const final;
  std::string world_backend() const final;
  Group world() const final;
  // The ranks each caller asks for are all-gathered over the world first, so a new_group
  // that differs between ranks is a comm_mismatch on every rank rather than a hang; in
  // checked mode as the world's next operation, in the signature's wire form, so a rank
  // that launched an operation where its peers make a new_group is one too. A Work dropped
  // unwaited is completed by its end (within the deadline, errors dropped): the transport
  // writes its buffers until then.
  Group new_group(std::span<const int> ranks, const std::string& backend) final;
  Work all_gather(const Group& group, ConstBuffer in, MutableBuffer out) final;
  Work broadcast(const Group& group, MutableBuffer buffer, int root) final;
  // Integers: the transport's reduction. Floats: all-gathered and reduced here in group
  // order, the order SPEC 9.1 fixes, so results are bitwise those of the simulator.
  Work all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) final;
  using Communicator::all_to_all_v;
  Work all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts,
                    std::span<const std::size_t> in_displs, MutableBuffer out,
                    std::span<const std::size_t> out_counts) final;
  Work barrier(const Group& group) final;

  // True once an operation timed out or a peer failed: the communicator refuses the rest.
  bool failed() const noexcept;

 protected:
  // `world_backend` names the world's backend ("mpi"); `checked` is SPEC 9.2's checked mode.
  CoreCommunicator(std::unique_ptr<Transport> transport, std::string world_backend, bool checked);
  Transport& transport() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hpref::device
