// Operation signatures and the local argument checks every backend shares.
#include "hpref/op_signature.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

namespace hpref {

const char* op_kind_name(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::all_to_all_v:
      return "all_to_all_v";
    case OpKind::barrier:
      return "barrier";
  }
  return "?";
}

std::string rank_list_text(std::span<const int> ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string OpSignature::str() const {
  std::string out = op_kind_name(kind);
  switch (kind) {
    case OpKind::broadcast:
      return out + "(root " + std::to_string(root) + ", " + std::to_string(bytes) + " bytes)";
    case OpKind::all_reduce:
      return out + "(" + std::string(reduce_op_name(op)) + ", " + std::string(dtype_name(dtype)) +
             ", " + std::to_string(bytes) + " bytes)";
    case OpKind::all_gather:
      return out + "(" + std::to_string(bytes) + " bytes each)";
    default:
      return out;
  }
}

bool same_call(const OpSignature& a, const OpSignature& b) noexcept {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case OpKind::broadcast:
      return a.root == b.root && a.bytes == b.bytes;
    case OpKind::all_reduce:
      return a.op == b.op && a.dtype == b.dtype && a.bytes == b.bytes;
    case OpKind::all_gather:
      return a.bytes == b.bytes;
    default:
      return true;
  }
}

std::optional<std::pair<int, int>> a2av_disagreement(std::span<const OpSignature> members) {
  auto n = members.size();
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      std::uint64_t sent = i < n && j < members[i].counts_in.size() ? members[i].counts_in[j] : 0;
      std::uint64_t expected = i < members[j].counts_out.size() ? members[j].counts_out[i] : 0;
      if (sent != expected) return std::make_pair(static_cast<int>(i), static_cast<int>(j));
    }
  }
  return std::nullopt;
}

namespace {

std::string where_text(int group_id, std::int64_t seq) {
  return " on group " + std::to_string(group_id) + " seq " + std::to_string(seq);
}

}  // namespace

CommError launch_mismatch(int group_id, std::int64_t seq, int rank_a, const std::string& a,
                          int rank_b, const std::string& b) {
  return CommError(Errc::comm_mismatch,
                   "collective mismatch" + where_text(group_id, seq) + ": rank " +
                       std::to_string(rank_a) + " launched " + a + " but rank " +
                       std::to_string(rank_b) + " launched " + b,
                   group_id, seq, {rank_a, rank_b});
}

std::string Launch::str() const {
  return new_group ? "new_group(" + rank_list_text(members) + " on " + backend + ")" : op.str();
}

std::optional<CommError> new_group_mismatch(int group_id, std::int64_t seq, int rank_a,
                                            const Launch& a, int rank_b, const Launch& b) {
  if (!a.new_group && !b.new_group) return std::nullopt;
  if (a.new_group != b.new_group)
    return launch_mismatch(group_id, seq, rank_a, a.str(), rank_b, b.str());
  if (a.members == b.members && a.backend == b.backend) return std::nullopt;
  return CommError(Errc::comm_mismatch,
                   "new_group mismatch" + where_text(group_id, seq) + ": rank " +
                       std::to_string(rank_a) + " asked for " + rank_list_text(a.members) + " on " +
                       a.backend + " but rank " + std::to_string(rank_b) + " asked for " +
                       rank_list_text(b.members) + " on " + b.backend,
                   group_id, seq, {rank_a, rank_b});
}

std::optional<CommError> signature_mismatch(const Group& group, std::int64_t seq,
                                            std::span<const OpSignature> members) {
  const auto& ranks = group.ranks();
  std::string where = where_text(group.id(), seq);
  for (std::size_t i = 1; i < members.size(); ++i) {
    if (!same_call(members[0], members[i])) {
      return launch_mismatch(group.id(), seq, ranks[0], members[0].str(), ranks[i],
                             members[i].str());
    }
  }
  if (!members.empty() && members[0].kind == OpKind::all_to_all_v) {
    if (auto bad = a2av_disagreement(members)) {
      auto [i, j] = *bad;
      return CommError(Errc::comm_mismatch,
                       "all_to_all_v counts disagree" + where + ": rank " +
                           std::to_string(ranks[i]) + " sends " +
                           std::to_string(members[i].counts_in[j]) + " bytes to rank " +
                           std::to_string(ranks[j]) + ", which expects " +
                           std::to_string(members[j].counts_out[i]),
                       group.id(), seq, {ranks[i], ranks[j]});
    }
  }
  return std::nullopt;
}

CommError buffer_mutated_error(int rank, OpKind kind, int group, std::int64_t seq) {
  return CommError(Errc::comm_buffer_mutated,
                   "rank " + std::to_string(rank) + " changed its send buffer of " +
                       op_kind_name(kind) + " on group " + std::to_string(group) +
                       (seq >= 0 ? " seq " + std::to_string(seq) : "") + " between launch and wait",
                   group, seq, {rank});
}

// ---- wire form: magic, kind, root, op, dtype, bytes, then 2 x members counts -----------

namespace {

constexpr std::uint64_t kSignatureMagic = 0x4850524546534947ULL;  // "HPREFSIG"

void put(std::uint8_t*& p, std::uint64_t v) {
  std::memcpy(p, &v, 8);
  p += 8;
}

std::uint64_t get(const std::uint8_t*& p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  p += 8;
  return v;
}

}  // namespace

std::size_t signature_wire_bytes(int members) noexcept {
  return 8 * (6 + 2 * static_cast<std::size_t>(members));
}

void write_signature(const OpSignature& s, int members, std::uint8_t* out) {
  std::uint8_t* p = out;
  put(p, kSignatureMagic);
  put(p, static_cast<std::uint64_t>(s.kind));
  put(p, static_cast<std::uint64_t>(static_cast<std::int64_t>(s.root)));
  put(p, static_cast<std::uint64_t>(s.op));
  put(p, static_cast<std::uint64_t>(s.dtype));
  put(p, s.bytes);
  for (int i = 0; i < members; ++i)
    put(p, i < static_cast<int>(s.counts_in.size()) ? s.counts_in[static_cast<std::size_t>(i)] : 0);
  for (int i = 0; i < members; ++i) {
    put(p,
        i < static_cast<int>(s.counts_out.size()) ? s.counts_out[static_cast<std::size_t>(i)] : 0);
  }
}

OpSignature read_signature(const std::uint8_t* in, int members) {
  const std::uint8_t* p = in;
  std::uint64_t magic = get(p), kind = get(p), root = get(p), op = get(p), dtype = get(p);
  if (magic != kSignatureMagic || kind > static_cast<std::uint64_t>(OpKind::barrier) ||
      op > static_cast<std::uint64_t>(ReduceOp::max) ||
      dtype >= static_cast<std::uint64_t>(kDTypeCount)) {
    throw CommError(Errc::comm_mismatch,
                    "a peer's checked-mode signature is not one (is every rank running the same "
                    "hpref in checked mode?)");
  }
  OpSignature s;
  s.kind = static_cast<OpKind>(kind);
  s.root = static_cast<int>(static_cast<std::int64_t>(root));
  s.op = static_cast<ReduceOp>(op);
  s.dtype = static_cast<DType>(dtype);
  s.bytes = get(p);
  if (s.kind == OpKind::all_to_all_v) {
    s.counts_in.resize(static_cast<std::size_t>(members));
    s.counts_out.resize(static_cast<std::size_t>(members));
    for (auto& c : s.counts_in) c = get(p);
    for (auto& c : s.counts_out) c = get(p);
  }
  return s;
}

// ---- new_group's agreement ---------------------------------------------------------------

std::vector<std::uint64_t> group_request(std::span<const int> sorted_ranks,
                                         const std::string& backend, int world_size) {
  std::vector<std::uint64_t> words(static_cast<std::size_t>(world_size) + 1, 0);
  words[0] = fnv1a64(backend.data(), backend.size());
  for (int r : sorted_ranks) words[static_cast<std::size_t>(r) + 1] = 1;
  return words;
}

std::optional<CommError> group_request_mismatch(int rank, std::span<const int> sorted_ranks,
                                                const std::string& backend,
                                                std::span<const std::uint64_t> all,
                                                int world_size) {
  auto n = static_cast<std::size_t>(world_size);
  auto mine = group_request(sorted_ranks, backend, world_size);
  for (std::size_t p = 0; p < n; ++p) {
    std::span<const std::uint64_t> theirs = all.subspan(p * (n + 1), n + 1);
    if (std::equal(mine.begin(), mine.end(), theirs.begin())) continue;
    std::vector<int> asked;
    for (std::size_t r = 0; r < n; ++r) {
      if (theirs[r + 1]) asked.push_back(static_cast<int>(r));
    }
    return CommError(
        Errc::comm_mismatch,
        "new_group mismatch: rank " + std::to_string(rank) + " asked for " +
            rank_list_text(sorted_ranks) + " on " + backend + " but rank " + std::to_string(p) +
            " asked for " + rank_list_text(asked) +
            (theirs[0] == mine[0] ? " on " + backend : std::string(" on another backend")),
        -1, -1, {rank, static_cast<int>(p)});
  }
  return std::nullopt;
}

// ---- local checks -------------------------------------------------------------------------

std::vector<int> checked_group_ranks(std::span<const int> ranks, const std::string& backend,
                                     int world_size) {
  std::vector<int> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  bool bad = sorted.empty() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
             sorted.front() < 0 || sorted.back() >= world_size;
  if (bad || backend.empty()) {
    throw CommError(Errc::comm_usage, "new_group needs distinct world ranks in [0, " +
                                          std::to_string(world_size) +
                                          ") and a backend name, got " + rank_list_text(ranks) +
                                          " on '" + backend + "'");
  }
  return sorted;
}

void check_member(const Group& group, int rank, const char* op) {
  if (!group.is_member()) {
    throw CommError(Errc::comm_usage,
                    std::string(op) + " on group " + std::to_string(group.id()) + " by rank " +
                        std::to_string(rank) + ", which is not a member",
                    group.id());
  }
}

void check_space(const Group& group, int rank, MemorySpace space, const char* op) {
  auto name = [](MemorySpace s) { return s == MemorySpace::host ? "host" : "accelerator"; };
  if (space != group.memory()) {
    throw CommError(Errc::comm_memory_space,
                    std::string(op) + " on group " + std::to_string(group.id()) + " (backend " +
                        group.backend() + ") refuses a " + name(space) +
                        " buffer: the group moves " + name(group.memory()) + " memory",
                    group.id(), -1, {rank});
  }
}

OpSignature check_all_gather(const Group& group, int rank, ConstBuffer in, MutableBuffer out) {
  check_member(group, rank, "all_gather");
  check_space(group, rank, in.space, "all_gather");
  check_space(group, rank, out.space, "all_gather");
  std::size_t gathered = 0;
  if (__builtin_mul_overflow(in.bytes, static_cast<std::size_t>(group.size()), &gathered) ||
      out.bytes != gathered) {
    throw CommError(Errc::comm_usage,
                    "all_gather output of " + std::to_string(out.bytes) +
                        " bytes is not group size " + std::to_string(group.size()) + " x input " +
                        std::to_string(in.bytes),
                    group.id());
  }
  OpSignature s;
  s.kind = OpKind::all_gather;
  s.bytes = in.bytes;
  return s;
}

OpSignature check_broadcast(const Group& group, int rank, MutableBuffer buffer, int root) {
  check_member(group, rank, "broadcast");
  check_space(group, rank, buffer.space, "broadcast");
  if (group.index_of(root) < 0) {
    throw CommError(Errc::comm_usage,
                    "broadcast root " + std::to_string(root) + " is not a member of group " +
                        std::to_string(group.id()),
                    group.id());
  }
  OpSignature s;
  s.kind = OpKind::broadcast;
  s.root = root;
  s.bytes = buffer.bytes;
  return s;
}

OpSignature check_all_reduce(const Group& group, int rank, MutableBuffer buffer, DType dtype,
                             ReduceOp op) {
  check_member(group, rank, "all_reduce");
  check_space(group, rank, buffer.space, "all_reduce");
  if ((dtype != DType::int32 && dtype != DType::int64 && dtype != DType::float32 &&
       dtype != DType::float64) ||
      buffer.bytes % element_size(dtype) != 0) {
    throw CommError(Errc::comm_usage,
                    "all_reduce takes int32, int64, float32 or float64 and a whole number of "
                    "elements, got " +
                        std::string(dtype_name(dtype)) + " over " + std::to_string(buffer.bytes) +
                        " bytes",
                    group.id());
  }
  OpSignature s;
  s.kind = OpKind::all_reduce;
  s.op = op;
  s.dtype = dtype;
  s.bytes = buffer.bytes;
  return s;
}

OpSignature check_all_to_all_v(const Group& group, int rank, ConstBuffer in,
                               std::span<const std::size_t> in_counts, MutableBuffer out,
                               std::span<const std::size_t> out_counts,
                               std::span<const std::size_t> in_displs) {
  check_member(group, rank, "all_to_all_v");
  check_space(group, rank, in.space, "all_to_all_v");
  check_space(group, rank, out.space, "all_to_all_v");
  auto n = static_cast<std::size_t>(group.size());
  // Sums that do not fit size_t (a negative count converted to size_t does that) must not
  // wrap into a small total that fits the buffer: they saturate and are refused.
  auto total = [](std::span<const std::size_t> counts) {
    std::size_t sum = 0;
    for (std::size_t c : counts) {
      if (__builtin_add_overflow(sum, c, &sum)) return std::numeric_limits<std::size_t>::max();
    }
    return sum;
  };
  auto text = [](std::size_t sum) {
    return sum == std::numeric_limits<std::size_t>::max() ? std::string("at least 2^64 - 1")
                                                          : std::to_string(sum);
  };
  std::size_t sent = total(in_counts);
  std::size_t received = total(out_counts);
  bool displaced = !in_displs.empty();
  if (displaced && in_displs.size() != n) {
    throw CommError(Errc::comm_usage,
                    "all_to_all_v needs " + std::to_string(n) +
                        " send displacements (or none), got " + std::to_string(in_displs.size()),
                    group.id());
  }
  for (std::size_t i = 0; displaced && i < n && i < in_counts.size(); ++i) {
    std::size_t end = 0;
    if (in_counts[i] == 0) continue;  // reads nothing: any displacement
    if (__builtin_add_overflow(in_displs[i], in_counts[i], &end) || end > in.bytes) {
      throw CommError(Errc::comm_usage,
                      "all_to_all_v's block for member " + std::to_string(i) + " (" +
                          std::to_string(in_counts[i]) + " bytes at displacement " +
                          std::to_string(in_displs[i]) + ") ends past the send buffer of " +
                          std::to_string(in.bytes) + " bytes",
                      group.id());
    }
  }
  bool too_many = displaced ? sent == std::numeric_limits<std::size_t>::max() : sent > in.bytes;
  if (in_counts.size() != n || out_counts.size() != n || too_many || received > out.bytes) {
    throw CommError(Errc::comm_usage,
                    "all_to_all_v needs " + std::to_string(n) +
                        " counts each way within the buffers, got " +
                        std::to_string(in_counts.size()) + " summing to " + text(sent) + " of " +
                        std::to_string(in.bytes) + " and " + std::to_string(out_counts.size()) +
                        " summing to " + text(received) + " of " + std::to_string(out.bytes),
                    group.id());
  }
  OpSignature s;
  s.kind = OpKind::all_to_all_v;
  s.bytes = sent;
  s.counts_in.assign(in_counts.begin(), in_counts.end());
  s.counts_out.assign(out_counts.begin(), out_counts.end());
  return s;
}

OpSignature check_barrier(const Group& group, int rank) {
  check_member(group, rank, "barrier");
  OpSignature s;
  s.kind = OpKind::barrier;
  return s;
}

}  // namespace hpref
