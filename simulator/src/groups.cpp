// The group table and new_group's agreement (see groups.hpp).
#include "groups.hpp"

#include <numeric>

#include "hpref/op_signature.hpp"

namespace hpref::sim::detail {

Groups::Groups(int ranks, const std::string& world_backend)
    : requests_(static_cast<std::size_t>(ranks)) {
  std::vector<int> all(static_cast<std::size_t>(ranks));
  std::iota(all.begin(), all.end(), 0);
  groups_.push_back({Group(0, std::move(all), world_backend, -1),
                     std::vector<std::int64_t>(static_cast<std::size_t>(ranks), 0)});
}

int Groups::member_index(int id, int rank) const {
  if (id < 0 || id >= next_id()) return -1;
  return (*this)[id].group.index_of(rank);
}

void Groups::arrive(int rank, std::vector<int> ranks, std::string backend) {
  requests_[static_cast<std::size_t>(rank)] = {true, std::move(ranks), std::move(backend)};
  ++arrivals_;
}

std::optional<std::string> Groups::disagreement() const {
  const Request& first = requests_[0];
  for (std::size_t p = 1; p < requests_.size(); ++p) {
    const Request& other = requests_[p];
    if (other.ranks == first.ranks && other.backend == first.backend) continue;
    return "new_group #" + std::to_string(next_id()) + " mismatch: rank 0 asked for " +
           rank_list_text(first.ranks) + " on " + first.backend + " but rank " + std::to_string(p) +
           " asked for " + rank_list_text(other.ranks) + " on " + other.backend;
  }
  return std::nullopt;
}

int Groups::create(Trace& trace) {
  const Request& agreed = requests_[0];
  int id = next_id();
  trace.new_group(id, agreed.ranks, agreed.backend);
  groups_.push_back({Group(id, agreed.ranks, agreed.backend, -1),
                     std::vector<std::int64_t>(agreed.ranks.size(), 0)});
  clear_arrivals();
  return id;
}

void Groups::clear_arrivals() {
  for (Request& r : requests_) r.arrived = false;
  arrivals_ = 0;
}

}  // namespace hpref::sim::detail
