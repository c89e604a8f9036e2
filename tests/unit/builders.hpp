// Builders shared by unit tests: hand-made HPB1 frames (SPEC 2.1) and meshes (SPEC 3.1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/topology.hpp"

namespace hpref::test {

// x as 8 big-endian bytes (the HPB1 header's sizes).
inline std::vector<std::uint8_t> be64(std::uint64_t x) {
  std::vector<std::uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(x >> (8 * (7 - i)));
  return out;
}

// An HPB1 frame: magic, metadata size, binary size, the pickled metadata, the binary region.
inline std::vector<std::uint8_t> hpb1_frame(std::string_view meta, std::string_view binary) {
  std::vector<std::uint8_t> out = {'H', 'P', 'B', '1'};
  for (auto b : be64(meta.size())) out.push_back(b);
  for (auto b : be64(binary.size())) out.push_back(b);
  out.insert(out.end(), meta.begin(), meta.end());
  out.insert(out.end(), binary.begin(), binary.end());
  return out;
}

// A mesh seen from `rank` whose rank_list is 0..N-1 in row-major order.
inline TopologyInputs mesh_of(std::vector<std::int64_t> shape, std::vector<std::string> names,
                              int rank, std::optional<std::vector<std::string>> dp = std::nullopt) {
  TopologyInputs in;
  in.mesh_shape = std::move(shape);
  in.mesh_dim_names = std::move(names);
  std::int64_t total = 1;
  for (auto d : in.mesh_shape) total *= d;
  for (int r = 0; r < total; ++r) in.rank_list.push_back(r);
  in.global_rank = rank;
  in.dp_dim_names = std::move(dp);
  return in;
}

}  // namespace hpref::test
