// DataTopology (SPEC 3.1): checks and the derived views of the mesh.
#include "hpref/topology.hpp"

#include <algorithm>
#include <set>

#include "hpref/error.hpp"
#include "hpref/sha256.hpp"

namespace hpref {
namespace {

template <class T>
std::string join(const std::vector<T>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    if constexpr (std::is_same_v<T, std::string>) {
      out += v[i];
    } else {
      out += std::to_string(v[i]);
    }
  }
  return out;
}

// Row-major coordinate of flat index `i` in `shape`.
std::vector<std::int64_t> unflatten(std::int64_t i, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    c[k] = i % shape[k];
    i /= shape[k];
  }
  return c;
}

}  // namespace

DataTopology::DataTopology(TopologyInputs inputs) : in_(std::move(inputs)) {
  const auto& shape = in_.mesh_shape;
  if (shape.empty()) throw Error(Errc::topology_shape, "mesh_shape must have at least one dim");
  std::int64_t total = 1;
  for (std::int64_t d : shape) {
    if (d <= 0)
      throw Error(Errc::topology_shape,
                  "mesh_shape [" + join(shape) + "] has a non-positive dim " + std::to_string(d));
    if (__builtin_mul_overflow(total, d, &total) || total > (1 << 30)) {
      throw Error(Errc::topology_shape, "mesh_shape [" + join(shape) + "] holds too many ranks");
    }
  }
  if (in_.mesh_dim_names.size() != shape.size()) {
    throw Error(Errc::topology_names, "mesh_dim_names [" + join(in_.mesh_dim_names) + "] has " +
                                          std::to_string(in_.mesh_dim_names.size()) +
                                          " names for " + std::to_string(shape.size()) + " dims");
  }
  std::set<std::string> names(in_.mesh_dim_names.begin(), in_.mesh_dim_names.end());
  if (names.size() != shape.size()) {
    throw Error(Errc::topology_names,
                "mesh_dim_names [" + join(in_.mesh_dim_names) + "] repeat a name");
  }
  std::set<int> ranks(in_.rank_list.begin(), in_.rank_list.end());
  if (ranks.size() != in_.rank_list.size() || static_cast<std::int64_t>(ranks.size()) != total) {
    throw Error(Errc::topology_rank_list, "rank_list of " + std::to_string(in_.rank_list.size()) +
                                              " ranks (" + std::to_string(ranks.size()) +
                                              " distinct) does not exactly fill a mesh of " +
                                              std::to_string(total) + " ranks");
  }
  auto pos = std::find(in_.rank_list.begin(), in_.rank_list.end(), in_.global_rank);
  if (pos == in_.rank_list.end()) {
    throw Error(Errc::topology_global_rank,
                "global_rank " + std::to_string(in_.global_rank) + " is not in rank_list");
  }
  if (in_.dp_dim_names) {
    dp_names_ = *in_.dp_dim_names;
    std::set<std::string> unique(dp_names_.begin(), dp_names_.end());
    if (unique.size() != dp_names_.size()) {
      throw Error(Errc::topology_dp_names, "dp_dim_names [" + join(dp_names_) + "] repeat a name");
    }
  } else {
    for (const std::string& n : in_.mesh_dim_names) {
      if (n == "dp_replicate" || n == "dp_shard" || n == "dp") dp_names_.push_back(n);
    }
  }
  for (const std::string& n : dp_names_) {
    auto it = std::find(in_.mesh_dim_names.begin(), in_.mesh_dim_names.end(), n);
    if (it == in_.mesh_dim_names.end()) {
      throw Error(Errc::topology_dp_names, "dp_dim_names entry '" + n + "' is not a mesh dim of [" +
                                               join(in_.mesh_dim_names) + "]");
    }
    dp_axes_.push_back(static_cast<std::size_t>(it - in_.mesh_dim_names.begin()));
    dp_size_ *= shape[dp_axes_.back()];
  }
  coordinate_ = unflatten(pos - in_.rank_list.begin(), shape);
  data_rank_ = dp_index(coordinate_);
  constructors_.assign(static_cast<std::size_t>(dp_size_), -1);
  groups_.assign(static_cast<std::size_t>(dp_size_), {});
  for (std::int64_t i = 0; i < total; ++i) {
    auto c = unflatten(i, shape);
    std::int64_t d = dp_index(c);
    int rank = in_.rank_list[static_cast<std::size_t>(i)];
    groups_[static_cast<std::size_t>(d)].push_back(rank);
    bool others_zero = true;
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (std::find(dp_axes_.begin(), dp_axes_.end(), k) == dp_axes_.end() && c[k] != 0)
        others_zero = false;
    }
    if (others_zero) constructors_[static_cast<std::size_t>(d)] = rank;
  }
  fingerprint_ = sha256_hex(canonical_text());
}

std::int64_t DataTopology::dp_index(const std::vector<std::int64_t>& coordinate) const {
  std::int64_t d = 0;
  for (std::size_t axis : dp_axes_) d = d * in_.mesh_shape[axis] + coordinate[axis];
  return d;
}

// Each name as <bytes>:<name>, as ModelBatchLayout's canonical text writes them: a name
// may hold ',' or '\n', and joined bare ("a,b" + "c" and "a" + "b,c") two meshes shared
// one text and one fingerprint.
std::string DataTopology::canonical_text() const {
  auto names = [](const std::vector<std::string>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ",";
      out += std::to_string(v[i].size()) + ":" + v[i];
    }
    return out;
  };
  return "hpref-topology-v2\nshape=" + join(in_.mesh_shape) +
         "\nnames=" + names(in_.mesh_dim_names) + "\nranks=" + join(in_.rank_list) +
         "\ndp=" + names(dp_names_) + "\n";
}

}  // namespace hpref
