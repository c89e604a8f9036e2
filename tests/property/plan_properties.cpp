// Properties of SPEC 3.1-3.2 and 6: the group plan on random meshes is identical on every
// rank and gives each rank exactly the groups it belongs to; batch layouts round-trip.
#define BOOST_TEST_DYN_LINK
#include <rapidcheck/boost_test.h>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "hpref/error.hpp"
#include "hpref/group_plan.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/topology.hpp"

using namespace hpref;

namespace {

struct Mesh {
  std::vector<std::int64_t> shape;
  std::vector<std::string> names;
  std::vector<int> rank_list;
};

rc::Gen<Mesh> meshes() {
  return rc::gen::exec([] {
    Mesh m;
    std::vector<std::string> pool = {"dp_replicate", "dp_shard", "dp", "cp", "tp", "pp"};
    auto dims = *rc::gen::inRange<std::size_t>(1, 4);
    std::vector<std::size_t> pick(pool.size());
    std::iota(pick.begin(), pick.end(), 0);
    for (std::size_t i = 0; i < dims; ++i) {
      std::swap(pick[i], pick[*rc::gen::inRange<std::size_t>(i, pick.size())]);
      m.names.push_back(pool[pick[i]]);
      m.shape.push_back(*rc::gen::inRange<std::int64_t>(1, 4));
    }
    int total = static_cast<int>(
        std::accumulate(m.shape.begin(), m.shape.end(), std::int64_t{1}, std::multiplies<>()));
    m.rank_list.resize(static_cast<std::size_t>(total));
    std::iota(m.rank_list.begin(), m.rank_list.end(), 0);
    for (std::size_t i = m.rank_list.size(); i > 1; --i) {
      std::swap(m.rank_list[i - 1], m.rank_list[*rc::gen::inRange<std::size_t>(0, i)]);
    }
    return m;
  });
}

}  // namespace

RC_BOOST_PROP(group_plan_is_identical_on_every_rank_and_exact_spec_3_2, ()) {
  Mesh m = *meshes();
  int world = static_cast<int>(m.rank_list.size());
  auto readers = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, world));
  bool exchange = *rc::gen::arbitrary<bool>();
  auto device = *rc::gen::element<std::optional<std::string>>(std::nullopt, std::string("cpu"),
                                                              std::string("cuda:0"));
  auto payload = *rc::gen::element<std::optional<std::string>>(
      std::nullopt, std::string("gloo"), std::string("nccl"), std::string("mpi"));
  auto model = *rc::gen::element<std::optional<std::string>>(std::nullopt, std::string("cpu"),
                                                             std::string("cuda"));
  auto cpu = *rc::gen::element<std::string>("gloo", "sim", "mpi");
  // SPEC 3.2: backend names match case-insensitively. Every rank gets the same spelling in
  // mixed case; its plan must be the plan of the lower-case names (names kept as spelled).
  auto spell = [](const std::string& name) {
    std::string out = name;
    for (char& c : out) {
      if (*rc::gen::arbitrary<bool>())
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
  };
  std::string cpu_spelled = spell(cpu);
  std::optional<std::string> payload_spelled =
      payload ? std::optional<std::string>(spell(*payload)) : std::nullopt;
  std::string world_spelled = spell("nccl");
  auto same_name = [](const std::string& a, const std::string& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
      return std::tolower(x) == std::tolower(y);
    });
  };
  auto same_plan = [&](const GroupPlan& a, const GroupPlan& b) {
    if (a.creations.size() != b.creations.size()) return false;
    for (std::size_t i = 0; i < a.creations.size(); ++i) {
      if (a.creations[i].role != b.creations[i].role ||
          a.creations[i].ranks != b.creations[i].ranks ||
          !same_name(a.creations[i].backend, b.creations[i].backend)) {
        return false;
      }
    }
    auto same_opt = [&](const std::optional<std::string>& x, const std::optional<std::string>& y) {
      return x.has_value() == y.has_value() && (!x || same_name(*x, *y));
    };
    return a.data_plane_ranks == b.data_plane_ranks && a.control == b.control &&
           a.payload == b.payload && a.model_parallel == b.model_parallel &&
           a.model_parallel_tensor == b.model_parallel_tensor &&
           a.payload_reuses_control == b.payload_reuses_control &&
           same_opt(a.payload_backend, b.payload_backend) &&
           same_opt(a.tensor_backend, b.tensor_backend);
  };
  std::vector<GroupPlan> plans;
  std::vector<DataTopology> topologies;
  topologies.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    topologies.emplace_back(TopologyInputs{m.shape, m.names, m.rank_list, r, std::nullopt});
  }
  std::vector<int> plane_guess = readers;
  for (int c : topologies[0].constructor_ranks()) plane_guess.push_back(c);
  int planner = plane_guess[*rc::gen::inRange<std::size_t>(0, plane_guess.size())];
  for (int r = 0; r < world; ++r) {
    GroupPlanInputs in;
    in.topology = &topologies[static_cast<std::size_t>(r)];
    in.reader_ranks = readers;
    in.planner_rank = planner;
    in.cpu_backend = cpu;
    in.payload_backend = payload;
    in.communication_device = device;
    in.enable_payload_exchange = exchange;
    in.model_device = model;
    in.world_size = world;
    in.rank = r;
    in.world_backend = "nccl";
    GroupPlanInputs spelled = in;
    spelled.cpu_backend = cpu_spelled;
    spelled.payload_backend = payload_spelled;
    spelled.world_backend = world_spelled;
    std::optional<GroupPlan> lower_plan;
    try {
      lower_plan = plan_groups(in);
    } catch (const Error& e) {
      // Every rank must refuse the same configuration, with the same kind, however spelled.
      RC_ASSERT(e.code() == Errc::group_payload_device);
      RC_ASSERT(plans.empty());
      try {
        plan_groups(spelled);
        RC_FAIL("the mixed-case spelling was planned, the lower-case one refused");
      } catch (const Error& e2) {
        RC_ASSERT(e2.code() == e.code());
      }
      RC_TAG("refused");
      return;
    }
    try {
      plans.push_back(plan_groups(spelled));
    } catch (const Error& e) {
      RC_FAIL(std::string("the mixed-case spelling was refused: ") + e.what());
    }
    RC_ASSERT(same_plan(plans.back(), *lower_plan));
  }
  RC_TAG("planned");
  for (const GroupPlan& p : plans) {
    RC_ASSERT(p.creations == plans[0].creations);
    RC_ASSERT(p.data_plane_ranks == plans[0].data_plane_ranks);
  }
  for (int r = 0; r < world; ++r) {
    const GroupPlan& p = plans[static_cast<std::size_t>(r)];
    auto holds = [&](std::optional<std::size_t> i) {
      return i && std::find(p.creations[*i].ranks.begin(), p.creations[*i].ranks.end(), r) !=
                      p.creations[*i].ranks.end();
    };
    for (std::size_t i = 0; i < p.creations.size(); ++i) {
      const GroupCreation& c = p.creations[i];
      bool member = std::find(c.ranks.begin(), c.ranks.end(), r) != c.ranks.end();
      std::optional<std::size_t> kept;
      switch (c.role) {
        case GroupRole::control:
          kept = p.control;
          break;
        case GroupRole::payload:
          kept = p.payload;
          break;
        case GroupRole::model_parallel_host:
          kept = p.model_parallel;
          break;
        case GroupRole::model_parallel_tensor:
          kept = p.model_parallel_tensor;
          break;
      }
      RC_ASSERT((kept == i) == member);
    }
    for (auto handle : {p.control, p.payload, p.model_parallel, p.model_parallel_tensor}) {
      if (handle) RC_ASSERT(holds(handle));
    }
    // The model-parallel host group this rank keeps is its own topology group.
    const auto& mine = topologies[static_cast<std::size_t>(r)].model_parallel_ranks();
    RC_ASSERT(p.model_parallel.has_value() == (mine.size() > 1));
  }
}

RC_BOOST_PROP(batch_layout_flatten_rebuild_round_trip_spec_6_2, ()) {
  auto symbols = std::vector<std::string>{"a", "b", "c"};
  auto nfields = *rc::gen::inRange<std::size_t>(1, 5);
  std::vector<FieldSpec> fields;
  for (std::size_t f = 0; f < nfields; ++f) {
    FieldSpec spec{"f" + std::to_string(f),
                   dtype_at(*rc::gen::inRange(0, kDTypeCount)),
                   *rc::gen::element(Placement::cpu, Placement::accelerator),
                   {}};
    auto rank = *rc::gen::inRange<std::size_t>(0, 4);
    for (std::size_t d = 0; d < rank; ++d) {
      spec.dims.push_back(*rc::gen::arbitrary<bool>()
                              ? Dim{*rc::gen::element(symbols[0], symbols[1], symbols[2])}
                              : Dim{*rc::gen::inRange<std::int64_t>(0, 4)});
    }
    fields.push_back(spec);
  }
  ModelBatchLayout layout(fields);
  std::vector<std::int64_t> values(layout.symbols().size());
  for (auto& v : values) v = *rc::gen::inRange<std::int64_t>(0, 4);
  std::vector<std::int64_t> header = {kBatch};
  header.insert(header.end(), values.begin(), values.end());
  auto shapes = layout.shapes(header, 1 << 20);
  std::vector<Tensor> tensors;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    std::int64_t n = *checked_numel(shapes[f]);
    // Each field's own bytes (field index, byte index), so that a flatten that swapped or
    // mixed two fields of one dtype and shape would not give the same tensors back.
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n) * element_size(fields[f].dtype));
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<std::uint8_t>(31 * f + i + 1);
    tensors.push_back(Tensor::copy_of(fields[f].dtype, shapes[f], bytes));
  }
  Value batch = layout.rebuild(tensors);
  auto flat = layout.flatten(batch);
  // Symbols that appear in no non-empty position still round-trip: every symbol is bound.
  RC_ASSERT(layout.header(flat) == header);
  RC_ASSERT(flat.tensors.size() == tensors.size());
  for (std::size_t f = 0; f < tensors.size(); ++f) {
    RC_ASSERT(flat.tensors[f].dtype() == tensors[f].dtype());
    RC_ASSERT(std::ranges::equal(flat.tensors[f].shape(), tensors[f].shape()));
    RC_ASSERT(std::ranges::equal(flat.tensors[f].bytes(), tensors[f].bytes()));
  }
  RC_ASSERT(layout.rebuild(flat.tensors) == batch);
}
