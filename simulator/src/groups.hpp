// The group table (id 0: the world) and new_group's agreement. new_group is a world
// collective (SPEC 9.1): every rank arrives with its request, and once all have, the
// requests must be the same for the group to be made.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"
#include "trace.hpp"

namespace hpref::sim::detail {

struct GroupInfo {
  Group group;                         // id, sorted world ranks, backend (no member view)
  std::vector<std::int64_t> next_seq;  // per member: the sequence of its next operation
};

class Groups {
 public:
  Groups(int ranks, const std::string& world_backend);
  GroupInfo& operator[](int id) { return groups_[static_cast<std::size_t>(id)]; }
  const GroupInfo& operator[](int id) const { return groups_[static_cast<std::size_t>(id)]; }
  // `rank`'s index in group `id`; -1 when there is no such group or it is not a member.
  int member_index(int id, int rank) const;
  // The id the new_group being agreed on gets ("new_group #N" in messages).
  int next_id() const { return static_cast<int>(groups_.size()); }

  void arrive(int rank, std::vector<int> ranks, std::string backend);
  bool arrived(int rank) const { return requests_[static_cast<std::size_t>(rank)].arrived; }
  int arrivals() const { return arrivals_; }
  // Once every rank arrived: the first request that differs from rank 0's, as a message.
  std::optional<std::string> disagreement() const;
  // Makes the agreed group, traces it, clears the arrivals; its id.
  int create(Trace& trace);
  void clear_arrivals();

 private:
  struct Request {
    bool arrived = false;
    std::vector<int> ranks;
    std::string backend;
  };
  std::vector<GroupInfo> groups_;
  std::vector<Request> requests_;  // per world rank
  int arrivals_ = 0;
};

}  // namespace hpref::sim::detail
