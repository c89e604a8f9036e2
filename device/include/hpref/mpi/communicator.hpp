// hpref::mpi: the Communicator over OpenMPI (SPEC 9.1-9.2). The world is a duplicate of
// MPI_COMM_WORLD; groups are created in the SPEC 3.2 order with MPI_Comm_split, which
// non-members take part in too; every operation launches a non-blocking collective
// (MPI_Iallgather, MPI_Ibcast, MPI_Iallreduce, MPI_Ialltoallw, MPI_Ibarrier) and wait()
// polls it against a deadline. Counts and displacements beyond `int` are split into
// several operations, never truncated. MPI errors come back as CommError (the
// communicators use MPI_ERRORS_RETURN, and while a wait polls so do MPI_COMM_WORLD and
// MPI_COMM_SELF, whose handlers Open MPI calls for a request's error); one at wait()
// (comm_backend: a truncated message, members disagreeing on a count) fails the
// communicator like a timeout. The operation lifecycle (checks, sequence numbers,
// checked mode, float reductions) is the core's (hpref/device/communicator.hpp); this is its
// MPI transport (device/src/mpi/transport.cpp). No MPI header is needed to use this one.
#pragma once

#include <climits>
#include <cstdint>
#include "hpref/device/communicator.hpp"

namespace hpref::mpi {

struct Options {
  // SPEC 9.2: every wait's deadline, >= 1 (any value: one past the clock's range waits
  // without end). Past it, wait() raises CommError comm_timeout and the communicator is
  // failed(): its requests can never complete, so the job must end with abort_job() (the
  // destructor does that when it is the one that initialized MPI).
  std::int64_t timeout_ms = 600000;
  // SPEC 9.2 checked mode: each operation's signature (kind, root, reduce op, dtype,
  // counts) is all-gathered over its group first, and a disagreement raises comm_mismatch
  // on every member instead of hanging; each send buffer's checksum (the broadcast root's
  // and all_reduce's buffer included) is compared at wait() (comm_buffer_mutated) like the
  // simulator does.
  bool checked = false;
  // The largest count or displacement one MPI call carries (OpenMPI 4.1 has no large-count
  // calls). Beyond it an operation is split. Tests lower it to run the split paths.
  std::size_t max_count = INT_MAX;
};

class MpiCommunicator final : public device::CoreCommunicator {
 public:
  // Initializes MPI (MPI_THREAD_SERIALIZED: a Work may be launched and waited from another
  // thread when the caller serializes calls) unless the program already did; at a lower
  // level, an operation launched or waited off MPI's main thread is refused (comm_usage)
  // before it changes anything. comm_usage once MPI was finalized (MPI initializes once per
  // process). Every rank of the job makes one (within timeout_ms, else comm_timeout).
  explicit MpiCommunicator(Options options = {});
  // Completes the Works still held (their wait() gives the outcome), frees the
  // communicators (not after the program's MPI_Finalize) and, when hpref initialized MPI,
  // finalizes it if this is the process's last MpiCommunicator; once an operation has timed
  // out (failed()) it aborts the job instead when hpref initialized MPI (exit status 5).
  ~MpiCommunicator() override;
  // Groups: host backends only (no nccl/hccl in the name).
  const Options& options() const noexcept;
  // Ends every process of the job (MPI_Abort).
  [[noreturn]] void abort_job(int status);

 private:
  Options options_;
};

}  // namespace hpref::mpi
