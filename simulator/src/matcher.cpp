// Matching operations and checking their agreement (see matcher.hpp).
#include "matcher.hpp"

#include <algorithm>

namespace hpref::sim::detail {

std::uint64_t Matcher::launch(int rank, int group, int member, OpSignature sig,
                              std::uint64_t handle, std::uint64_t launch_index) {
  GroupInfo& g = groups_[group];
  auto m = static_cast<std::size_t>(member);
  OpKey key{group, g.next_seq[m]++};
  auto [it, fresh] = ops_.try_emplace(key);
  Op& op = it->second;
  if (fresh) {
    op.members.resize(g.next_seq.size());
    op.sigs.resize(g.next_seq.size());
    op.unconsumed = static_cast<int>(op.members.size());
  }
  op.members[m] = {true, false, handle, launch_index};
  op.sigs[m] = std::move(sig);
  works_.push_back({key, member, rank});
  std::uint64_t id = forgotten_ + works_.size();
  if (op.error) return id;
  if (op.first < 0) {
    op.first = member;
  } else if (!same_call(op.sig(), op.sigs[m])) {
    // The pair as a group of two: the first launcher, then this rank.
    Group pair(group, {g.group.ranks()[static_cast<std::size_t>(op.first)], rank}, "", -1);
    OpSignature both[] = {op.sig(), op.sigs[m]};
    op.error = signature_mismatch(pair, key.seq, both);
  }
  return id;
}

bool Matcher::agree(Op& op, const OpKey& key) {
  op.error = signature_mismatch(groups_[key.group].group, key.seq, op.sigs);
  return !op.error;
}

void Matcher::fail(Op& op, const OpKey& key, Errc code, const std::string& message,
                   std::vector<int> ranks) {
  op.error = CommError(code, message, key.group, key.seq, std::move(ranks));
}

std::vector<int> Matcher::unlaunched(const Op& op, int group) const {
  std::vector<int> missing;
  const std::vector<int>& ranks = groups_[group].group.ranks();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (!op.members[i].launched) missing.push_back(ranks[i]);
  }
  return missing;
}

std::string Matcher::describe(const Op& op) {
  return op.first < 0 ? std::string("an operation") : std::string(op_kind_name(op.sig().kind));
}

const WorkRef* Matcher::work(std::uint64_t id, int rank) const {
  if (id <= forgotten_ || id - forgotten_ > works_.size()) return nullptr;
  const WorkRef& w = works_[id - 1 - forgotten_];
  return w.rank == rank && !w.waited ? &w : nullptr;
}

void Matcher::waited(std::uint64_t id) {
  works_[id - 1 - forgotten_].waited = true;
  while (!works_.empty() && works_.front().waited) {
    works_.pop_front();
    ++forgotten_;
  }
}

}  // namespace hpref::sim::detail
