// Group planning (SPEC 3.2): a pure function of the topology and the loader's options
// that says which process groups every rank creates, in which order (members and
// non-members alike, since group creation is a world collective), and which of them this
// rank keeps. Every check is its own error kind, in the SPEC's order.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "hpref/topology.hpp"

namespace hpref {

struct GroupPlanInputs {
  const DataTopology* topology = nullptr;
  std::vector<int> reader_ranks;
  int planner_rank = 0;
  std::string cpu_backend;                          // gloo, hccl, sim or mpi (any case)
  std::optional<std::string> payload_backend;       // none, or a non-empty name
  std::optional<std::string> communication_device;  // torch.device's "type[:N]": cpu, cuda, npu...
  bool enable_payload_exchange = true;
  std::optional<std::string> model_device;
  bool distributed = true;
  int world_size = 1;
  int rank = 0;
  std::string world_backend;  // the world communicator's backend (sim, mpi, nccl, ...)
};

enum class GroupRole { control, payload, model_parallel_host, model_parallel_tensor };
std::string_view group_role_name(GroupRole role) noexcept;
std::ostream& operator<<(std::ostream& os, GroupRole role);

struct GroupCreation {
  GroupRole role;
  std::vector<int> ranks;  // sorted world ranks
  std::string backend;
  bool operator==(const GroupCreation&) const = default;
};

struct GroupPlan {
  std::vector<int> data_plane_ranks;  // sorted union of readers and constructors
  int planner_rank = 0;
  bool distributed = false;
  std::optional<std::string> payload_backend;  // effective; none without a payload group
  bool payload_reuses_control = false;
  std::optional<std::string> tensor_backend;  // of the model-parallel accelerator groups
  std::vector<GroupCreation> creations;       // the same on every rank, in order
  // Indices into `creations` of the groups this rank keeps (absent: not a member / none).
  std::optional<std::size_t> control, payload, model_parallel, model_parallel_tensor;
  bool operator==(const GroupPlan&) const = default;
};

GroupPlan plan_groups(const GroupPlanInputs& inputs);

}  // namespace hpref
