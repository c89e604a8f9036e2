// Executing the group plan on a Communicator.
#include "hpref/data_groups.hpp"

namespace hpref {

DataGroups create_data_groups(Communicator& comm, GroupPlanInputs inputs) {
  if (inputs.distributed) {
    inputs.rank = comm.rank();
    inputs.world_size = comm.size();
    inputs.world_backend = comm.world_backend();
  }
  DataGroups g;
  g.plan = plan_groups(inputs);
  g.data_plane_ranks = g.plan.data_plane_ranks;
  g.planner_rank = g.plan.planner_rank;
  g.distributed = g.plan.distributed;
  std::vector<Group> created;
  for (const GroupCreation& c : g.plan.creations)
    created.push_back(comm.new_group(c.ranks, c.backend));
  auto keep = [&](const std::optional<std::size_t>& index) -> std::optional<Group> {
    if (!index) return std::nullopt;
    return created[*index];
  };
  g.control = keep(g.plan.control);
  g.payload = keep(g.plan.payload);
  g.model_parallel = keep(g.plan.model_parallel);
  g.model_parallel_tensor = keep(g.plan.model_parallel_tensor);
  return g;
}

}  // namespace hpref
