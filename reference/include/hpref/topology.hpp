// DataTopology (SPEC 3.1): a named device mesh seen from one rank: which mesh dims are
// data-parallel, this rank's data rank, the constructor of every data-parallel
// coordinate and the model-parallel group that receives its batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpref {

struct TopologyInputs {
  std::vector<std::int64_t> mesh_shape;     // positive
  std::vector<std::string> mesh_dim_names;  // unique, one per dim
  std::vector<int> rank_list;               // unique, fills the mesh row-major
  int global_rank = 0;                      // in rank_list
  // Default: whichever of dp_replicate, dp_shard, dp are mesh dims, in mesh order.
  std::optional<std::vector<std::string>> dp_dim_names;
};

class DataTopology {
 public:
  // Checks, in order, each its own Error kind: topology_shape, topology_names,
  // topology_rank_list, topology_global_rank, topology_dp_names.
  explicit DataTopology(TopologyInputs inputs);

  const std::vector<std::int64_t>& mesh_shape() const { return in_.mesh_shape; }
  const std::vector<std::string>& mesh_dim_names() const { return in_.mesh_dim_names; }
  const std::vector<int>& rank_list() const { return in_.rank_list; }
  int global_rank() const { return in_.global_rank; }
  const std::vector<std::string>& dp_dim_names() const { return dp_names_; }

  // This rank's mesh coordinate.
  const std::vector<std::int64_t>& coordinate() const { return coordinate_; }
  // Product of the DP dims (1 if none).
  std::int64_t data_parallel_size() const { return dp_size_; }
  // This rank's row-major coordinate over the DP dims (in dp_dim_names order).
  std::int64_t data_rank() const { return data_rank_; }
  // constructor_ranks()[d]: the rank at DP coordinate d with every other coordinate 0.
  const std::vector<int>& constructor_ranks() const { return constructors_; }
  // model_parallel_rank_groups()[d]: ranks with DP coordinate d, in rank_list order.
  const std::vector<std::vector<int>>& model_parallel_rank_groups() const { return groups_; }
  int constructor_rank() const { return constructors_[static_cast<std::size_t>(data_rank_)]; }
  const std::vector<int>& model_parallel_ranks() const {
    return groups_[static_cast<std::size_t>(data_rank_)];
  }
  // SHA-256 hex of canonical_text(): equal on ranks that agree on the mesh.
  const std::string& fingerprint() const { return fingerprint_; }
  // "hpref-topology-v2\nshape=2,4\nnames=2:dp,2:cp\nranks=0,1,...\ndp=2:dp\n" (each name
  // prefixed by its length in bytes, so no two meshes share a text)
  std::string canonical_text() const;

 private:
  std::int64_t dp_index(const std::vector<std::int64_t>& coordinate) const;
  TopologyInputs in_;
  std::vector<std::string> dp_names_;
  std::vector<std::size_t> dp_axes_;
  std::vector<std::int64_t> coordinate_;
  std::int64_t dp_size_ = 1;
  std::int64_t data_rank_ = 0;
  std::vector<int> constructors_;
  std::vector<std::vector<int>> groups_;
  std::string fingerprint_;
};

}  // namespace hpref
