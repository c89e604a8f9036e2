// The process groups of the data plane (SPEC 3.2), created on a Communicator by
// executing the group plan: every rank performs the same new_group calls in the same
// order, and keeps the handles of the groups it belongs to.
#pragma once

#include <optional>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/group_plan.hpp"

namespace hpref {

struct DataGroups {
  GroupPlan plan;
  std::vector<int> data_plane_ranks;
  int planner_rank = 0;
  bool distributed = false;
  std::optional<Group> control;
  std::optional<Group> payload;  // the control group again when the plan reuses it
  std::optional<Group> model_parallel;
  std::optional<Group> model_parallel_tensor;
};

// Plans (SPEC 3.2) and creates the groups. inputs.rank, world_size and world_backend are
// taken from `comm` when distributed.
DataGroups create_data_groups(Communicator& comm, GroupPlanInputs inputs);

}  // namespace hpref
