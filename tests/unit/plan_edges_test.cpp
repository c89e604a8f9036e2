// SPEC 3.1, 3.2, 6.1-6.3, 7: the edges of the topology, the group plan (and its execution
// by create_data_groups), the model batch layout and the routes that the main suites of
// plan_test.cpp and routes_test.cpp leave out: every check's exact kind and message, the
// group indices a rank keeps, and the all-ranks route planners against the one-rank ones.
// Expected routes were checked against the original (shared/original,
// seed_sequence_dispatch.py); expected plans against the original's create_data_groups
// (seed_transport.py).
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "builders.hpp"
#include "hpref/data_groups.hpp"
#include "hpref/group_plan.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/routes.hpp"
#include "hpref/sha256.hpp"
#include "hpref/topology.hpp"
#include "test_util.hpp"

using namespace hpref;

namespace {

using Ranks = std::vector<int>;
using V = std::vector<std::int64_t>;
using I = std::vector<Interval>;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TopologyInputs edge_mesh(std::vector<std::int64_t> shape, std::vector<std::string> names, int rank,
                         std::optional<std::vector<std::string>> dp = std::nullopt) {
  return hpref::test::mesh_of(std::move(shape), std::move(names), rank, std::move(dp));
}

// dp=2 x cp=4 seen from `rank`, readers {0, 1}, gloo control, world backend nccl.
GroupPlanInputs edge_inputs(const DataTopology& t, int rank) {
  GroupPlanInputs in;
  in.topology = &t;
  in.reader_ranks = {0, 1};
  in.planner_rank = 0;
  in.cpu_backend = "gloo";
  in.world_size = static_cast<int>(t.rank_list().size());
  in.rank = rank;
  in.world_backend = "nccl";
  return in;
}

std::string route_problem_text(const Route& r, std::int64_t self = -1) { return r.problem(self); }

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_edges_topology)

// SPEC 3.1 asks for positive dims; the mesh is also capped at 2^30 ranks (ours) so the
// rank product never overflows: 2^30 passes the shape check, 2^31 and an int64 overflow
// do not.
BOOST_AUTO_TEST_CASE(mesh_size_cap_and_overflow) {
  TopologyInputs at_cap;
  at_cap.mesh_shape = {std::int64_t{1} << 30};
  at_cap.mesh_dim_names = {"dp"};
  at_cap.rank_list = {0};
  HPREF_CHECK_ERROR(
      DataTopology(at_cap), Errc::topology_rank_list,
      "rank_list of 1 ranks (1 distinct) does not exactly fill a mesh of 1073741824 ranks");
  TopologyInputs over = at_cap;
  over.mesh_shape = {std::int64_t{1} << 30, 2};
  over.mesh_dim_names = {"dp", "cp"};
  HPREF_CHECK_ERROR(DataTopology(over), Errc::topology_shape,
                    "mesh_shape [1073741824,2] holds too many ranks");
  over.mesh_shape = {std::int64_t{1} << 30, std::int64_t{1} << 40};  // 2^70: beyond int64
  HPREF_CHECK_ERROR(DataTopology(over), Errc::topology_shape,
                    "mesh_shape [1073741824,1099511627776] holds too many ranks");
  // The dims are checked in order: the cap on the first dim before the second's sign.
  over.mesh_shape = {std::int64_t{1} << 31, 0};
  HPREF_CHECK_ERROR(DataTopology(over), Errc::topology_shape, "holds too many ranks");
  over.mesh_shape = {-3, std::int64_t{1} << 31};
  HPREF_CHECK_ERROR(DataTopology(over), Errc::topology_shape,
                    "mesh_shape [-3,2147483648] has a non-positive dim -3");
}

// SPEC 3.1: the DP coordinate is row-major in dp_dim_names order, not in mesh order.
BOOST_AUTO_TEST_CASE(explicit_dp_names_in_another_order) {
  // mesh (dp=2, cp=3), DP dims (cp, dp): d = cp * 2 + dp; rank 4 = (dp 1, cp 1) -> d = 3.
  DataTopology t(edge_mesh({2, 3}, {"dp", "cp"}, 4, std::vector<std::string>{"cp", "dp"}));
  BOOST_TEST(t.data_parallel_size() == 6);
  BOOST_TEST(t.data_rank() == 3);
  // Every rank is its own DP coordinate: constructor_ranks[d] = rank (dp = d % 2, cp = d / 2).
  BOOST_TEST(t.constructor_ranks() == Ranks({0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
  BOOST_TEST(t.model_parallel_ranks() == Ranks({4}), boost::test_tools::per_element());
  BOOST_TEST(t.canonical_text() ==
             "hpref-topology-v2\nshape=2,3\nnames=2:dp,2:cp\nranks=0,1,2,3,4,5\ndp=2:cp,2:dp\n");
  // An explicitly empty DP list differs from the default (which would pick "dp").
  DataTopology none(edge_mesh({2, 3}, {"dp", "cp"}, 4, std::vector<std::string>{}));
  BOOST_TEST(none.dp_dim_names().empty());
  BOOST_TEST(none.data_parallel_size() == 1);
  BOOST_TEST(none.data_rank() == 0);
  BOOST_TEST(none.constructor_ranks() == Ranks({0}), boost::test_tools::per_element());
  BOOST_TEST(none.model_parallel_ranks() == Ranks({0, 1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
  BOOST_TEST(none.canonical_text() ==
             "hpref-topology-v2\nshape=2,3\nnames=2:dp,2:cp\nranks=0,1,2,3,4,5\ndp=\n");
  BOOST_TEST(none.fingerprint() != t.fingerprint());
  BOOST_TEST(none.fingerprint() == sha256_hex(none.canonical_text()));
}

// SPEC 3.1: the default DP names keep the mesh order (dp_shard before dp_replicate here).
BOOST_AUTO_TEST_CASE(default_dp_names_in_mesh_order) {
  DataTopology t(edge_mesh({2, 1, 2}, {"dp_shard", "tp", "dp_replicate"}, 3));
  BOOST_TEST(t.dp_dim_names() == std::vector<std::string>({"dp_shard", "dp_replicate"}),
             boost::test_tools::per_element());
  BOOST_TEST(t.coordinate() == V({1, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(t.data_rank() == 3);  // (shard 1, replicate 1) row-major over (2, 2)
  BOOST_TEST(t.constructor_rank() == 3);
}

BOOST_AUTO_TEST_CASE(check_messages_name_the_values) {
  HPREF_CHECK_ERROR(DataTopology(edge_mesh({2, 2}, {"dp", "cp", "tp"}, 0)), Errc::topology_names,
                    "mesh_dim_names [dp,cp,tp] has 3 names for 2 dims");
  HPREF_CHECK_ERROR(DataTopology(edge_mesh({2, 2}, {"cp", "cp"}, 0)), Errc::topology_names,
                    "mesh_dim_names [cp,cp] repeat a name");
  HPREF_CHECK_ERROR(DataTopology(edge_mesh({2, 2}, {"dp", "cp"}, -1)), Errc::topology_global_rank,
                    "global_rank -1 is not in rank_list");
  HPREF_CHECK_ERROR(
      DataTopology(edge_mesh({2, 2}, {"dp", "cp"}, 0, std::vector<std::string>{"dp", "dp"})),
      Errc::topology_dp_names, "dp_dim_names [dp,dp] repeat a name");
  HPREF_CHECK_ERROR(
      DataTopology(edge_mesh({2, 2}, {"dp", "cp"}, 0, std::vector<std::string>{"cp", "tp"})),
      Errc::topology_dp_names, "dp_dim_names entry 'tp' is not a mesh dim of [dp,cp]");
  TopologyInputs extra = edge_mesh({2}, {"dp"}, 0);
  extra.rank_list.push_back(2);
  HPREF_CHECK_ERROR(DataTopology(extra), Errc::topology_rank_list,
                    "rank_list of 3 ranks (3 distinct) does not exactly fill a mesh of 2 ranks");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_edges_group_plan)

BOOST_AUTO_TEST_CASE(role_names) {
  BOOST_TEST(group_role_name(GroupRole::control) == "control");
  BOOST_TEST(group_role_name(GroupRole::payload) == "payload");
  BOOST_TEST(group_role_name(GroupRole::model_parallel_host) == "model_parallel_host");
  BOOST_TEST(group_role_name(GroupRole::model_parallel_tensor) == "model_parallel_tensor");
  BOOST_TEST(group_role_name(static_cast<GroupRole>(42)) == "?");  // not a role
  std::ostringstream os;
  os << GroupRole::payload << "," << GroupRole::model_parallel_tensor;
  BOOST_TEST(os.str() == "payload,model_parallel_tensor");
}

BOOST_AUTO_TEST_CASE(a_plan_needs_a_topology) {
  GroupPlanInputs in;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::internal, "plan_groups needs a topology");
}

// SPEC 3.2 step 6: the control group is the first creation on every rank; a data-plane
// member keeps index 0, a non-member keeps none, and every rank plans the same creations.
BOOST_AUTO_TEST_CASE(every_rank_plans_the_same_creations_and_keeps_its_own) {
  std::vector<GroupPlan> plans;
  for (int r = 0; r < 8; ++r) {
    DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, r));
    GroupPlanInputs in = edge_inputs(t, r);
    in.communication_device = "cuda:1";
    plans.push_back(plan_groups(in));
  }
  const std::vector<GroupCreation> expected = {
      {GroupRole::control, {0, 1, 4}, "gloo"},
      {GroupRole::payload, {0, 1, 4}, "nccl"},
      {GroupRole::model_parallel_host, {0, 1, 2, 3}, "gloo"},
      {GroupRole::model_parallel_tensor, {0, 1, 2, 3}, "nccl"},
      {GroupRole::model_parallel_host, {4, 5, 6, 7}, "gloo"},
      {GroupRole::model_parallel_tensor, {4, 5, 6, 7}, "nccl"},
  };
  for (int r = 0; r < 8; ++r) {
    BOOST_TEST_CONTEXT("rank " << r) {
      const GroupPlan& p = plans[static_cast<std::size_t>(r)];
      BOOST_TEST((p.creations == expected));
      BOOST_TEST(p.distributed);
      BOOST_TEST(p.planner_rank == 0);
      BOOST_TEST(p.data_plane_ranks == Ranks({0, 1, 4}), boost::test_tools::per_element());
      BOOST_TEST((p.payload_backend == std::optional<std::string>("nccl")));
      BOOST_TEST(!p.payload_reuses_control);
      BOOST_TEST((p.tensor_backend == std::optional<std::string>("nccl")));
      bool member = r == 0 || r == 1 || r == 4;
      BOOST_TEST((p.control == (member ? std::optional<std::size_t>(0) : std::nullopt)));
      BOOST_TEST((p.payload == (member ? std::optional<std::size_t>(1) : std::nullopt)));
      BOOST_TEST((p.model_parallel == std::optional<std::size_t>(r < 4 ? 2 : 4)));
      BOOST_TEST((p.model_parallel_tensor == std::optional<std::size_t>(r < 4 ? 3 : 5)));
    }
  }
}

// SPEC 3.2 step 5: a reused payload group is the control group itself (the same index),
// whether the device is absent or cpu, and the names match case-insensitively.
BOOST_AUTO_TEST_CASE(payload_reuses_the_control_group) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 4));
  GroupPlanInputs in = edge_inputs(t, 4);
  in.cpu_backend = "GLOO";
  in.payload_backend = "gloo";
  in.communication_device = "cpu";
  GroupPlan p = plan_groups(in);
  BOOST_TEST(p.payload_reuses_control);
  BOOST_TEST((p.payload_backend == std::optional<std::string>("gloo")));  // as given
  BOOST_TEST((p.control == std::optional<std::size_t>(0)));
  BOOST_TEST((p.payload == std::optional<std::size_t>(0)));
  BOOST_REQUIRE_EQUAL(p.creations.size(), 3u);  // control and two host groups, no payload group
  BOOST_TEST((p.creations[0] == GroupCreation{GroupRole::control, {0, 1, 4}, "GLOO"}));
  BOOST_TEST(
      (p.creations[2] == GroupCreation{GroupRole::model_parallel_host, {4, 5, 6, 7}, "GLOO"}));
  BOOST_TEST((p.model_parallel == std::optional<std::size_t>(2)));
  BOOST_TEST(!p.tensor_backend.has_value());  // cpu device: no tensor groups
  // A cpu device and no payload_backend: the default is cpu_backend, reused.
  in.payload_backend = std::nullopt;
  p = plan_groups(in);
  BOOST_TEST((p.payload_backend == std::optional<std::string>("GLOO")));
  BOOST_TEST(p.payload_reuses_control);
}

// SPEC 3.2 step 5: another host backend gets its own payload group.
BOOST_AUTO_TEST_CASE(host_payload_backend_of_its_own) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 1));
  GroupPlanInputs in = edge_inputs(t, 1);
  in.payload_backend = "mpi";
  GroupPlan p = plan_groups(in);
  BOOST_TEST(!p.payload_reuses_control);
  BOOST_REQUIRE_EQUAL(p.creations.size(), 4u);
  BOOST_TEST((p.creations[1] == GroupCreation{GroupRole::payload, {0, 1, 4}, "mpi"}));
  BOOST_TEST((p.control == std::optional<std::size_t>(0)));
  BOOST_TEST((p.payload == std::optional<std::size_t>(1)));
  BOOST_TEST((p.model_parallel == std::optional<std::size_t>(2)));
}

// SPEC 3.2 step 6, tensor backend: payload_backend (as given, any case) when it is an
// accelerator one; an npu model_device forces hccl; without payload exchange the world
// backend still decides, and a host world backend gives none.
BOOST_AUTO_TEST_CASE(tensor_backend_choices) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 0));
  GroupPlanInputs in = edge_inputs(t, 0);
  in.payload_backend = "NCCL";
  in.communication_device = "cuda";
  GroupPlan p = plan_groups(in);
  BOOST_TEST((p.tensor_backend == std::optional<std::string>("NCCL")));
  BOOST_TEST((p.payload_backend == std::optional<std::string>("NCCL")));
  BOOST_TEST(p.creations[3].backend == "NCCL");

  in = edge_inputs(t, 0);
  in.model_device = "npu:3";
  p = plan_groups(in);
  BOOST_TEST((p.tensor_backend == std::optional<std::string>("hccl")));
  BOOST_REQUIRE_EQUAL(p.creations.size(), 5u);  // control, host+tensor per model-parallel group
  BOOST_TEST(
      (p.creations[2] == GroupCreation{GroupRole::model_parallel_tensor, {0, 1, 2, 3}, "hccl"}));
  BOOST_TEST((p.model_parallel_tensor == std::optional<std::size_t>(2)));
  // A cpu model_device forces nothing.
  in.model_device = "cpu";
  BOOST_TEST(!plan_groups(in).tensor_backend.has_value());

  in = edge_inputs(t, 0);
  in.enable_payload_exchange = false;
  in.communication_device = "cuda:0";
  in.world_backend = "sim";  // a host backend on a cuda device: no payload group to refuse it
  p = plan_groups(in);
  BOOST_TEST(!p.tensor_backend.has_value());
  BOOST_TEST(!p.payload_backend.has_value());
  BOOST_TEST(p.creations.size() == 3u);
  in.world_backend = "nccl";
  BOOST_TEST((plan_groups(in).tensor_backend == std::optional<std::string>("nccl")));

  // An hccl payload on an npu device.
  in = edge_inputs(t, 0);
  in.payload_backend = "hccl";
  in.communication_device = "npu:12";
  p = plan_groups(in);
  BOOST_TEST((p.creations[1] == GroupCreation{GroupRole::payload, {0, 1, 4}, "hccl"}));
  BOOST_TEST((p.tensor_backend == std::optional<std::string>("hccl")));
}

// SPEC 3.2 step 4: the host backends gloo, hccl, sim, mpi in any case; others refused.
BOOST_AUTO_TEST_CASE(cpu_backend_names) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 0));
  for (const char* name : {"gloo", "HCCL", "Sim", "mpi"}) {
    GroupPlanInputs in = edge_inputs(t, 0);
    in.cpu_backend = name;
    in.enable_payload_exchange = false;
    BOOST_TEST(plan_groups(in).creations[0].backend == name);
  }
  GroupPlanInputs in = edge_inputs(t, 0);
  in.cpu_backend = "glooo";
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_cpu_backend,
                    "cpu_backend 'glooo' must be one of gloo, hccl, sim, mpi");
}

// SPEC 3.2 step 3: the mesh must be exactly the world ranks 0..W-1.
BOOST_AUTO_TEST_CASE(mesh_must_be_the_world) {
  TopologyInputs shifted = edge_mesh({2}, {"dp"}, 1);
  shifted.rank_list = {1, 2};  // two ranks, world of two, but not 0..1
  DataTopology a(shifted);
  GroupPlanInputs in = edge_inputs(a, 1);
  in.reader_ranks = {1};
  in.planner_rank = 1;
  in.world_size = 2;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_mesh_world,
                    "the mesh ranks [1, 2] must be exactly the world ranks 0..1 so every rank "
                    "creates groups in the same order");
  TopologyInputs gap = edge_mesh({3}, {"dp"}, 0);
  gap.rank_list = {0, 1, 3};  // starts at 0, three ranks, but a hole
  DataTopology b(gap);
  in = edge_inputs(b, 0);
  in.world_size = 3;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_mesh_world,
                    "the mesh ranks [0, 1, 3] must be exactly the world ranks 0..2");
  // A smaller world than the mesh.
  DataTopology c(edge_mesh({2, 2}, {"dp", "cp"}, 0));
  in = edge_inputs(c, 0);
  in.world_size = 3;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_mesh_world,
                    "the mesh ranks [0, 1, 2, 3] must be exactly the world ranks 0..2");
  in.world_size = 4;
  in.rank = 3;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_rank,
                    "topology global_rank 0 does not match this rank 3");
}

// The device strings of GroupPlanInputs are torch.device's (the original parses them with
// it): type[:index] with a type torch knows (or npu, torch_npu's); everything else refused,
// naming which option and the string. cpu:0, xpu, meta were refused before, as torch does not.
BOOST_AUTO_TEST_CASE(device_strings) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 0));
  auto plan_with = [&](std::optional<std::string> comm, std::optional<std::string> model) {
    GroupPlanInputs in = edge_inputs(t, 0);
    in.enable_payload_exchange = false;  // only the device parsing decides
    in.communication_device = std::move(comm);
    in.model_device = std::move(model);
    return plan_groups(in);
  };
  // Each refused by torch.device (1.13 and 2.13 alike): grammar, index, type.
  for (const char* bad :
       {"cuda:", "cuda:x", "cuda:1a", "cuda:01", "cuda:00", "cuda:-1", "cuda1", " cuda", "cuda ",
        "cuda:0:1", "CUDA", "gpu", "tpu", "cu_da", "", "cuda:2147483648", "cuda:99999999999"}) {
    BOOST_TEST_CONTEXT("device '" << bad << "'") {
      HPREF_CHECK_ERROR(plan_with(std::string(bad), std::nullopt), Errc::group_device,
                        "communication_device '" + std::string(bad) + "' is not a device");
      HPREF_CHECK_ERROR(plan_with(std::nullopt, std::string(bad)), Errc::group_device,
                        "model_device '" + std::string(bad) + "' is not a device");
    }
  }
  HPREF_CHECK_ERROR(plan_with(std::string("tpu:0"), std::nullopt), Errc::group_device,
                    "the type 'tpu' is none of torch's (cpu, cuda,");
  HPREF_CHECK_ERROR(plan_with(std::string("cuda:2147483648"), std::nullopt), Errc::group_device,
                    "index 2147483648 is beyond int32");
  // Each accepted by torch.device; only cpu (any index) is a host device.
  for (const char* good : {"cpu:0", "cpu:1", "xpu", "xpu:0", "meta", "meta:0", "mps", "hip:3",
                           "privateuseone", "npu:7", "cuda:2147483647"}) {
    BOOST_TEST_CONTEXT("device '" << good << "'") {
      BOOST_CHECK_NO_THROW(plan_with(std::string(good), std::nullopt));
      BOOST_CHECK_NO_THROW(plan_with(std::nullopt, std::string(good)));
    }
  }
  BOOST_TEST((plan_with(std::string("cuda:15"), std::nullopt).tensor_backend ==
              std::optional<std::string>("nccl")));
  BOOST_TEST((plan_with(std::nullopt, std::string("cuda:0")).tensor_backend ==
              std::optional<std::string>("nccl")));
  BOOST_TEST(!plan_with(std::string("cpu"), std::string("cpu")).tensor_backend.has_value());
  BOOST_TEST(!plan_with(std::string("cpu:0"), std::string("meta")).tensor_backend.has_value());
  // A cpu:0 communication device is a cpu one: the host payload reuses the control group.
  GroupPlanInputs in = edge_inputs(t, 0);
  in.communication_device = "cpu:0";
  GroupPlan p = plan_groups(in);
  BOOST_TEST(p.payload_reuses_control);
  // Another accelerator type than cuda/npu: a host payload cannot use it (SPEC 3.2 step 5).
  in.communication_device = "xpu:0";
  in.payload_backend = "gloo";
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_payload_device,
                    "cannot exchange tensors on a xpu device");
}

// SPEC 3.2 step 5: the payload device checks, with the device named as given or "none".
BOOST_AUTO_TEST_CASE(payload_device_messages) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 0));
  auto plan_with = [&](std::optional<std::string> payload, std::optional<std::string> comm) {
    GroupPlanInputs in = edge_inputs(t, 0);
    in.payload_backend = std::move(payload);
    in.communication_device = std::move(comm);
    return plan_groups(in);
  };
  HPREF_CHECK_ERROR(
      plan_with(std::string("nccl"), std::string("cpu")), Errc::group_payload_device,
      "payload backend 'nccl' needs a rank-local accelerator communication_device, got 'cpu'");
  HPREF_CHECK_ERROR(
      plan_with(std::string("nccl"), std::nullopt), Errc::group_payload_device,
      "payload backend 'nccl' needs a rank-local accelerator communication_device, got none");
  HPREF_CHECK_ERROR(plan_with(std::string("my_nccl"), std::string("npu:0")),
                    Errc::group_payload_device,
                    "payload backend 'my_nccl' needs a cuda communication_device, got npu");
  HPREF_CHECK_ERROR(plan_with(std::string("sim"), std::string("npu")), Errc::group_payload_device,
                    "payload backend 'sim' cannot exchange tensors on a npu device");
  // The default on a non-cpu device is the world backend, refused when it is a host one.
  GroupPlanInputs in = edge_inputs(t, 0);
  in.world_backend = "mpi";
  in.communication_device = "cuda:0";
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_payload_device,
                    "payload backend 'mpi' cannot exchange tensors on a cuda device");
  // ...but with one data-plane rank there is no payload group, so nothing is refused.
  DataTopology one(edge_mesh({1, 4}, {"dp", "cp"}, 0));
  in = edge_inputs(one, 0);
  in.reader_ranks = {0};
  in.payload_backend = "nccl";
  GroupPlan p = plan_groups(in);
  BOOST_TEST(!p.payload_backend.has_value());
  BOOST_TEST(!p.control.has_value());
  BOOST_TEST(!p.payload.has_value());
  BOOST_TEST(p.data_plane_ranks == Ranks({0}), boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(p.creations.size(), 1u);
  BOOST_TEST(
      (p.creations[0] == GroupCreation{GroupRole::model_parallel_host, {0, 1, 2, 3}, "gloo"}));
}

// SPEC 3.2 step 6: model-parallel groups of one rank are not created; with every mesh
// dim data-parallel only the control group remains (the original skips them too).
BOOST_AUTO_TEST_CASE(one_rank_model_parallel_groups_are_skipped) {
  DataTopology t(edge_mesh({4}, {"dp"}, 2));
  GroupPlanInputs in = edge_inputs(t, 2);
  in.reader_ranks = {};
  in.planner_rank = 3;
  in.model_device = "cuda";  // a tensor backend, but no group to use it
  GroupPlan p = plan_groups(in);
  BOOST_TEST(p.data_plane_ranks == Ranks({0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(p.planner_rank == 3);
  BOOST_REQUIRE_EQUAL(p.creations.size(), 1u);
  BOOST_TEST((p.creations[0] == GroupCreation{GroupRole::control, {0, 1, 2, 3}, "gloo"}));
  BOOST_TEST((p.control == std::optional<std::size_t>(0)));
  BOOST_TEST((p.payload == std::optional<std::size_t>(0)));  // gloo reuses the control group
  BOOST_TEST((p.tensor_backend == std::optional<std::string>("nccl")));
  BOOST_TEST(!p.model_parallel.has_value());
  BOOST_TEST(!p.model_parallel_tensor.has_value());
}

BOOST_AUTO_TEST_CASE(planner_and_not_distributed_messages) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 0));
  GroupPlanInputs in = edge_inputs(t, 0);
  in.planner_rank = 7;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_planner,
                    "planner_rank 7 must belong to the data-plane ranks [0, 1, 4]");
  in = edge_inputs(t, 0);
  in.distributed = false;
  HPREF_CHECK_ERROR(plan_groups(in), Errc::group_not_distributed,
                    "a mesh of 8 ranks needs an initialized distributed world");
  // Not distributed, one rank: the data plane and planner are still reported, no groups.
  DataTopology one(edge_mesh({1}, {"dp"}, 0));
  in = edge_inputs(one, 0);
  in.reader_ranks = {0, 0};
  in.distributed = false;
  in.cpu_backend = "not checked";  // step 4 is not reached
  GroupPlan p = plan_groups(in);
  BOOST_TEST(p.data_plane_ranks == Ranks({0}), boost::test_tools::per_element());
  BOOST_TEST(!p.distributed);
  BOOST_TEST(p.creations.empty());
  BOOST_TEST(!p.control.has_value());
  BOOST_TEST(!p.payload_backend.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Records the new_group calls of create_data_groups and hands out groups numbered in
// creation order (1, 2, ...); no other operation may be called.
class RecordingComm final : public Communicator {
 public:
  RecordingComm(int rank, int size, std::string backend)
      : rank_(rank), size_(size), backend_(std::move(backend)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string world_backend() const override { return backend_; }
  Group world() const override { throw std::logic_error("world() not expected"); }
  Group new_group(std::span<const int> ranks, const std::string& backend) override {
    calls.push_back({GroupRole::control, {ranks.begin(), ranks.end()}, backend});
    return Group(static_cast<int>(calls.size()), {ranks.begin(), ranks.end()}, backend, rank_);
  }
  Work all_gather(const Group&, ConstBuffer, MutableBuffer) override {
    throw std::logic_error("unexpected");
  }
  Work broadcast(const Group&, MutableBuffer, int) override {
    throw std::logic_error("unexpected");
  }
  Work all_reduce(const Group&, MutableBuffer, DType, ReduceOp) override {
    throw std::logic_error("unexpected");
  }
  using Communicator::all_to_all_v;
  Work all_to_all_v(const Group&, ConstBuffer, std::span<const std::size_t>,
                    std::span<const std::size_t>, MutableBuffer,
                    std::span<const std::size_t>) override {
    throw std::logic_error("unexpected");
  }
  Work barrier(const Group&) override { throw std::logic_error("unexpected"); }

  std::vector<GroupCreation> calls;  // role unused (control)

 private:
  int rank_, size_;
  std::string backend_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_edges_data_groups)

// SPEC 3.2: create_data_groups performs the plan's creations in order on the
// communicator, taking rank, world size and world backend from it, and keeps the groups
// at the plan's indices.
BOOST_AUTO_TEST_CASE(executes_the_plan_in_order) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 4));
  GroupPlanInputs in = edge_inputs(t, 4);
  in.rank = 0;            // overridden by the communicator's
  in.world_size = 99;     // likewise
  in.world_backend = "";  // likewise: the communicator's nccl is the payload default
  in.communication_device = "cuda:0";
  RecordingComm comm(4, 8, "nccl");
  DataGroups g = create_data_groups(comm, in);
  BOOST_REQUIRE_EQUAL(comm.calls.size(), 6u);
  const std::vector<std::pair<Ranks, std::string>> expected = {
      {{0, 1, 4}, "gloo"},    {{0, 1, 4}, "nccl"},    {{0, 1, 2, 3}, "gloo"},
      {{0, 1, 2, 3}, "nccl"}, {{4, 5, 6, 7}, "gloo"}, {{4, 5, 6, 7}, "nccl"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    BOOST_TEST(comm.calls[i].ranks == expected[i].first, boost::test_tools::per_element());
    BOOST_TEST(comm.calls[i].backend == expected[i].second);
    BOOST_TEST(g.plan.creations[i].ranks == expected[i].first, boost::test_tools::per_element());
  }
  BOOST_TEST(g.distributed);
  BOOST_TEST(g.planner_rank == 0);
  BOOST_TEST(g.data_plane_ranks == Ranks({0, 1, 4}), boost::test_tools::per_element());
  BOOST_REQUIRE(g.control.has_value());
  BOOST_TEST(g.control->id() == 1);     // group ids are creation order + 1
  BOOST_TEST(g.control->index() == 2);  // rank 4 is the third of [0, 1, 4]
  BOOST_REQUIRE(g.payload.has_value());
  BOOST_TEST(g.payload->id() == 2);
  BOOST_TEST(g.payload->backend() == "nccl");
  BOOST_REQUIRE(g.model_parallel.has_value());
  BOOST_TEST(g.model_parallel->id() == 5);
  BOOST_TEST(g.model_parallel->ranks() == Ranks({4, 5, 6, 7}), boost::test_tools::per_element());
  BOOST_REQUIRE(g.model_parallel_tensor.has_value());
  BOOST_TEST(g.model_parallel_tensor->id() == 6);
  BOOST_TEST(g.model_parallel_tensor->index() == 0);
}

BOOST_AUTO_TEST_CASE(a_reused_payload_group_is_the_control_group_and_non_members_keep_none) {
  DataTopology t(edge_mesh({2, 4}, {"dp", "cp"}, 6));
  GroupPlanInputs in = edge_inputs(t, 6);
  RecordingComm comm(6, 8, "sim");
  DataGroups g = create_data_groups(comm, in);
  BOOST_TEST(comm.calls.size() == 3u);  // control, two host groups
  BOOST_TEST(!g.control.has_value());   // rank 6 is not in the data plane [0, 1, 4]
  BOOST_TEST(!g.payload.has_value());
  BOOST_TEST(g.plan.payload_reuses_control);
  BOOST_REQUIRE(g.model_parallel.has_value());
  BOOST_TEST(g.model_parallel->id() == 3);
  BOOST_TEST(!g.model_parallel_tensor.has_value());
  // Rank 1, a member: the payload group is the control group itself.
  DataTopology t1(edge_mesh({2, 4}, {"dp", "cp"}, 1));
  RecordingComm comm1(1, 8, "sim");
  DataGroups g1 = create_data_groups(comm1, edge_inputs(t1, 1));
  BOOST_REQUIRE(g1.control.has_value());
  BOOST_REQUIRE(g1.payload.has_value());
  BOOST_TEST(g1.payload->id() == g1.control->id());
  BOOST_TEST(g1.control->id() == 1);
}

// Not distributed: the given inputs are planned as they are (the communicator's rank and
// size are not consulted) and no group is created.
BOOST_AUTO_TEST_CASE(not_distributed_creates_nothing) {
  DataTopology t(edge_mesh({1}, {"dp"}, 0));
  GroupPlanInputs in = edge_inputs(t, 0);
  in.reader_ranks = {0};
  in.distributed = false;
  RecordingComm comm(3, 5, "sim");
  DataGroups g = create_data_groups(comm, in);
  BOOST_TEST(comm.calls.empty());
  BOOST_TEST(!g.distributed);
  BOOST_TEST(g.data_plane_ranks == Ranks({0}), boost::test_tools::per_element());
  BOOST_TEST(!g.control.has_value());
  BOOST_TEST(!g.payload.has_value());
  BOOST_TEST(!g.model_parallel.has_value());
  BOOST_TEST(!g.model_parallel_tensor.has_value());
  // Distributed, the communicator's rank decides: rank 3 of this one-rank mesh is refused.
  in.distributed = true;
  HPREF_CHECK_ERROR(create_data_groups(comm, in), Errc::group_mesh_world, "world ranks 0..4");
  BOOST_TEST(comm.calls.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_edges_model_batch)

Value edge_tensor(DType d, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return Value::tensor(
      Tensor::copy_of(d, std::move(shape),
                      std::vector<std::uint8_t>(static_cast<std::size_t>(n) * element_size(d))));
}

FieldSpec field(std::string name, DType d, Placement p, std::vector<Dim> dims) {
  return {std::move(name), d, p, std::move(dims)};
}

Dim sym(const char* s) { return Dim{std::string(s)}; }
Dim fixed(std::int64_t n) { return Dim{n}; }

BOOST_AUTO_TEST_CASE(canonical_text_and_fingerprint_spec_6_1) {
  ModelBatchLayout l({field("ids", DType::int64, Placement::accelerator, {sym("B"), fixed(7)}),
                      field("pixels", DType::uint8, Placement::cpu, {})});
  BOOST_TEST(l.canonical_text() ==
             "hpref-batch-spec-v1\n3:ids int64 accelerator $1:B 7\n6:pixels uint8 cpu\n");
  BOOST_TEST(l.fingerprint() == sha256_hex(l.canonical_text()));
  // The placement is part of the declaration.
  ModelBatchLayout cpu({field("ids", DType::int64, Placement::cpu, {sym("B"), fixed(7)}),
                        field("pixels", DType::uint8, Placement::cpu, {})});
  BOOST_TEST(cpu.fingerprint() != l.fingerprint());
  BOOST_TEST(l.symbols() == std::vector<std::string>({"B"}), boost::test_tools::per_element());
  BOOST_TEST(l.fields().size() == 2u);
  BOOST_TEST(l.fields()[1].name == "pixels");
}

BOOST_AUTO_TEST_CASE(field_names_must_be_utf8) {
  HPREF_CHECK_ERROR(ModelBatchLayout({field("a\xff", DType::int8, Placement::cpu, {})}),
                    Errc::batch_spec, "batch field name b'a\\xff' is not UTF-8");
  HPREF_CHECK_ERROR(
      ModelBatchLayout({field("x", DType::int8, Placement::cpu, {sym("B"), fixed(-2)})}),
      Errc::batch_spec, "batch field 'x' has a negative fixed dim -2");
}

// SPEC 6.2: one symbol used twice in one field takes one value.
BOOST_AUTO_TEST_CASE(a_symbol_twice_in_one_field) {
  ModelBatchLayout l({field("square", DType::float32, Placement::cpu, {sym("N"), sym("N")})});
  auto flat =
      l.flatten(Value::mapping({{Value::string("square"), edge_tensor(DType::float32, {3, 3})}}));
  BOOST_TEST(l.header(flat) == V({1, 3}), boost::test_tools::per_element());
  HPREF_CHECK_ERROR(
      l.flatten(Value::mapping({{Value::string("square"), edge_tensor(DType::float32, {2, 3})}})),
      Errc::batch_symbol, "symbol 'N' is 2 elsewhere but 3 in field 'square' dim 1");
  HPREF_CHECK_ERROR(
      l.flatten(Value::mapping({{Value::string("square"), edge_tensor(DType::float32, {6})}})),
      Errc::batch_rank, "batch field 'square' has 1 dims (6,), the spec declares 2");
}

// SPEC 6.2: keys are field names; a non-string key is never a field, so it is missing
// the field or an unknown name.
BOOST_AUTO_TEST_CASE(non_string_keys) {
  ModelBatchLayout l({field("x", DType::int32, Placement::cpu, {sym("B")})});
  HPREF_CHECK_ERROR(
      l.flatten(Value::mapping({{Value::integer(7), edge_tensor(DType::int32, {2})}})),
      Errc::batch_missing_field, "batch has no field 'x'");
  HPREF_CHECK_ERROR(
      l.flatten(Value::mapping({{Value::string("x"), edge_tensor(DType::int32, {2})},
                                {Value::integer(7), edge_tensor(DType::int32, {2})}})),
      Errc::batch_unknown_field, "batch field 7 is not in the spec");
  HPREF_CHECK_ERROR(
      l.flatten(Value::mapping({{Value::string("x"), edge_tensor(DType::int64, {2})}})),
      Errc::batch_dtype, "batch field 'x' must be a int32 tensor, got int64");
  HPREF_CHECK_ERROR(l.flatten(Value::mapping({{Value::string("x"), Value::string("t")}})),
                    Errc::batch_dtype, "batch field 'x' must be a int32 tensor, got str");
  HPREF_CHECK_ERROR(l.flatten(Value::integer(1)), Errc::batch_spec,
                    "a batch must be a mapping of field name to tensor, got int");
}

// SPEC 6.3: the size limit is inclusive, checked per field before allocation, and a
// byte count beyond int64 is over any limit.
BOOST_AUTO_TEST_CASE(size_limit_is_inclusive_spec_6_3) {
  ModelBatchLayout l({field("a", DType::int64, Placement::cpu, {sym("B"), sym("S")}),
                      field("b", DType::uint8, Placement::accelerator, {sym("S"), fixed(4)})});
  V header = {kBatch, 2, 5};  // a: 2*5*8 = 80 bytes, b: 5*4 = 20 bytes
  auto shapes = l.shapes(header, 80);
  BOOST_REQUIRE_EQUAL(shapes.size(), 2u);
  BOOST_TEST(shapes[0] == V({2, 5}), boost::test_tools::per_element());
  BOOST_TEST(shapes[1] == V({5, 4}), boost::test_tools::per_element());
  HPREF_CHECK_ERROR(l.shapes(header, 79), Errc::batch_size_limit,
                    "batch field 'a' of shape (2, 5) would exceed max_message_bytes 79");
  // numel fits int64, its byte count does not (2^62 * 8).
  ModelBatchLayout one({field("x", DType::int64, Placement::cpu, {sym("N")})});
  V huge = {kBatch, std::int64_t{1} << 62};
  HPREF_CHECK_ERROR(
      one.shapes(huge, std::numeric_limits<std::uint64_t>::max()), Errc::batch_size_limit,
      "batch field 'x' of shape (4611686018427387904,) would exceed max_message_bytes "
      "18446744073709551615");
  // Zero elements are fine under a zero limit.
  V empty = {kBatch, 0};
  BOOST_TEST(one.shapes(empty, 0).at(0) == V({0}), boost::test_tools::per_element());
  V end = {kEndOfData, 0};
  HPREF_CHECK_ERROR(one.shapes(end, 100), Errc::batch_header,
                    "batch header status 0 carries no shapes");
  V status = {-2, 0};
  HPREF_CHECK_ERROR(one.header_status(status), Errc::batch_header,
                    "batch header status -2 is not -1 (failed), 0 (end of data) or 1 (batch)");
  V long_header = {kBatch, 1, 1};
  HPREF_CHECK_ERROR(one.header_status(long_header), Errc::batch_header,
                    "batch header has 3 values, the spec needs 2");
  BOOST_TEST(one.header_status(end) == kEndOfData);
  BOOST_TEST(one.header(kBatchFailed) == V({-1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(rebuild_needs_one_tensor_per_field) {
  ModelBatchLayout l({field("a", DType::int8, Placement::cpu, {fixed(2)}),
                      field("b", DType::int8, Placement::cpu, {fixed(1)})});
  std::vector<Tensor> one = {edge_tensor(DType::int8, {2}).as_tensor()};
  HPREF_CHECK_ERROR(l.rebuild(one), Errc::batch_spec, "rebuild got 1 tensors for 2 fields");
  Value rebuilt = l.rebuild(
      {edge_tensor(DType::int8, {2}).as_tensor(), edge_tensor(DType::int8, {1}).as_tensor()});
  BOOST_REQUIRE(rebuilt.is(ValueKind::mapping));
  BOOST_REQUIRE_EQUAL(rebuilt.entries().size(), 2u);
  BOOST_TEST(rebuilt.entries()[0].first.as_str() == "a");  // in field order
  BOOST_TEST(rebuilt.entries()[1].first.as_str() == "b");
  BOOST_TEST(rebuilt.entries()[1].second.as_tensor().shape()[0] == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_edges_routes)

// SPEC 7.3 (header of routes.hpp): boundaries must start at 0, so empty ones are refused
// before anything reads them; each message names the values.
BOOST_AUTO_TEST_CASE(compressed_offsets_refuse_empty_boundaries_spec_7_3) {
  HPREF_CHECK_ERROR(compressed_document_offsets(V{}, 1), Errc::route_boundaries,
                    "document boundaries are empty");
  HPREF_CHECK_ERROR(compressed_document_offsets(V{2, 4}, 1), Errc::route_boundaries,
                    "document boundaries must start at 0, got 2");
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{}, 2, 4), Errc::route_boundaries,
                    "document boundaries are empty");
  HPREF_CHECK_ERROR(compressed_document_offsets(V{0, 7, 5}, 2), Errc::route_boundaries,
                    "document boundaries decrease at index 2: 7 then 5");
  HPREF_CHECK_ERROR(compressed_document_offsets(V{0, 4}, -1), Errc::route_arguments,
                    "ratio must be positive, got -1");
  HPREF_CHECK_ERROR(compressed_owner_offsets(V{0, 4}, 1, -3), Errc::route_arguments,
                    "local_length must be positive, got -3");
  HPREF_CHECK_ERROR(compressed_document_offsets(V{0, 4, 3}, 1), Errc::route_boundaries,
                    "document boundaries decrease at index 2");
}

// SPEC 7.3 values (the original's stubs.py computes the same): an empty document (equal
// boundaries) has no block; ratio 3 with a trailing partial block and a sequence length
// that is not a multiple of L (size = floor(7 / 2) = 3).
BOOST_AUTO_TEST_CASE(compressed_offsets_values_spec_7_3) {
  BOOST_TEST(compressed_document_offsets(V{0, 4, 4, 8}, 2) == V({0, 2, 2, 4}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_owner_offsets(V{0, 4, 4, 8}, 2, 4) == V({0, 2, 4}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_document_offsets(V{0, 7}, 3) == V({0, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_owner_offsets(V{0, 7}, 3, 2) == V({0, 0, 1, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(compressed_document_offsets(V{0}, 1) == V({0}), boost::test_tools::per_element());
}

// SPEC 7.2: the intervals of the sliding-window route.
BOOST_AUTO_TEST_CASE(sliding_window_intervals_spec_7_2) {
  I got = sliding_window_intervals(V{0, 6, 12}, 4, 3, 3);
  BOOST_TEST((got == I{{0, 4}, {2, 8}, {6, 12}}));
  HPREF_CHECK_ERROR(sliding_window_intervals(V{0, 6, 12}, 4, 3, -1), Errc::route_arguments,
                    "window must be positive, got -1");
  HPREF_CHECK_ERROR(sliding_window_intervals(V{0, 6, 12}, 4, 2, 3), Errc::route_boundaries,
                    "document boundaries must end at local_length * size = 8, got 12");
}

// Beyond kMaxRoutePeers ranks the one-rank and all-ranks planners refuse before allocating,
// after the checks the original makes too (rank, boundaries: their kinds kept).
BOOST_AUTO_TEST_CASE(too_many_peers) {
  std::int64_t size = kMaxRoutePeers + 1;
  V b = {0, size};
  const std::string message =
      "size 1048577 is beyond the 1048576 ranks whose per-peer route tables this planner builds";
  HPREF_CHECK_ERROR(sliding_window_route(b, 1, size, 0, 1), Errc::route_too_large, message);
  HPREF_CHECK_ERROR(document_prefix_route(b, 1, size, 0, 1), Errc::route_too_large, message);
  HPREF_CHECK_ERROR(sliding_window_routes(b, 1, size, 1), Errc::route_too_large, message);
  HPREF_CHECK_ERROR(document_prefix_routes(b, 1, size, 2), Errc::route_too_large, message);
  // The rank and the boundaries are checked before the size cap.
  HPREF_CHECK_ERROR(sliding_window_route(b, 1, size, -1, 1), Errc::route_arguments,
                    "rank -1 is outside [0, size = 1048577)");
  HPREF_CHECK_ERROR(sliding_window_route(V{0, 4}, 1, size, 0, 1), Errc::route_boundaries,
                    "must end at local_length * size = 1048577, got 4");
  HPREF_CHECK_ERROR(document_prefix_routes(V{0, 4}, 1, size, 2), Errc::route_boundaries,
                    "must end at local_length * size = 1048577, got 4");
  // The all-ranks planners stop at kMaxAllRoutesPeers ranks.
  I shards;
  for (std::int64_t p = 0; p <= kMaxAllRoutesPeers; ++p) shards.push_back({p, p + 1});
  HPREF_CHECK_ERROR(
      interval_routes(1, shards), Errc::route_too_large,
      "all ranks' routes of 2049 ranks hold 2049 x 2049 entries per table, beyond the "
      "2048-rank limit of the all-ranks planners (plan one rank's route instead)");
  V long_b = {0, kMaxAllRoutesPeers + 1};
  HPREF_CHECK_ERROR(sliding_window_routes(long_b, 1, kMaxAllRoutesPeers + 1, 1),
                    Errc::route_too_large, "2049 ranks");
}

// The all-ranks planners give every rank's route: the same as the one-rank planner, and
// the original's values (seed_sequence_dispatch.py) for these cases.
BOOST_AUTO_TEST_CASE(all_ranks_planners_equal_the_one_rank_routes) {
  V owners = {0, 3, 3, 7};
  I intervals = {{0, 3}, {1, 3}, {3, 7}};
  auto all = interval_routes(-5 /* unused with owner offsets */, intervals, owners);
  BOOST_REQUIRE_EQUAL(all.size(), 3u);
  const V lengths = {3, 0, 4};
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST(
        (all[r] == interval_route(lengths[r], static_cast<std::int64_t>(r), intervals, owners)));
  }
  BOOST_TEST(all[0].input_splits == V({0, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(all[0].send_offsets == V({0, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(all[1].output_splits == V({2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(all[1].local_output_start == 2);

  V b = {0, 5, 12, 16};
  auto prefix = document_prefix_routes(b, 4, 4, 2);
  BOOST_REQUIRE_EQUAL(prefix.size(), 4u);
  for (std::int64_t r = 0; r < 4; ++r) {
    BOOST_TEST((prefix[static_cast<std::size_t>(r)] == document_prefix_route(b, 4, 4, r, 2)));
  }
  // rank 3: keys[doc(12)] = 5 .. owners[4] = 7, exactly its own shard
  BOOST_TEST(prefix[3].local_length == 2);
  BOOST_TEST(prefix[3].global_start == 5);
  BOOST_TEST(prefix[3].global_end == 7);
  BOOST_TEST(prefix[3].output_splits == V({0, 0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(prefix[3].needs_exchange);

  auto window = sliding_window_routes(V{0, 6, 12}, 4, 3, 3);
  BOOST_REQUIRE_EQUAL(window.size(), 3u);
  for (std::int64_t r = 0; r < 3; ++r) {
    BOOST_TEST(
        (window[static_cast<std::size_t>(r)] == sliding_window_route(V{0, 6, 12}, 4, 3, r, 3)));
  }
  BOOST_TEST(window[1].output_splits == V({2, 0, 0}), boost::test_tools::per_element());
}

// SPEC 7.1: an interval that starts at its owner shard but ends later still means an
// exchange, for every rank (values as the original gives them).
BOOST_AUTO_TEST_CASE(an_interval_longer_only_at_its_end_spec_7_1) {
  I intervals = {{0, 8}, {4, 8}};
  Route r0 = interval_route(4, 0, intervals);
  Route r1 = interval_route(4, 1, intervals);
  BOOST_TEST(r0.needs_exchange);
  BOOST_TEST(r1.needs_exchange);
  BOOST_TEST(r0.global_end == 8);
  BOOST_TEST(r0.local_output_start == 0);
  BOOST_TEST(r0.output_splits == V({0, 4}), boost::test_tools::per_element());
  BOOST_TEST(r1.input_splits == V({4, 0}), boost::test_tools::per_element());
  BOOST_TEST(r1.send_offsets == V({0, 0}), boost::test_tools::per_element());
  BOOST_TEST(r1.output_splits == V({0, 0}), boost::test_tools::per_element());
  BOOST_TEST(r0.problem(0).empty());
  BOOST_TEST(r1.problem(1).empty());
}

// SPEC 7.4: with ratio 1 the prefix route equals the sliding-window route with a window
// covering the whole sequence (values as the original gives them).
BOOST_AUTO_TEST_CASE(ratio_one_is_an_unbounded_window_spec_7_4) {
  V b = {0, 3, 10, 12};
  for (std::int64_t r = 0; r < 4; ++r) {
    BOOST_TEST_CONTEXT("rank " << r) {
      BOOST_TEST((document_prefix_route(b, 3, 4, r, 1) == sliding_window_route(b, 3, 4, r, 12)));
    }
  }
  Route r2 = document_prefix_route(b, 3, 4, 2, 1);
  BOOST_TEST(r2.global_start == 3);
  BOOST_TEST(r2.global_end == 9);
  BOOST_TEST(r2.local_output_start == 3);
  BOOST_TEST(r2.input_splits == V({0, 0, 0, 3}), boost::test_tools::per_element());
  BOOST_TEST(r2.output_splits == V({0, 3, 0, 0}), boost::test_tools::per_element());
  auto all = document_prefix_routes(b, 3, 4, 1);
  BOOST_TEST((all[2] == r2));
}

// The all-ranks planners run the SPEC 7.1 checks (not the rank's) in the same order.
BOOST_AUTO_TEST_CASE(all_ranks_planner_checks_spec_7_1) {
  HPREF_CHECK_ERROR(interval_routes(4, I{}), Errc::route_no_intervals,
                    "a route needs at least one interval, got none");
  HPREF_CHECK_ERROR(interval_routes(4, I{{0, 4}}, V{0}), Errc::route_owner_count,
                    "owner_offsets has 1 entries but 1 intervals need 2");
  HPREF_CHECK_ERROR(interval_routes(4, I{{0, 4}}, V{2, 4}), Errc::route_owner_start,
                    "owner_offsets must start at 0, got 2");
  HPREF_CHECK_ERROR(interval_routes(4, I{{0, 4}, {0, 4}}, V{0, 4, 3}), Errc::route_owner_order,
                    "owner_offsets decrease at index 2: 4 then 3");
  HPREF_CHECK_ERROR(
      interval_routes(4, I{{0, 4}, {4, 9}}), Errc::route_interval,
      "interval 1 (4, 9) does not contain owner shard (4, 8) within the global bank [0, 8)");
  HPREF_CHECK_ERROR(interval_routes(kMax / 2, I{{0, 1}, {1, 2}, {2, 3}}), Errc::route_overflow,
                    "owner offset p * local_length = 3 * 4611686018427387903 is beyond int64");
  HPREF_CHECK_ERROR(document_prefix_routes(V{0, 8}, 4, 2, 3), Errc::route_arguments,
                    "ratio must be 1 or 2, got 3");
  HPREF_CHECK_ERROR(document_prefix_routes(V{0, 8}, 4, 2, 0), Errc::route_arguments,
                    "ratio must be 1 or 2, got 0");
  HPREF_CHECK_ERROR(document_prefix_routes(V{1, 8}, 4, 2, 1), Errc::route_boundaries,
                    "document boundaries must start at 0, got 1");
  HPREF_CHECK_ERROR(sliding_window_routes(V{0, 8}, 4, 2, 0), Errc::route_arguments,
                    "window must be positive, got 0");
  HPREF_CHECK_ERROR(sliding_window_routes(V{0, 8}, -4, 2, 1), Errc::route_arguments,
                    "local_length must be positive, got -4");
  HPREF_CHECK_ERROR(sliding_window_routes(V{0, 8}, 4, 0, 1), Errc::route_arguments,
                    "size must be positive, got 0");
  HPREF_CHECK_ERROR(sliding_window_routes(V{0, 4, 4, 8}, 4, 2, 1), Errc::route_boundaries,
                    "document boundaries must strictly increase, got 4 then 4 at index 2");
  HPREF_CHECK_ERROR(
      sliding_window_route(V{0, 4}, kMax / 2, 3, 0, 1), Errc::route_overflow,
      "sequence length local_length * size = 4611686018427387903 * 3 is beyond int64");
  HPREF_CHECK_ERROR(document_prefix_route(V{0, 8}, 4, 2, 2, 1), Errc::route_arguments,
                    "rank 2 is outside [0, size = 2)");
  HPREF_CHECK_ERROR(interval_route(4, 2, I{{0, 4}, {4, 8}}), Errc::route_rank,
                    "rank 2 is outside [0, 2)");
  HPREF_CHECK_ERROR(interval_route(3, 1, I{{0, 4}, {4, 8}}, V{0, 4, 8}), Errc::route_local_length,
                    "local_length 3 differs from rank 1's owner shard (4, 8) of length 4");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan_edges_route_problem)

// rank 1 of L=4, P=3, documents [0,6) [6,12), window 3 (the original gives the same):
// interval [2, 8), 2 rows received from rank 0, 2 rows sent to rank 2 from offset 2.
Route good() { return sliding_window_route(V{0, 6, 12}, 4, 3, 1, 3); }

BOOST_AUTO_TEST_CASE(the_good_route) {
  Route r = good();
  BOOST_TEST(r.problem().empty());
  BOOST_TEST(r.problem(1).empty());
  BOOST_TEST(r.is_valid());
  using P = std::vector<std::pair<std::int64_t, std::int64_t>>;
  BOOST_TEST((r.owner_ranges() == P{{0, 0}, {0, 0}, {2, 2}}));
  // owner_ranges zips the two tables: the shorter decides (like Python's zip).
  r.input_splits.pop_back();
  BOOST_TEST((r.owner_ranges() == P{{0, 0}, {0, 0}}));
  r = good();
  r.send_offsets.pop_back();
  BOOST_TEST((r.owner_ranges() == P{{0, 0}, {0, 0}}));
}

BOOST_AUTO_TEST_CASE(table_shapes) {
  BOOST_TEST(route_problem_text(Route{}) == "the route has no peers (send_offsets is empty)");
  BOOST_TEST(!Route{}.is_valid());
  Route r = good();
  r.input_splits.pop_back();
  BOOST_TEST(route_problem_text(r) ==
             "the route's per-peer tables differ in size: send_offsets 3, input_splits 2, "
             "output_splits 3");
  r = good();
  r.output_splits.push_back(0);
  BOOST_TEST(route_problem_text(r) ==
             "the route's per-peer tables differ in size: send_offsets 3, input_splits 3, "
             "output_splits 4");
}

BOOST_AUTO_TEST_CASE(scalar_fields) {
  Route r = good();
  r.local_length = -1;
  BOOST_TEST(route_problem_text(r) == "local_length -1 is negative");
  r = good();
  r.global_start = -2;
  BOOST_TEST(route_problem_text(r) == "global_start -2 is negative");
  r = good();
  r.global_end = 1;
  BOOST_TEST(route_problem_text(r) == "the interval [2, 1) ends before it starts");
  r = good();
  BOOST_TEST(route_problem_text(r, 3) == "rank 3 has no entry in a route for 3 ranks");
}

BOOST_AUTO_TEST_CASE(per_peer_entries) {
  Route r = good();
  r.send_offsets[0] = -1;
  BOOST_TEST(route_problem_text(r) == "send_offsets for peer 0 is negative (-1)");
  r = good();
  r.input_splits[1] = -2;
  BOOST_TEST(route_problem_text(r) == "input_splits for peer 1 is negative (-2)");
  r = good();
  r.output_splits[2] = -3;
  BOOST_TEST(route_problem_text(r) == "output_splits for peer 2 is negative (-3)");
  r = good();
  r.send_offsets[0] = 1;
  BOOST_TEST(route_problem_text(r) == "send_offsets for peer 0 is 1 with no rows sent");
  r = good();
  r.send_offsets[2] = 3;  // rows [3, 5) of a 4-row shard
  BOOST_TEST(route_problem_text(r) ==
             "the send range for peer 2 [3, 3 + 2) is outside the owner shard of 4 rows");
  r = good();
  r.send_offsets[2] = kMax;  // offset + count beyond int64
  BOOST_TEST(route_problem_text(r) ==
             "the send range for peer 2 [9223372036854775807, 9223372036854775807 + 2) is outside "
             "the owner "
             "shard of 4 rows");
  r = good();
  r.output_splits[1] = kMax;  // 2 + max: the sum of output_splits overflows at peer 1
  BOOST_TEST(route_problem_text(r) == "the output_splits sum beyond int64 at peer 1");
  r = good();
  r.needs_exchange = false;
  BOOST_TEST(route_problem_text(r) ==
             "needs_exchange is false but peer 0 has 0 rows to send and 2 to receive");
  // rank 0 (nothing received, 2 rows sent to rank 1): the first peer passes, the second not.
  r = sliding_window_route(V{0, 6, 12}, 4, 3, 0, 3);
  r.needs_exchange = false;
  BOOST_TEST(route_problem_text(r) ==
             "needs_exchange is false but peer 1 has 2 rows to send and 0 to receive");
}

BOOST_AUTO_TEST_CASE(self_entries_and_assembly) {
  Route r = good();
  r.input_splits[1] = 1;                      // rank 1 sending row 0 to itself
  BOOST_TEST(route_problem_text(r).empty());  // without self, only the shape is checked
  BOOST_TEST(route_problem_text(r, 1) ==
             "rank 1 sends itself 1 rows and receives 0 from itself (self entries must be 0)");
  r = good();
  r.output_splits[1] = 1;
  r.global_end += 1;
  BOOST_TEST(route_problem_text(r).empty());
  BOOST_TEST(route_problem_text(r, 1) ==
             "rank 1 sends itself 0 rows and receives 1 from itself (self entries must be 0)");
  r = good();
  r.global_end = 9;
  BOOST_TEST(
      route_problem_text(r) ==
      "the interval [2, 9) does not hold the 4 own rows plus the 2 received (output_splits)");
  r = good();
  r.output_splits[0] = kMax - 1;  // received + local_length beyond int64
  BOOST_TEST(route_problem_text(r) ==
             "the interval [2, 8) does not hold the 4 own rows plus the "
             "9223372036854775806 received (output_splits)");
  r = good();
  r.local_output_start = -1;
  BOOST_TEST(route_problem_text(r) ==
             "local_output_start -1 is outside [0, 2] (the rows received)");
  r = good();
  r.local_output_start = 3;
  BOOST_TEST(route_problem_text(r) == "local_output_start 3 is outside [0, 2] (the rows received)");
  // In range, but not where dispatch assembles rank 1's rows (after the 2 from rank 0).
  r = good();
  r.local_output_start = 0;
  BOOST_TEST(route_problem_text(r).empty());
  BOOST_TEST(route_problem_text(r, 1) ==
             "local_output_start 0 differs from the 2 rows received from ranks before rank 1");
  // rank 0's route: nothing received before it.
  Route r0 = sliding_window_route(V{0, 6, 12}, 4, 3, 0, 3);
  BOOST_TEST(route_problem_text(r0, 0).empty());
  // rank 2's route receives 2 rows from rank 1: its own rows come after them.
  Route r2 = sliding_window_route(V{0, 6, 12}, 4, 3, 2, 3);
  BOOST_TEST(route_problem_text(r2, 2).empty());
  r2.local_output_start = 0;
  BOOST_TEST(route_problem_text(r2, 2) ==
             "local_output_start 0 differs from the 2 rows received from ranks before rank 2");
}

BOOST_AUTO_TEST_SUITE_END()
