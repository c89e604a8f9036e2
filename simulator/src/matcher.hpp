// Matching and agreement (SPEC 9.2-9.3): operations on a group match by each member's
// sequence number; every member's signature is compared with the first launcher's as it
// launches, and all-to-all-v counts once all have. Messages are op_signature.cpp's own
// (signature_mismatch).
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "groups.hpp"
#include "hpref/op_signature.hpp"

namespace hpref::sim::detail {

struct OpKey {
  int group;
  std::int64_t seq;
  auto operator<=>(const OpKey&) const = default;
};

struct Member {
  bool launched = false;
  bool consumed = false;           // its rank copied what it receives (or is gone)
  std::uint64_t handle = 0;        // staged send data in the segment (0: none)
  std::uint64_t launch_index = 0;  // its rank's k-th operation (flip:R@K)
};

struct Op {
  int first = -1;  // member index of the first launcher, whose signature is the op's
  std::vector<Member> members;
  std::vector<OpSignature> sigs;  // one per member, in group order
  bool complete = false;
  std::optional<CommError> error;  // failed
  std::uint64_t result = 0;        // all_reduce: the reduced bytes in the segment
  int unconsumed = 0;
  bool open() const { return !complete && !error; }
  const OpSignature& sig() const { return sigs[static_cast<std::size_t>(first)]; }
};

// A launch's handle for wait(): the 1-based id counts the run's launches in order.
struct WorkRef {
  OpKey key;
  int member;
  int rank;
  bool waited = false;  // its rank's wait was answered (SimWork::done: it never asks again)
};

class Matcher {
 public:
  explicit Matcher(Groups& groups) : groups_(groups) {}
  // Rank `rank`, member `member` of `group`, launches its next operation; a signature
  // that differs from the first launcher's fails it. The new work's id.
  std::uint64_t launch(int rank, int group, int member, OpSignature sig, std::uint64_t handle,
                       std::uint64_t launch_index);
  // Every member launched: all-to-all-v counts are compared. False if it failed.
  bool agree(Op& op, const OpKey& key);
  void fail(Op& op, const OpKey& key, Errc code, const std::string& message,
            std::vector<int> ranks);
  // The group ranks that have not launched `op`, in group order.
  std::vector<int> unlaunched(const Op& op, int group) const;
  // "all_reduce", or "an operation" before anyone launched it.
  static std::string describe(const Op& op);

  std::map<OpKey, Op>& ops() { return ops_; }
  Op& op(const OpKey& key) { return ops_.at(key); }
  const Op& op(const OpKey& key) const { return ops_.at(key); }
  // The work `id` launched by `rank` and not yet waited, or null.
  const WorkRef* work(std::uint64_t id, int rank) const;
  const WorkRef& work(std::uint64_t id) const { return works_[id - 1 - forgotten_]; }
  // `rank`'s wait on the work `id` has been answered: the work is forgotten once every
  // earlier one is, so the table holds the works from the oldest one not yet waited (a work
  // dropped unwaited stays, and the works after it) rather than every launch of the run.
  void waited(std::uint64_t id);
  // How many works the table holds (for tests).
  std::size_t works_held() const { return works_.size(); }

 private:
  Groups& groups_;
  std::map<OpKey, Op> ops_;
  std::deque<WorkRef> works_;    // ids forgotten_ + 1, forgotten_ + 2, ...
  std::uint64_t forgotten_ = 0;  // the works before them, all waited
};

}  // namespace hpref::sim::detail
