// The mesh set-up the transport scenarios and the demo share (defined in transports.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/data_groups.hpp"
#include "hpref/topology.hpp"

namespace hpref::scenarios {

// dp x mp ranks in rank_list's order, named ("dp", "cp"); the readers and the planner.
struct Mesh {
  int dp = 1, mp = 1;
  std::vector<int> rank_list;
  std::vector<int> readers;
  int planner = 0;
};

DataTopology topology_of(const Mesh& m, int rank);
// The data groups of the mesh seen from this rank: host groups on host_backend(c), the
// payload exchange enabled, groups staged through `device` ("cuda:N") when given.
DataGroups groups_for(Communicator& c, const Mesh& m, const DataTopology& t, int planner,
                      std::optional<std::string> device = std::nullopt);

// A fixed mesh over every rank in order: dp x mp = size, the given readers (every rank when
// empty), planner 0.
struct FixedMesh {
  Mesh mesh;
  DataTopology topology;
  DataGroups groups;
};
FixedMesh fixed_mesh(Communicator& c, int dp, std::vector<int> readers,
                     std::optional<std::string> device = std::nullopt);

}  // namespace hpref::scenarios
