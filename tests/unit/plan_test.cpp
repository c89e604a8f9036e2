// SPEC 3.1, 3.2, 6.1-6.3: the topology, the group plan and the batch layout; each check
// provoked on its own.
#include "builders.hpp"
#include "hpref/group_plan.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/sha256.hpp"
#include "hpref/topology.hpp"
#include "test_util.hpp"

using namespace hpref;
using Ranks = std::vector<int>;

namespace {

TopologyInputs mesh(std::vector<std::int64_t> shape, std::vector<std::string> names, int rank,
                    std::optional<std::vector<std::string>> dp = std::nullopt) {
  return hpref::test::mesh_of(std::move(shape), std::move(names), rank, std::move(dp));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sha256_digest)

BOOST_AUTO_TEST_CASE(fips_180_vectors) {
  BOOST_TEST(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(sha256_hex("abc") ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  BOOST_TEST(sha256_hex(std::string(1000000, 'a')) ==
             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(topology)

BOOST_AUTO_TEST_CASE(derived_views_spec_3_1) {
  // dp=2 x cp=4, rank 6 = coordinate (1, 2)
  DataTopology t(mesh({2, 4}, {"dp", "cp"}, 6));
  BOOST_TEST(t.coordinate() == std::vector<std::int64_t>({1, 2}), boost::test_tools::per_element());
  BOOST_TEST(t.data_parallel_size() == 2);
  BOOST_TEST(t.data_rank() == 1);
  BOOST_TEST(t.constructor_ranks() == Ranks({0, 4}), boost::test_tools::per_element());
  BOOST_TEST(t.model_parallel_rank_groups()[1] == Ranks({4, 5, 6, 7}),
             boost::test_tools::per_element());
  BOOST_TEST(t.constructor_rank() == 4);
  BOOST_TEST(t.model_parallel_ranks() == Ranks({4, 5, 6, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(two_dp_dims_and_a_permuted_rank_list) {
  // (dp_replicate=2, tp=2, dp_shard=2); rank_list reversed
  TopologyInputs in = mesh({2, 2, 2}, {"dp_replicate", "tp", "dp_shard"}, 0);
  std::reverse(in.rank_list.begin(), in.rank_list.end());
  in.global_rank = 5;  // flat index 2 = coordinate (0, 1, 0)
  DataTopology t(in);
  BOOST_TEST(t.dp_dim_names() == std::vector<std::string>({"dp_replicate", "dp_shard"}),
             boost::test_tools::per_element());
  BOOST_TEST(t.data_parallel_size() == 4);
  BOOST_TEST(t.data_rank() == 0);
  // DP coordinate d = (replicate, shard) row-major; tp coordinate 0 is the constructor.
  BOOST_TEST(t.constructor_ranks() == Ranks({7, 6, 3, 2}), boost::test_tools::per_element());
  BOOST_TEST(t.model_parallel_rank_groups()[0] == Ranks({7, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(no_dp_dims_means_one_group_of_everyone) {
  DataTopology t(mesh({4}, {"cp"}, 2));
  BOOST_TEST(t.data_parallel_size() == 1);
  BOOST_TEST(t.constructor_ranks() == Ranks({0}), boost::test_tools::per_element());
  BOOST_TEST(t.model_parallel_ranks() == Ranks({0, 1, 2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fingerprint_is_stable_and_sensitive) {
  DataTopology a(mesh({2, 4}, {"dp", "cp"}, 0));
  DataTopology b(mesh({2, 4}, {"dp", "cp"}, 5));
  DataTopology c(mesh({4, 2}, {"dp", "cp"}, 0));
  BOOST_TEST(a.fingerprint() == b.fingerprint());  // same mesh, another rank
  BOOST_TEST(a.fingerprint() != c.fingerprint());
  BOOST_TEST(a.canonical_text() ==
             "hpref-topology-v2\nshape=2,4\nnames=2:dp,2:cp\nranks=0,1,2,3,4,5,6,7\ndp=2:dp\n");
  BOOST_TEST(a.fingerprint() == sha256_hex(a.canonical_text()));
}

// SPEC 3.1's canonical text is one text per mesh: names are length-prefixed, since a name
// may hold the ',' and '\n' that separate them (joined bare, these pairs shared a text).
BOOST_AUTO_TEST_CASE(fingerprint_separates_names_that_hold_separators) {
  std::vector<std::string> none;
  DataTopology a(mesh({1, 2}, {"a,b", "c"}, 0, none));
  DataTopology b(mesh({1, 2}, {"a", "b,c"}, 0, none));
  BOOST_TEST(a.canonical_text() != b.canonical_text());
  BOOST_TEST(a.fingerprint() != b.fingerprint());
  BOOST_TEST(a.canonical_text() ==
             "hpref-topology-v2\nshape=1,2\nnames=3:a,b,1:c\nranks=0,1\ndp=\n");
  // DP names are prefixed too: ("a,b") and ("a", "b") as DP dims of one mesh.
  DataTopology e(mesh({1, 1, 1}, {"a,b", "a", "b"}, 0, std::vector<std::string>{"a,b"}));
  DataTopology f(mesh({1, 1, 1}, {"a,b", "a", "b"}, 0, std::vector<std::string>{"a", "b"}));
  BOOST_TEST(e.fingerprint() != f.fingerprint());
}

BOOST_AUTO_TEST_CASE(each_check_spec_3_1) {
  HPREF_CHECK_ERROR(DataTopology(mesh({}, {}, 0)), Errc::topology_shape, "at least one dim");
  HPREF_CHECK_ERROR(DataTopology(mesh({2, 0}, {"dp", "cp"}, 0)), Errc::topology_shape,
                    "non-positive dim 0");
  HPREF_CHECK_ERROR(DataTopology(mesh({2, 2}, {"dp"}, 0)), Errc::topology_names,
                    "1 names for 2 dims");
  HPREF_CHECK_ERROR(DataTopology(mesh({2, 2}, {"dp", "dp"}, 0)), Errc::topology_names, "repeat");
  TopologyInputs dup = mesh({2, 2}, {"dp", "cp"}, 0);
  dup.rank_list[3] = 0;
  HPREF_CHECK_ERROR(DataTopology(dup), Errc::topology_rank_list, "3 distinct");
  TopologyInputs small = mesh({2, 2}, {"dp", "cp"}, 0);
  small.rank_list.pop_back();
  HPREF_CHECK_ERROR(DataTopology(small), Errc::topology_rank_list, "mesh of 4");
  HPREF_CHECK_ERROR(DataTopology(mesh({2, 2}, {"dp", "cp"}, 9)), Errc::topology_global_rank,
                    "global_rank 9");
  HPREF_CHECK_ERROR(
      DataTopology(mesh({2, 2}, {"dp", "cp"}, 0, std::vector<std::string>{"cp", "cp"})),
      Errc::topology_dp_names, "repeat");
  HPREF_CHECK_ERROR(DataTopology(mesh({2, 2}, {"dp", "cp"}, 0, std::vector<std::string>{"tp"})),
                    Errc::topology_dp_names, "'tp'");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(group_plan)

GroupPlanInputs base(const DataTopology& t, int rank) {
  GroupPlanInputs in;
  in.topology = &t;
  in.reader_ranks = {0, 1};
  in.planner_rank = 0;
  in.cpu_backend = "gloo";
  in.world_size = 8;
  in.rank = rank;
  in.world_backend = "nccl";
  return in;
}

BOOST_AUTO_TEST_CASE(host_only_plan_reuses_the_control_group_spec_3_2) {
  DataTopology t(mesh({2, 4}, {"dp", "cp"}, 5));
  GroupPlan p = plan_groups(base(t, 5));
  BOOST_TEST(p.data_plane_ranks == Ranks({0, 1, 4}), boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(p.creations.size(), 3u);  // control, two model-parallel host groups
  BOOST_TEST((p.creations[0] == GroupCreation{GroupRole::control, {0, 1, 4}, "gloo"}));
  BOOST_TEST(
      (p.creations[1] == GroupCreation{GroupRole::model_parallel_host, {0, 1, 2, 3}, "gloo"}));
  BOOST_TEST(
      (p.creations[2] == GroupCreation{GroupRole::model_parallel_host, {4, 5, 6, 7}, "gloo"}));
  BOOST_TEST(p.payload_reuses_control);
  BOOST_TEST(!p.control.has_value());  // rank 5 is not in the data plane
  BOOST_REQUIRE(p.model_parallel.has_value());
  BOOST_TEST(*p.model_parallel == 2u);
  BOOST_TEST(!p.tensor_backend.has_value());
}

BOOST_AUTO_TEST_CASE(accelerator_payload_and_tensor_groups) {
  DataTopology t(mesh({2, 4}, {"dp", "cp"}, 0));
  GroupPlanInputs in = base(t, 0);
  in.communication_device = "cuda:0";
  GroupPlan p = plan_groups(in);
  // control (gloo), payload (world backend nccl), then per model-parallel group host + nccl
  BOOST_REQUIRE_EQUAL(p.creations.size(), 6u);
  BOOST_TEST(p.creations[1].role == GroupRole::payload);
  BOOST_TEST(p.creations[1].backend == "nccl");
  BOOST_REQUIRE(p.payload_backend.has_value());
  BOOST_TEST(*p.payload_backend == "nccl");
  BOOST_TEST(!p.payload_reuses_control);
  BOOST_TEST(p.creations[3].role == GroupRole::model_parallel_tensor);
  BOOST_REQUIRE(p.control.has_value());
  BOOST_TEST(*p.control == 0u);
  BOOST_REQUIRE(p.payload.has_value());
  BOOST_TEST(*p.payload == 1u);
  BOOST_REQUIRE(p.model_parallel.has_value());
  BOOST_TEST(*p.model_parallel == 2u);
  BOOST_REQUIRE(p.model_parallel_tensor.has_value());
  BOOST_TEST(*p.model_parallel_tensor == 3u);
  // A cuda model device forces nccl tensor groups even with a host payload.
  in.communication_device = std::nullopt;
  in.model_device = "cuda";
  p = plan_groups(in);
  BOOST_REQUIRE(p.tensor_backend.has_value());
  BOOST_TEST(*p.tensor_backend == "nccl");
  BOOST_TEST(p.payload_reuses_control);
}

BOOST_AUTO_TEST_CASE(one_data_plane_rank_and_no_exchange) {
  DataTopology t(mesh({1, 4}, {"dp", "cp"}, 2));
  GroupPlanInputs in = base(t, 2);
  in.world_size = 4;
  in.reader_ranks = {0};
  GroupPlan p = plan_groups(in);
  BOOST_REQUIRE_EQUAL(p.creations.size(), 1u);  // only the model-parallel host group
  BOOST_TEST(!p.payload_backend.has_value());
  DataTopology t8(mesh({2, 4}, {"dp", "cp"}, 0));
  GroupPlanInputs off = base(t8, 0);
  off.enable_payload_exchange = false;
  p = plan_groups(off);
  BOOST_TEST(p.creations.size() == 3u);
  BOOST_TEST(!p.payload.has_value());
}

BOOST_AUTO_TEST_CASE(not_distributed) {
  DataTopology one(mesh({1}, {"dp"}, 0));
  GroupPlanInputs in = base(one, 0);
  in.reader_ranks = {0};
  in.distributed = false;
  GroupPlan p = plan_groups(in);
  BOOST_TEST(p.creations.empty());
  BOOST_TEST(!p.distributed);
  DataTopology two(mesh({2}, {"dp"}, 0));
  GroupPlanInputs bad = base(two, 0);
  bad.distributed = false;
  HPREF_CHECK_ERROR(plan_groups(bad), Errc::group_not_distributed, "mesh of 2 ranks");
}

BOOST_AUTO_TEST_CASE(each_check_in_order_spec_3_2) {
  DataTopology t(mesh({2, 4}, {"dp", "cp"}, 0));
  auto with = [&](auto change) {
    GroupPlanInputs in = base(t, 0);
    change(in);
    return plan_groups(in);
  };
  HPREF_CHECK_ERROR(with([](auto& in) { in.planner_rank = 3; }), Errc::group_planner,
                    "planner_rank 3");
  HPREF_CHECK_ERROR(with([](auto& in) { in.world_size = 9; }), Errc::group_mesh_world, "0..8");
  HPREF_CHECK_ERROR(with([](auto& in) { in.rank = 1; }), Errc::group_rank, "this rank 1");
  HPREF_CHECK_ERROR(with([](auto& in) { in.cpu_backend = "nccl"; }), Errc::group_cpu_backend,
                    "'nccl'");
  HPREF_CHECK_ERROR(with([](auto& in) { in.cpu_backend = ""; }), Errc::group_cpu_backend, "''");
  BOOST_TEST(with([](auto& in) { in.cpu_backend = "MPI"; }).creations[0].backend == "MPI");
  HPREF_CHECK_ERROR(with([](auto& in) { in.payload_backend = ""; }), Errc::group_payload_backend,
                    "non-empty");
  HPREF_CHECK_ERROR(with([](auto& in) { in.payload_backend = "nccl"; }), Errc::group_payload_device,
                    "needs a rank-local accelerator");
  HPREF_CHECK_ERROR(with([](auto& in) {
                      in.payload_backend = "hccl";
                      in.communication_device = "cuda:0";
                    }),
                    Errc::group_payload_device, "needs a npu");
  HPREF_CHECK_ERROR(with([](auto& in) {
                      in.payload_backend = "gloo";
                      in.communication_device = "cuda:0";
                    }),
                    Errc::group_payload_device, "cannot exchange tensors on a cuda");
  HPREF_CHECK_ERROR(with([](auto& in) { in.communication_device = "tpu:0"; }), Errc::group_device,
                    "'tpu:0'");
  // order: the planner check comes before the distributed and world checks
  HPREF_CHECK_ERROR(with([](auto& in) {
                      in.planner_rank = 3;
                      in.world_size = 9;
                    }),
                    Errc::group_planner, "planner_rank 3");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(model_batch)

ModelBatchLayout spec() {
  return ModelBatchLayout({
      {"tokens",
       DType::int64,
       Placement::accelerator,
       {Dim{std::string("B")}, Dim{std::string("S")}}},
      {"mask",
       DType::boolean,
       Placement::accelerator,
       {Dim{std::string("B")}, Dim{std::string("S")}}},
      {"image", DType::uint8, Placement::cpu, {Dim{std::string("N")}, Dim{std::int64_t{3}}}},
  });
}

Value tensor(DType d, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return Value::tensor(
      Tensor::copy_of(d, std::move(shape),
                      std::vector<std::uint8_t>(static_cast<std::size_t>(n) * element_size(d))));
}

Value batch(std::int64_t b, std::int64_t s, std::int64_t n) {
  return Value::mapping({{Value::string("tokens"), tensor(DType::int64, {b, s})},
                         {Value::string("mask"), tensor(DType::boolean, {b, s})},
                         {Value::string("image"), tensor(DType::uint8, {n, 3})}});
}

BOOST_AUTO_TEST_CASE(symbols_numbered_by_first_appearance_spec_6_1) {
  auto l = spec();
  BOOST_TEST(l.symbols() == std::vector<std::string>({"B", "S", "N"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(flatten_header_shapes_rebuild_round_trip_spec_6_2) {
  auto l = spec();
  Value b = batch(2, 5, 0);
  auto flat = l.flatten(b);
  BOOST_TEST(l.header(flat) == std::vector<std::int64_t>({1, 2, 5, 0}),
             boost::test_tools::per_element());
  auto shapes = l.shapes(l.header(flat), 1 << 20);
  BOOST_TEST(shapes[2] == std::vector<std::int64_t>({0, 3}), boost::test_tools::per_element());
  BOOST_TEST((l.rebuild(flat.tensors) == b));
  BOOST_TEST(l.header(kEndOfData) == std::vector<std::int64_t>({0, 0, 0, 0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(flatten_checks_spec_6_2) {
  auto l = spec();
  auto without = [](Value b, std::string_view name) {
    std::vector<Value::Entry> e;
    for (const auto& entry : b.entries())
      if (entry.first.as_str() != name) e.push_back(entry);
    return Value::mapping(e);
  };
  auto with = [](Value b, std::string_view name, Value v) {
    std::vector<Value::Entry> e;
    for (const auto& entry : b.entries())
      e.emplace_back(entry.first, entry.first.as_str() == name ? v : entry.second);
    if (std::none_of(e.begin(), e.end(), [&](auto& x) { return x.first.as_str() == name; })) {
      e.emplace_back(Value::string(name), v);
    }
    return Value::mapping(e);
  };
  Value good = batch(2, 5, 1);
  HPREF_CHECK_ERROR(l.flatten(without(good, "mask")), Errc::batch_missing_field, "'mask'");
  HPREF_CHECK_ERROR(l.flatten(with(good, "mask", tensor(DType::uint8, {2, 5}))), Errc::batch_dtype,
                    "uint8");
  HPREF_CHECK_ERROR(l.flatten(with(good, "mask", Value::integer(1))), Errc::batch_dtype, "int");
  // A binding's label for a value that is not a tensor (the Python type), asked by field;
  // an empty answer keeps the Value kind.
  auto label = [](const std::string& field) {
    return field == "mask" ? std::string("a Python list") : std::string();
  };
  HPREF_CHECK_ERROR(l.flatten(with(good, "mask", Value()), label), Errc::batch_dtype,
                    "'mask' must be a bool tensor, got a Python list");
  HPREF_CHECK_ERROR(
      l.flatten(with(with(good, "mask", tensor(DType::boolean, {2, 5})), "tokens", Value()), label),
      Errc::batch_dtype, "got NoneType");
  HPREF_CHECK_ERROR(l.flatten(with(good, "mask", tensor(DType::boolean, {10}))), Errc::batch_rank,
                    "1 dims");
  HPREF_CHECK_ERROR(l.flatten(with(good, "image", tensor(DType::uint8, {1, 4}))), Errc::batch_dim,
                    "fixes it at 3");
  HPREF_CHECK_ERROR(l.flatten(with(good, "mask", tensor(DType::boolean, {2, 6}))),
                    Errc::batch_symbol, "symbol 'S' is 5");
  HPREF_CHECK_ERROR(l.flatten(with(good, "extra", tensor(DType::uint8, {1}))),
                    Errc::batch_unknown_field, "'extra'");
  HPREF_CHECK_ERROR(l.flatten(Value::list({})), Errc::batch_spec, "mapping");
}

BOOST_AUTO_TEST_CASE(header_checks_spec_6_3) {
  auto l = spec();
  std::vector<std::int64_t> short_header = {1, 2};
  HPREF_CHECK_ERROR(l.header_status(short_header), Errc::batch_header, "2 values");
  std::vector<std::int64_t> bad_status = {2, 1, 1, 1};
  HPREF_CHECK_ERROR(l.header_status(bad_status), Errc::batch_header, "status 2");
  std::vector<std::int64_t> negative = {1, 2, -5, 1};
  HPREF_CHECK_ERROR(l.shapes(negative, 1 << 20), Errc::batch_header, "'S' the negative value -5");
  std::vector<std::int64_t> huge = {1, 1 << 20, 1 << 20, 1};
  HPREF_CHECK_ERROR(l.shapes(huge, 1 << 30), Errc::batch_size_limit, "'tokens'");
  std::vector<std::int64_t> overflow = {1, INT64_MAX, INT64_MAX, 1};
  HPREF_CHECK_ERROR(l.shapes(overflow, UINT64_MAX), Errc::batch_size_limit, "'tokens'");
  std::vector<std::int64_t> failed = {-1, 0, 0, 0};
  BOOST_TEST(l.header_status(failed) == kBatchFailed);
  HPREF_CHECK_ERROR(l.shapes(failed, 1), Errc::batch_header, "no shapes");
}

BOOST_AUTO_TEST_CASE(spec_checks_and_fingerprint_spec_6_1) {
  HPREF_CHECK_ERROR(ModelBatchLayout({{"", DType::int8, Placement::cpu, {}}}), Errc::batch_spec,
                    "non-empty name");
  HPREF_CHECK_ERROR(ModelBatchLayout({{"a", DType::int8, Placement::cpu, {}},
                                      {"a", DType::int8, Placement::cpu, {}}}),
                    Errc::batch_spec, "twice");
  HPREF_CHECK_ERROR(ModelBatchLayout({{"a", DType::int8, Placement::cpu, {Dim{std::int64_t{-1}}}}}),
                    Errc::batch_spec, "-1");
  HPREF_CHECK_ERROR(ModelBatchLayout({{"a", DType::int8, Placement::cpu, {Dim{std::string()}}}}),
                    Errc::batch_spec, "empty symbol");
  auto a = spec();
  auto b = ModelBatchLayout(
      {{"tokens", DType::int64, Placement::cpu, {Dim{std::string("B")}, Dim{std::string("S")}}}});
  BOOST_TEST(a.fingerprint() == spec().fingerprint());
  BOOST_TEST(a.fingerprint() != b.fingerprint());
}

BOOST_AUTO_TEST_SUITE_END()
