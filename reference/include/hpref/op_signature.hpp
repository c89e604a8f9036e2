// What every Communicator backend shares about one operation: the local argument checks of
// SPEC 9.1 made before anything is launched, and the signature members compare to find a
// collective mismatch (SPEC 9.2-9.3: kind, root, reduce op and dtype, counts; all-to-all-v
// send counts i->j against receive counts j<-i). The simulator's monitor compares
// signatures as ranks launch; MPI and NCCL in checked mode all-gather them first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hpref/communicator.hpp"

namespace hpref {

enum class OpKind : std::int32_t { all_gather, broadcast, all_reduce, all_to_all_v, barrier };
const char* op_kind_name(OpKind kind) noexcept;

struct OpSignature {
  OpKind kind = OpKind::barrier;
  int root = -1;                // broadcast: a world rank
  ReduceOp op = ReduceOp::sum;  // all_reduce
  DType dtype = DType::uint8;   // all_reduce
  std::uint64_t bytes = 0;      // all_gather: per member; broadcast, all_reduce: the buffer
  std::vector<std::uint64_t> counts_in;   // all_to_all_v: bytes to each member
  std::vector<std::uint64_t> counts_out;  // all_to_all_v: bytes from each member
  // "all_reduce(sum, int64, 8 bytes)".
  std::string str() const;
};

// Kind, root, reduce op, dtype and byte count agree (all_to_all_v counts are compared
// pairwise by a2av_disagreement).
bool same_call(const OpSignature& a, const OpSignature& b) noexcept;
// The first member pair (i, j) where i sends counts_in[j] bytes but j expects another
// counts_out[i]; members in group order.
std::optional<std::pair<int, int>> a2av_disagreement(std::span<const OpSignature> members);
// The CommError comm_mismatch for a group's signatures (group order), naming the ranks,
// or nothing when they agree.
std::optional<CommError> signature_mismatch(const Group& group, std::int64_t seq,
                                            std::span<const OpSignature> members);

// The CommError comm_buffer_mutated: `rank` changed its send buffer of an operation
// between launch and wait ("rank 1 changed its send buffer of all_gather on group 0 seq 3
// between launch and wait"; the seq is left out when negative).
CommError buffer_mutated_error(int rank, OpKind kind, int group, std::int64_t seq);

// A fixed-size wire form, the same size on every member of a group of `members` ranks
// (all-gathered in checked mode before each operation).
std::size_t signature_wire_bytes(int members) noexcept;
void write_signature(const OpSignature& s, int members, std::uint8_t* out);
// Error comm_mismatch when the bytes are not a signature (a peer running other code).
OpSignature read_signature(const std::uint8_t* in, int members);

// "collective mismatch on group G seq S: rank A launched X but rank B launched Y", X and Y
// what each launched (OpSignature::str, or new_group_text).
CommError launch_mismatch(int group_id, std::int64_t seq, int rank_a, const std::string& a,
                          int rank_b, const std::string& b);

// Checked mode's new_group as an operation of the world group's sequence (SPEC 9.1; the
// checked process groups of hpref.torch log and agree it so, and hpref verify reads it):
// one member's launch, a new_group request (`new_group`) or else an operation (`op`).
struct Launch {
  bool new_group = false;
  std::vector<int> members;  // new_group: the sorted world ranks asked for
  std::string backend;       // new_group: the backend name asked for
  OpSignature op;            // otherwise
  // "new_group([0, 1] on gloo)" or op.str().
  std::string str() const;
};
// The comm_mismatch between member a's and member b's launch when either is a new_group:
// another kind of launch (launch_mismatch), or another request ("new_group mismatch on group
// G seq S: rank A asked for [0, 1] on gloo but rank B asked for [2, 3] on gloo"); nothing
// when both are the same request or neither is a new_group (compare those signatures with
// signature_mismatch).
std::optional<CommError> new_group_mismatch(int group_id, std::int64_t seq, int rank_a,
                                            const Launch& a, int rank_b, const Launch& b);

// new_group's agreement on the real backends: each rank's request as words (the backend
// name's hash, then a member flag per world rank), all-gathered over the world.
std::vector<std::uint64_t> group_request(std::span<const int> sorted_ranks,
                                         const std::string& backend, int world_size);
// The comm_mismatch naming the first rank whose request (in `all`, world order) differs
// from this rank's, or nothing.
std::optional<CommError> group_request_mismatch(int rank, std::span<const int> sorted_ranks,
                                                const std::string& backend,
                                                std::span<const std::uint64_t> all, int world_size);

// ---- the local checks (CommError comm_usage / comm_memory_space naming the value) -------

// Sorted, distinct ranks in [0, world_size) and a non-empty backend name.
std::vector<int> checked_group_ranks(std::span<const int> ranks, const std::string& backend,
                                     int world_size);
void check_member(const Group& group, int rank, const char* op);
void check_space(const Group& group, int rank, MemorySpace space, const char* op);
OpSignature check_all_gather(const Group& group, int rank, ConstBuffer in, MutableBuffer out);
OpSignature check_broadcast(const Group& group, int rank, MutableBuffer buffer, int root);
OpSignature check_all_reduce(const Group& group, int rank, MutableBuffer buffer, DType dtype,
                             ReduceOp op);
// Counts: one per member each way, the received ones summing to no more than `out`; the
// sent blocks back to back within `in` (no in_displs) or each non-empty one inside `in` at its
// displacement (one per member). The signature's bytes: the sent counts' sum.
OpSignature check_all_to_all_v(const Group& group, int rank, ConstBuffer in,
                               std::span<const std::size_t> in_counts, MutableBuffer out,
                               std::span<const std::size_t> out_counts,
                               std::span<const std::size_t> in_displs = {});
OpSignature check_barrier(const Group& group, int rank);

// "[0, 2, 3]".
std::string rank_list_text(std::span<const int> ranks);

}  // namespace hpref
