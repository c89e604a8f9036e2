// The Communicator seam (SPEC 9.1, ARCHITECTURE.md): one interface for the simulator, MPI
// and NCCL. Ranks are world ranks; new_group is a world collective every rank calls in
// the same order (non-members get an empty Group); each operation launches and returns a
// Work whose wait() completes it or throws CommError naming group, sequence and ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpref/dtype.hpp"
#include "hpref/error.hpp"

namespace hpref {

// Where a buffer lives. An accelerator-backed group (nccl, hccl) refuses host buffers and
// a host group refuses accelerator buffers (SPEC 9.1).
enum class MemorySpace : unsigned char { host, accelerator };

struct ConstBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
  MemorySpace space = MemorySpace::host;
};

struct MutableBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  MemorySpace space = MemorySpace::host;
  operator ConstBuffer() const { return {data, bytes, space}; }
};

enum class ReduceOp : unsigned char { sum, min, max };
std::string_view reduce_op_name(ReduceOp op) noexcept;

// A process group as seen from one rank. Empty (is_member() false) on non-members.
class Group {
 public:
  Group() = default;
  Group(int id, std::vector<int> ranks, std::string backend, int world_rank);

  bool is_member() const noexcept { return index_ >= 0; }
  int id() const noexcept { return id_; }                            // creation order; 0 = world
  const std::vector<int>& ranks() const noexcept { return ranks_; }  // sorted world ranks
  int size() const noexcept { return static_cast<int>(ranks_.size()); }
  int index() const noexcept { return index_; }  // this rank's position, or -1
  int index_of(int world_rank) const noexcept;   // -1 if not a member
  const std::string& backend() const noexcept { return backend_; }
  // Buffers this group's operations take (accelerator for nccl/hccl backends).
  MemorySpace memory() const noexcept { return memory_; }

 private:
  int id_ = -1;
  std::vector<int> ranks_;
  std::string backend_;
  int index_ = -1;
  MemorySpace memory_ = MemorySpace::host;
};

// A launched operation. wait() completes it (or throws CommError); waiting again on a
// completed Work returns at once. May be waited from another thread if the caller
// serializes calls into the Communicator.
class Work {
 public:
  struct State {
    virtual ~State() = default;
    virtual void wait() = 0;
  };
  Work() = default;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void wait();
  bool valid() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

// A failed collective: kind (mismatch, deadlock, peer failure, timeout, ...), plus the
// group, the per-group sequence number and the ranks involved, named in the message.
class CommError : public Error {
 public:
  CommError(Errc code, const std::string& message, int group = -1, std::int64_t seq = -1,
            std::vector<int> ranks = {})
      : Error(code, message), group_(group), seq_(seq), ranks_(std::move(ranks)) {}
  int group() const noexcept { return group_; }
  std::int64_t seq() const noexcept { return seq_; }
  const std::vector<int>& ranks() const noexcept { return ranks_; }

 private:
  int group_;
  std::int64_t seq_;
  std::vector<int> ranks_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // sim, mpi or nccl.
  virtual std::string world_backend() const = 0;
  // The group of all world ranks (id 0).
  virtual Group world() const = 0;
  // A world collective: every rank calls it in the same order with the same ranks and
  // backend; returns the group on members and an empty Group on the others.
  virtual Group new_group(std::span<const int> ranks, const std::string& backend) = 0;
  // out.bytes == group.size() * in.bytes; member i's bytes land at i * in.bytes.
  virtual Work all_gather(const Group& group, ConstBuffer in, MutableBuffer out) = 0;
  // `root` is a world rank; every member passes a buffer of the same size.
  virtual Work broadcast(const Group& group, MutableBuffer buffer, int root) = 0;
  // In place; dtype int32, int64, float32 or float64; members reduced in group order.
  virtual Work all_reduce(const Group& group, MutableBuffer buffer, DType dtype, ReduceOp op) = 0;
  // in_counts[i] bytes go to member i from in + in_displs[i]; out_counts[i] bytes come from
  // member i, back to back in member order; counts must agree pairwise. Non-empty blocks lie
  // inside `in` and may overlap (the same rows to several members, this rank among them: no
  // packed copy of them). No in_displs: the blocks back to back from in's start (MPI's
  // sdispls taken from the counts). What a wait checks unchanged is the blocks' bytes.
  virtual Work all_to_all_v(const Group& group, ConstBuffer in,
                            std::span<const std::size_t> in_counts,
                            std::span<const std::size_t> in_displs, MutableBuffer out,
                            std::span<const std::size_t> out_counts) = 0;
  // The blocks back to back from in's start.
  Work all_to_all_v(const Group& group, ConstBuffer in, std::span<const std::size_t> in_counts,
                    MutableBuffer out, std::span<const std::size_t> out_counts) {
    return all_to_all_v(group, in, in_counts, {}, out, out_counts);
  }
  virtual Work barrier(const Group& group) = 0;
};

// The device type an accelerator backend moves data on: "cuda" for names containing "nccl",
// "npu" for names containing "hccl" (any case); nullptr for every other backend.
const char* accelerator_device_type(std::string_view backend);

// True for backend names containing "nccl" or "hccl" (any case): accelerator groups.
bool is_accelerator_backend_name(std::string_view backend);

// Element-wise reduction of `count` elements of `dtype` (int32, int64, float32, float64):
// dst = op(dst, src). Error comm_usage for other dtypes.
void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, std::size_t count);

// FNV-1a 64 over bytes (SPEC 9.3's hash).
std::uint64_t fnv1a64(const void* data, std::size_t bytes,
                      std::uint64_t seed = 0xcbf29ce484222325ULL) noexcept;

// A fast checksum of a send buffer, taken at launch and compared at wait by every backend
// (four lanes of sums, sums of sums and nonlinear products of 64-bit words, folded with
// splitmix64's finalizer; AVX2 where the CPU has it, same values without: detail/checksum.hpp).
// A mutation detector, not SPEC 9.3's hash: any one changed bit, and any one or two negated
// float64s, change it (tests/unit/checksum_test.cpp).
std::uint64_t buffer_checksum(const void* data, std::size_t bytes) noexcept;
// memcpy that also returns buffer_checksum of the bytes, in one pass over the source.
std::uint64_t copy_with_checksum(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace hpref
