// hpref::mpi: the Communicator over OpenMPI (SPEC 9.1-9.2). The world is a duplicate of
// MPI_COMM_WORLD; groups are created in the SPEC 3.2 order with MPI_Comm_split, which
// non-members take part in too; every operation launches a non-blocking collective
// (MPI_Iallgather, MPI_Ibcast, MPI_Iallreduce, MPI_Ialltoallw, MPI_Ibarrier) and wait()
// polls it against a deadline. Counts and displacements beyond `int` are split into
// several operations, never truncated. MPI errors come back as CommError (the
// communicators use MPI_ERRORS_RETURN). No MPI header is needed to use this one.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "hpref/communicator.hpp"

namespace hpref::mpi {

struct Options {
  // SPEC 9.2: every wait's deadline. Past it, wait() raises CommError comm_timeout and the
  // communicator is failed(): its requests can never complete, so the job must end with
  // abort_job() (the destructor does that when it is the one that initialized MPI).
  std::int64_t timeout_ms = 600000;
  // SPEC 9.2 checked mode: each operation's signature (kind, root, reduce op, dtype,
  // counts) is all-gathered over its group first, and a disagreement raises comm_mismatch
  // on every member instead of hanging; each send buffer's checksum is compared at wait()
  // (comm_buffer_mutated) like the simulator does.
  bool checked = false;
  // The largest count or displacement one MPI call carries (OpenMPI 4.1 has no large-count
  // calls). Beyond it an operation is split. Tests lower it to run the split paths.
  std::size_t max_count = INT_MAX;
};

class MpiCommunicator final : public Communicator {
 public:
  // Initializes MPI (MPI_THREAD_SERIALIZED: a Work may be waited from another thread when
  // the caller serializes calls) unless the program already did.
  explicit MpiCommunicator(Options options = {});
  // Frees the communicators and finalizes MPI if this object initialized it; once an
  // operation has timed out it aborts the job instead (exit status 5).
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string world_backend() const override { return "mpi"; }
  Group world() const override;
  // Host backends only (any name without nccl/hccl; Group::backend() keeps the name). The
  // ranks each caller asks for are all-gathered over the world first, so a new_group that
  // differs between ranks is a comm_mismatch on every rank rather than a hang.
  Group new_group(std::span<const int> ranks, const std::string& backend) override;
  Work all_gather(const Group& group, ConstBuffer in, MutableBuffer out) override;
  Work broadcast(const Group& group, MutableBuffer buffer, int root) override;
  // Integers: MPI_Iallreduce. Floats: all-gathered and reduced here in group order, the
  // order SPEC 9.1 fixes (MPI's own reduction order is unspecified), so results are
  // bitwise those of the simulator.
  Work all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) override;
  Work all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts, MutableBuffer out,
                    std::span<const std::size_t> out_counts) override;
  Work barrier(const Group& group) override;

  const Options& options() const noexcept;
  // True once a wait passed its deadline.
  bool failed() const noexcept;
  // Ends every process of the job (MPI_Abort).
  [[noreturn]] void abort_job(int status);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpref::mpi
