// SPEC 3.2: the group plan, checks in order, creations identical on every rank.
#include "hpref/group_plan.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <ostream>
#include <set>
#include <string_view>

#include "hpref/communicator.hpp"
#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"

namespace hpref {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The device types torch.device accepts: the union of torch 1.13's and 2.x's lists, and
// npu, which torch_npu registers. The original parses its devices with torch.device, so a
// string is refused here only where torch.device refuses it (group_device stands for that
// RuntimeError); which accelerator a type is matters only for cpu, cuda and npu.
constexpr std::array<std::string_view, 22> kDeviceTypes = {
    "cpu", "cuda", "ipu",  "xpu",  "mkldnn",        "opengl", "opencl", "ideep",
    "hip", "ve",   "fpga", "maia", "ort",           "xla",    "lazy",   "vulkan",
    "mps", "meta", "hpu",  "mtia", "privateuseone", "npu"};

bool ascii_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool ascii_digit(unsigned char c) { return c >= '0' && c <= '9'; }

// The type of a device string ("cuda:1" -> "cuda", "cpu:0" -> "cpu"); absent stays absent.
// torch.device's grammar: a type of letters and '_', then optionally ':' and an index of
// digits without a leading zero that std::stoi reads (at most INT32_MAX).
std::optional<std::string> device_type(const std::optional<std::string>& device, const char* what) {
  if (!device) return std::nullopt;
  const std::string& d = *device;
  auto refuse = [&](const std::string& why) {
    throw Error(Errc::group_device, std::string(what) + " '" + d + "' is not a device: " + why);
  };
  auto colon = d.find(':');
  std::string type = d.substr(0, colon);
  bool grammar = !type.empty() && std::all_of(type.begin(), type.end(), [](unsigned char c) {
    return ascii_alpha(c) || c == '_';
  });
  if (grammar && colon != std::string::npos) {
    std::string index = d.substr(colon + 1);
    grammar = !index.empty() && std::all_of(index.begin(), index.end(), ascii_digit) &&
              (index == "0" || index[0] != '0');
    if (grammar && (index.size() > 10 || std::stoll(index) > INT32_MAX))
      refuse("its index " + index + " is beyond int32");
  }
  if (!grammar) refuse("torch.device reads type[:index] (letters and '_', then digits)");
  if (std::find(kDeviceTypes.begin(), kDeviceTypes.end(), type) == kDeviceTypes.end()) {
    std::string known;
    for (std::string_view t : kDeviceTypes) known += (known.empty() ? "" : ", ") + std::string(t);
    refuse("the type '" + type + "' is none of torch's (" + known + ")");
  }
  return type;
}

// SPEC 3.2 step 5: (effective payload backend, reuses control group).
std::pair<std::optional<std::string>, bool> resolve_payload(
    const GroupPlanInputs& in, std::size_t data_plane_size,
    const std::optional<std::string>& device) {
  if (!in.enable_payload_exchange || data_plane_size == 1) return {std::nullopt, false};
  std::string backend = in.payload_backend             ? *in.payload_backend
                        : (device && *device != "cpu") ? in.world_backend
                                                       : in.cpu_backend;
  std::string norm = lower(backend);
  const char* expected = accelerator_device_type(backend);
  bool accelerator = expected != nullptr;
  if (accelerator && (!device || *device == "cpu")) {
    throw Error(Errc::group_payload_device,
                "payload backend '" + backend +
                    "' needs a rank-local accelerator communication_device, got " +
                    (device ? "'" + *device + "'" : std::string("none")));
  }
  if (expected && device && *device != expected) {
    throw Error(Errc::group_payload_device, "payload backend '" + backend + "' needs a " +
                                                expected + " communication_device, got " + *device);
  }
  if (!accelerator && device && *device != "cpu") {
    throw Error(
        Errc::group_payload_device,
        "payload backend '" + backend + "' cannot exchange tensors on a " + *device + " device");
  }
  bool reuse = norm == lower(in.cpu_backend) && (!device || *device == "cpu");
  return {backend, reuse};
}

}  // namespace

std::string_view group_role_name(GroupRole role) noexcept {
  switch (role) {
    case GroupRole::control:
      return "control";
    case GroupRole::payload:
      return "payload";
    case GroupRole::model_parallel_host:
      return "model_parallel_host";
    case GroupRole::model_parallel_tensor:
      return "model_parallel_tensor";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, GroupRole role) { return os << group_role_name(role); }

GroupPlan plan_groups(const GroupPlanInputs& in) {
  if (in.topology == nullptr) throw Error(Errc::internal, "plan_groups needs a topology");
  const DataTopology& topo = *in.topology;
  GroupPlan plan;
  // 1. data-plane ranks and the planner
  std::set<int> plane(in.reader_ranks.begin(), in.reader_ranks.end());
  plane.insert(topo.constructor_ranks().begin(), topo.constructor_ranks().end());
  plan.data_plane_ranks.assign(plane.begin(), plane.end());
  plan.planner_rank = in.planner_rank;
  if (!plane.count(in.planner_rank)) {
    throw Error(Errc::group_planner, "planner_rank " + std::to_string(in.planner_rank) +
                                         " must belong to the data-plane ranks " +
                                         rank_list_text(plan.data_plane_ranks));
  }
  // 2. not distributed
  if (!in.distributed) {
    if (topo.rank_list().size() != 1) {
      throw Error(Errc::group_not_distributed, "a mesh of " +
                                                   std::to_string(topo.rank_list().size()) +
                                                   " ranks needs an initialized distributed world");
    }
    return plan;
  }
  plan.distributed = true;
  // 3. the mesh holds exactly the world, and this rank is the topology's
  std::set<int> mesh(topo.rank_list().begin(), topo.rank_list().end());
  bool exact = static_cast<int>(mesh.size()) == in.world_size && !mesh.empty() &&
               *mesh.begin() == 0 && *mesh.rbegin() == in.world_size - 1;
  if (!exact) {
    throw Error(Errc::group_mesh_world, "the mesh ranks " + rank_list_text(topo.rank_list()) +
                                            " must be exactly the world ranks 0.." +
                                            std::to_string(in.world_size - 1) +
                                            " so every rank creates groups in the same order");
  }
  if (topo.global_rank() != in.rank) {
    throw Error(Errc::group_rank, "topology global_rank " + std::to_string(topo.global_rank()) +
                                      " does not match this rank " + std::to_string(in.rank));
  }
  // 4. backend names
  std::string cpu = lower(in.cpu_backend);
  if (in.cpu_backend.empty() || (cpu != "gloo" && cpu != "hccl" && cpu != "sim" && cpu != "mpi")) {
    throw Error(Errc::group_cpu_backend,
                "cpu_backend '" + in.cpu_backend + "' must be one of gloo, hccl, sim, mpi");
  }
  if (in.payload_backend && in.payload_backend->empty()) {
    throw Error(Errc::group_payload_backend, "payload_backend must be a non-empty name or none");
  }
  // 5. payload backend
  auto comm = device_type(in.communication_device, "communication_device");
  auto [payload, reuse] = resolve_payload(in, plan.data_plane_ranks.size(), comm);
  auto model = device_type(in.model_device, "model_device");
  // 6. creations, the same on every rank
  bool member = plane.count(in.rank) > 0;
  if (plan.data_plane_ranks.size() > 1) {
    plan.creations.push_back({GroupRole::control, plan.data_plane_ranks, in.cpu_backend});
    if (member) plan.control = plan.creations.size() - 1;
    if (in.enable_payload_exchange) {
      plan.payload_backend = payload;
      plan.payload_reuses_control = reuse;
      if (reuse) {
        plan.payload = plan.control;
      } else {
        plan.creations.push_back({GroupRole::payload, plan.data_plane_ranks, *payload});
        if (member) plan.payload = plan.creations.size() - 1;
      }
    }
  }
  std::optional<std::string> tensor;
  if (comm && *comm != "cpu") {
    std::string candidate = in.payload_backend ? *in.payload_backend : in.world_backend;
    if (is_accelerator_backend_name(candidate)) tensor = candidate;
  }
  if (model == std::optional<std::string>("cuda")) tensor = "nccl";
  if (model == std::optional<std::string>("npu")) tensor = "hccl";
  plan.tensor_backend = tensor;
  for (const auto& group : topo.model_parallel_rank_groups()) {
    if (group.size() == 1) continue;
    std::vector<int> sorted = group;
    std::sort(sorted.begin(), sorted.end());
    bool in_group = std::find(group.begin(), group.end(), in.rank) != group.end();
    plan.creations.push_back({GroupRole::model_parallel_host, sorted, in.cpu_backend});
    if (in_group) plan.model_parallel = plan.creations.size() - 1;
    if (tensor) {
      plan.creations.push_back({GroupRole::model_parallel_tensor, sorted, *tensor});
      if (in_group) plan.model_parallel_tensor = plan.creations.size() - 1;
    }
  }
  return plan;
}

}  // namespace hpref
