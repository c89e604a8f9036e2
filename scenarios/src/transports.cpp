// Scenarios of the transports and the dispatch (SPEC 3-8) on any Communicator: random
// meshes, readers and planner, random payloads, batches and sequence banks, each result
// checked against what every rank can regenerate from the seed or against the oracle.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "hpref/data_plane.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/model_parallel.hpp"
#include "hpref/op_signature.hpp"
#include "hpref/oracle.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/scenarios/scenario.hpp"
#include "hpref/splitmix64.hpp"
#include "mesh.hpp"

namespace hpref::scenarios {

DataTopology topology_of(const Mesh& m, int rank) {
  return DataTopology(TopologyInputs{{m.dp, m.mp}, {"dp", "cp"}, m.rank_list, rank, std::nullopt});
}

DataGroups groups_for(Communicator& c, const Mesh& m, const DataTopology& t, int planner,
                      std::optional<std::string> device) {
  GroupPlanInputs in;
  in.topology = &t;
  in.reader_ranks = m.readers;
  in.planner_rank = planner;
  in.cpu_backend = host_backend(c);
  in.communication_device = std::move(device);
  in.enable_payload_exchange = true;
  return create_data_groups(c, in);
}

FixedMesh fixed_mesh(Communicator& c, int dp, std::vector<int> readers,
                     std::optional<std::string> device) {
  Mesh m;
  m.dp = dp;
  m.mp = c.size() / dp;
  m.rank_list.resize(static_cast<std::size_t>(c.size()));
  std::iota(m.rank_list.begin(), m.rank_list.end(), 0);
  m.readers = readers.empty() ? m.rank_list : std::move(readers);
  DataTopology t = topology_of(m, c.rank());
  DataGroups groups = groups_for(c, m, t, 0, std::move(device));
  return {std::move(m), std::move(t), std::move(groups)};
}

namespace {

// ---- a random mesh, the same on every rank --------------------------------------------

Mesh make_mesh(std::uint64_t seed, int n) {
  SplitMix64 g(seed ^ 0x6d657368ULL);
  Mesh m;
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  m.dp = divisors[g.next() % divisors.size()];
  m.mp = n / m.dp;
  m.rank_list.resize(static_cast<std::size_t>(n));
  std::iota(m.rank_list.begin(), m.rank_list.end(), 0);
  for (std::size_t i = m.rank_list.size(); i > 1; --i)
    std::swap(m.rank_list[i - 1], m.rank_list[g.next() % i]);
  for (int r = 0; r < n; ++r) {
    if (g.next() % 2) m.readers.push_back(r);
  }
  if (m.readers.empty())
    m.readers.push_back(static_cast<int>(g.next() % static_cast<std::uint64_t>(n)));
  return m;
}

std::vector<int> data_plane(const Mesh& m, const DataTopology& t) {
  std::vector<int> plane = m.readers;
  plane.insert(plane.end(), t.constructor_ranks().begin(), t.constructor_ranks().end());
  std::sort(plane.begin(), plane.end());
  plane.erase(std::unique(plane.begin(), plane.end()), plane.end());
  return plane;
}

// ---- payloads ---------------------------------------------------------------------------

Value payload(std::uint64_t seed, int reader, int i) {
  SplitMix64 g(seed * 1000003 + static_cast<std::uint64_t>(reader) * 131 +
               static_cast<std::uint64_t>(i));
  std::int64_t tokens = static_cast<std::int64_t>(g.next() % 40);
  std::vector<std::uint8_t> ids(static_cast<std::size_t>(tokens) * 8), image(g.next() % 300);
  for (auto& b : ids) b = static_cast<std::uint8_t>(g.next());
  for (auto& b : image) b = static_cast<std::uint8_t>(g.next());
  return Value::mapping({
      {Value::string("input_ids"), Value::tensor(Tensor::copy_of(DType::int64, {tokens}, ids))},
      {Value::string("image"), Value::bytes(std::span<const std::uint8_t>(image))},
      {Value::string("meta"),
       Value::mapping(
           {{Value::string("reader"), Value::integer(reader)},
            {Value::string("index"), Value::integer(i)},
            {Value::string("score"), Value::floating(static_cast<double>(g.next() % 1000) / 8)}})},
  });
}

// Each reader's outgoing items: target -> items, regenerable by every rank.
std::map<int, std::vector<Item>> outgoing(std::uint64_t seed, int reader,
                                          const std::vector<int>& plane) {
  SplitMix64 g(seed ^ (0x0a7e5ULL + static_cast<std::uint64_t>(reader) * 7919));
  std::map<int, std::vector<Item>> out;
  int count = static_cast<int>(g.next() % 6);
  for (int i = 0; i < count; ++i) {
    int target = plane[g.next() % plane.size()];
    out[target].emplace_back(
        SampleKey::make(reader * 100 + i, static_cast<std::int64_t>(g.next() % 3)).to_value(),
        payload(seed, reader, i));
  }
  return out;
}

std::string same_items(const std::vector<Item>& got, const std::vector<Item>& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " items arrived, " + std::to_string(want.size()) +
           " were sent here";
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(got[i].first == want[i].first) || !(got[i].second == want[i].second))
      return "item " + std::to_string(i) + " differs";
  }
  return "";
}

// SPEC 3-5: control collectives and the exchange on a random mesh.
std::string data_plane_scenario(Communicator& c, const ScenarioContext& ctx) {
  Mesh m = make_mesh(ctx.seed, c.size());
  DataTopology t = topology_of(m, c.rank());
  auto plane = data_plane(m, t);
  m.planner = plane[SplitMix64(ctx.seed + 17).next() % plane.size()];
  DataGroups groups = groups_for(c, m, t, m.planner);
  DataPlaneTransport dp(c, groups);
  if (!dp.is_member()) return "not in the data plane";
  // SPEC 4: every data-plane rank reports a value; all see all, in rank order.
  auto all =
      dp.all_gather_object(Value::tuple({Value::integer(c.rank()), Value::string("report")}));
  check(all.size() == plane.size(),
        "all_gather_object returned " + std::to_string(all.size()) + " values");
  for (std::size_t i = 0; i < plane.size(); ++i) {
    check(all[i] == Value::tuple({Value::integer(plane[i]), Value::string("report")}),
          "all_gather_object value " + std::to_string(i) + " is wrong");
  }
  bool mine = c.rank() % 3 != 1;
  bool expect_all = std::all_of(plane.begin(), plane.end(), [](int r) { return r % 3 != 1; });
  check(dp.all_ranks_true(mine) == expect_all, "all_ranks_true disagrees with the ranks' flags");
  auto gathered = dp.gather_object_to_planner(Value::integer(c.rank() * 10));
  check(gathered.has_value() == (c.rank() == m.planner),
        "only the planner keeps the gathered values");
  Value plan = dp.broadcast_from_planner(
      c.rank() == m.planner ? Value::string("plan from " + std::to_string(m.planner)) : Value());
  check(plan == Value::string("plan from " + std::to_string(m.planner)),
        "broadcast_from_planner gave another value");
  // SPEC 5: readers send, everyone in the plane receives exactly what was sent to it.
  bool reader = std::find(m.readers.begin(), m.readers.end(), c.rank()) != m.readers.end();
  auto prepared = dp.prepare_exchange(reader ? outgoing(ctx.seed, c.rank(), plane)
                                             : std::map<int, std::vector<Item>>{});
  auto work = dp.begin_exchange(std::move(prepared));
  std::vector<Item> got = work.wait();
  check(&work.wait() == &work.wait(), "the exchange handle must decode once");
  std::vector<Item> want;
  for (int sender : plane) {
    if (std::find(m.readers.begin(), m.readers.end(), sender) == m.readers.end()) continue;
    auto out = outgoing(ctx.seed, sender, plane);
    auto it = out.find(c.rank());
    if (it != out.end()) want.insert(want.end(), it->second.begin(), it->second.end());
  }
  std::string diff = same_items(got, want);
  check(diff.empty(), "rank " + std::to_string(c.rank()) + " exchange: " + diff);
  return "ok received=" + std::to_string(got.size());
}

// SPEC 5.1-5.2 refusals, the same on every rank so that no rank is left waiting.
std::string exchange_refusals(Communicator& c, const ScenarioContext&) {
  FixedMesh f = fixed_mesh(c, c.size(), {});  // every rank reads and constructs
  const std::vector<int>& everyone = f.mesh.rank_list;
  TransportOptions small;
  small.max_message_bytes = 64;
  DataPlaneTransport dp(c, f.groups, small);
  try {
    dp.prepare_exchange({{c.size() + 5, {}}, {-1, {}}});
    check(false, "a target outside the data plane was accepted");
  } catch (const Error& e) {
    check(e.code() == Errc::transport_targets &&
              std::string(e.what()).find("[-1, " + std::to_string(c.size() + 5) + "]") !=
                  std::string::npos,
          std::string("wrong refusal of outside targets: ") + e.what());
  }
  std::map<int, std::vector<Item>> big;  // every rank sends everyone more than 64 bytes
  for (int r : everyone) {
    big[r].emplace_back(SampleKey::make(c.rank(), r).to_value(),
                        Value::bytes(std::string(100, 'x')));
  }
  try {
    dp.exchange(dp.prepare_exchange(big));
    check(false, "an announced size over max_message_bytes was accepted");
  } catch (const Error& e) {
    // SPEC 5.2: every rank refuses its own first oversized outgoing segment, to rank 0.
    check(e.code() == Errc::transport_size_limit &&
              std::string(e.what()).find("outgoing payload segment of ") != std::string::npos &&
              std::string(e.what()).find(" to rank 0 exceeds max_message_bytes 64") !=
                  std::string::npos,
          std::string("wrong refusal of an oversized segment: ") + e.what());
  }
  return "ok refused";
}

// SPEC 5.2 (ours): the refusal is agreed. Ranks in `refusing` raise their own
// transport_size_limit (whose message must contain `own`); every other rank raises
// exchange_refused naming `refusing`; then a small exchange shows that no rank is left in
// (or missed) a byte exchange.
std::string expect_agreed_refusal(Communicator& c, DataPlaneTransport& dp,
                                  const std::map<int, std::vector<Item>>& out,
                                  const std::vector<int>& refusing, const std::string& own) {
  bool refuses = std::find(refusing.begin(), refusing.end(), c.rank()) != refusing.end();
  std::string kind;
  try {
    dp.exchange(dp.prepare_exchange(out));
    check(false, "rank " + std::to_string(c.rank()) +
                     ": an exchange with a segment over the limit went through");
  } catch (const Error& e) {
    std::string what = e.what();
    kind = std::string(e.kind());
    if (refuses) {
      check(e.code() == Errc::transport_size_limit && what.find(own) != std::string::npos,
            "refusing rank " + std::to_string(c.rank()) + " got " + kind + ": " + what);
    } else {
      check(e.code() == Errc::exchange_refused &&
                what.find("ranks " + rank_list_text(refusing)) != std::string::npos,
            "rank " + std::to_string(c.rank()) + " should be told that " +
                rank_list_text(refusing) + " refused, got " + kind + ": " + what);
    }
  }
  std::map<int, std::vector<Item>> small;
  for (int r : dp.ranks())
    small[r].emplace_back(SampleKey::make(c.rank(), r).to_value(), Value::integer(c.rank()));
  auto got = dp.exchange(dp.prepare_exchange(small));
  check(got.size() == dp.ranks().size(),
        "rank " + std::to_string(c.rank()) + ": the exchange after a refusal lost items");
  for (std::size_t i = 0; i < got.size(); ++i) {
    check(got[i].second == Value::integer(dp.ranks()[i]),
          "rank " + std::to_string(c.rank()) +
              ": the exchange after a refusal delivered a wrong item");
  }
  return "ok " + kind;
}

// One sender (the last rank) builds a segment over the limit for itself: only it refuses.
std::string exchange_sender_refuses(Communicator& c, const ScenarioContext& ctx) {
  FixedMesh f = fixed_mesh(c, c.size(), {});
  TransportOptions options;
  options.max_message_bytes = 512;
  DataPlaneTransport dp(c, f.groups, options);
  int sender = c.size() - 1;
  std::map<int, std::vector<Item>> out;
  for (int r : dp.ranks()) {  // small items to everyone; the sender's own segment is large
    std::size_t bytes = r == c.rank() && r == sender ? 600 + ctx.seed % 100 : ctx.seed % 40;
    out[r].emplace_back(SampleKey::make(c.rank(), r).to_value(),
                        Value::bytes(std::string(bytes, 'q')));
  }
  return expect_agreed_refusal(c, dp, out, {sender}, "outgoing payload segment of ");
}

// Rank 0's segment for one receiver is over the limit: the sender refuses its outgoing
// segment, the receiver the announced size, every bystander is told both.
std::string exchange_receiver_refuses(Communicator& c, const ScenarioContext& ctx) {
  FixedMesh f = fixed_mesh(c, c.size(), {});
  TransportOptions options;
  options.max_message_bytes = 512;
  DataPlaneTransport dp(c, f.groups, options);
  int receiver = 1 + static_cast<int>(ctx.seed % static_cast<std::uint64_t>(c.size() - 1));
  std::map<int, std::vector<Item>> out;
  for (int r : dp.ranks()) {
    std::size_t bytes = c.rank() == 0 && r == receiver ? 700 : 10;
    out[r].emplace_back(SampleKey::make(c.rank(), r).to_value(),
                        Value::bytes(std::string(bytes, 'r')));
  }
  std::string own = c.rank() == 0
                        ? " from rank 0 to rank " + std::to_string(receiver) + " exceeds"
                        : " announced by rank 0 for rank " + std::to_string(receiver) + " exceeds";
  return expect_agreed_refusal(c, dp, out, {0, receiver}, own);
}

// SPEC 4 (ours): one rank configures another max_message_bytes; every rank refuses at
// construction, naming the ranks and their values.
std::string transport_limit_mismatch(Communicator& c, const ScenarioContext& ctx) {
  FixedMesh f = fixed_mesh(c, c.size(), {});
  int odd = static_cast<int>(ctx.seed % static_cast<std::uint64_t>(c.size()));
  TransportOptions options;
  if (c.rank() == odd) options.max_message_bytes = 4096;
  std::vector<int> rest;
  for (int r = 0; r < c.size(); ++r) {
    if (r != odd) rest.push_back(r);
  }
  try {
    DataPlaneTransport dp(c, f.groups, options);
    check(false, "rank " + std::to_string(c.rank()) + " accepted a max_message_bytes mismatch");
  } catch (const Error& e) {
    std::string what = e.what();
    check(e.code() == Errc::transport_limit_mismatch &&
              what.find("4096 on ranks [" + std::to_string(odd) + "]") != std::string::npos &&
              what.find("1073741824 on ranks " + rank_list_text(rest)) != std::string::npos,
          "rank " + std::to_string(c.rank()) + " got " + what);
  }
  return "ok refused";
}

// The same agreement over a host model-parallel group (SPEC 4 with 6.1).
std::string batch_limit_mismatch(Communicator& c, const ScenarioContext&);

// SPEC 4.1: values of unequal pickled sizes (empty to a few KiB) are padded to the
// largest for the byte all-gather and each decoded from its own prefix.
std::string object_all_gather_unequal(Communicator& c, const ScenarioContext& ctx) {
  FixedMesh f = fixed_mesh(c, c.size(), {});
  DataPlaneTransport dp(c, f.groups);
  auto value = [&](int rank) {
    SplitMix64 g(ctx.seed * 31 + static_cast<std::uint64_t>(rank));
    std::size_t bytes = rank == 0 ? 0 : g.next() % (rank % 2 ? 4000 : 40);
    std::string text(bytes, static_cast<char>('a' + rank % 26));
    std::vector<Value> list;
    for (std::uint64_t i = 0, k = g.next() % 5; i < k; ++i)
      list.push_back(Value::integer(static_cast<std::int64_t>(g.next() >> 2)));
    return Value::tuple(
        {Value::integer(rank), Value::bytes(std::string_view(text)), Value::list(std::move(list))});
  };
  std::size_t total = 0;
  for (int round = 0; round < 2; ++round) {  // twice: the second reuses nothing of the first
    auto all = dp.all_gather_object(value(c.rank()));
    check(all.size() == static_cast<std::size_t>(c.size()),
          "all_gather_object returned " + std::to_string(all.size()) + " values");
    for (int r = 0; r < c.size(); ++r) {
      check(all[static_cast<std::size_t>(r)] == value(r), "rank " + std::to_string(c.rank()) +
                                                              ": the value gathered from rank " +
                                                              std::to_string(r) + " differs");
    }
    total = all.size();
  }
  return "ok values=" + std::to_string(total);
}

// ---- SPEC 6: the batch broadcast ----------------------------------------------------------

ModelBatchLayout batch_layout(bool other = false) {
  return ModelBatchLayout({
      {"tokens",
       DType::int64,
       Placement::accelerator,
       {Dim{std::string("B")}, Dim{std::string("S")}}},
      {"mask",
       DType::boolean,
       Placement::accelerator,
       {Dim{std::string("B")}, Dim{std::string("S")}}},
      {"image",
       DType::uint8,
       Placement::cpu,
       {Dim{std::string("N")}, Dim{std::int64_t{other ? 4 : 3}}}},
  });
}

Value make_batch(std::uint64_t seed, int step) {
  SplitMix64 g(seed * 77 + static_cast<std::uint64_t>(step));
  std::int64_t b = 1 + static_cast<std::int64_t>(g.next() % 3),
               s = static_cast<std::int64_t>(g.next() % 9);
  std::int64_t n = static_cast<std::int64_t>(g.next() % 4);
  auto bytes = [&](std::size_t count) {
    std::vector<std::uint8_t> v(count);
    for (auto& x : v) x = static_cast<std::uint8_t>(g.next());
    return v;
  };
  auto mask = bytes(static_cast<std::size_t>(b * s));
  for (auto& x : mask) x &= 1;
  return Value::mapping({
      {Value::string("tokens"),
       Value::tensor(
           Tensor::copy_of(DType::int64, {b, s}, bytes(static_cast<std::size_t>(b * s * 8))))},
      {Value::string("mask"), Value::tensor(Tensor::copy_of(DType::boolean, {b, s}, mask))},
      {Value::string("image"), Value::tensor(Tensor::copy_of(
                                   DType::uint8, {n, 3}, bytes(static_cast<std::size_t>(n * 3))))},
  });
}

std::string batch_broadcast(Communicator& c, const ScenarioContext& ctx) {
  Mesh m = make_mesh(ctx.seed, c.size());
  DataTopology t = topology_of(m, c.rank());
  DataGroups groups = groups_for(c, m, t, t.constructor_ranks()[0]);
  ModelParallelTransport mp(c, t, groups, batch_layout());
  int steps = 4;
  for (int step = 0; step < steps; ++step) {  // batches: identical on every peer, bit for bit
    std::optional<Value> mine;
    if (mp.is_constructor())
      mine = make_batch(ctx.seed + static_cast<std::uint64_t>(t.data_rank()), step);
    auto got = mp.broadcast(mine);
    check(got.has_value(), "a batch step ended as end of data");
    check(*got == make_batch(ctx.seed + static_cast<std::uint64_t>(t.data_rank()), step),
          "rank " + std::to_string(c.rank()) + " step " + std::to_string(step) +
              ": the batch differs from the constructor's");
  }
  check(!mp.broadcast(std::nullopt).has_value(), "end of data did not end every peer");
  // A constructor failure ends every peer; no peer enters a field broadcast (the barrier
  // right after would then mismatch).
  std::exception_ptr failure;
  if (mp.is_constructor())
    failure = std::make_exception_ptr(Error(Errc::scenario_check, "reader lost its shard"));
  try {
    mp.broadcast(std::nullopt, failure);
    check(false, "a failed constructor's batch was accepted");
  } catch (const Error& e) {
    bool own = mp.is_constructor() || t.model_parallel_ranks().size() == 1;
    check(own ? std::string(e.what()) == "reader lost its shard"
              : e.code() == Errc::transport_constructor_failed,
          std::string("after a constructor failure rank ") + std::to_string(c.rank()) + " got " +
              e.what());
  }
  c.barrier(c.world()).wait();
  return "ok steps=" + std::to_string(steps);
}

std::string batch_spec_mismatch(Communicator& c, const ScenarioContext&) {
  FixedMesh f = fixed_mesh(c, 1, {0});  // one model-parallel group of every rank
  ModelParallelTransport mp(c, f.topology, f.groups, batch_layout(c.rank() == c.size() - 1));
  return "unreachable";
}

std::string batch_limit_mismatch(Communicator& c, const ScenarioContext& ctx) {
  FixedMesh f = fixed_mesh(c, 1, {0});  // one model-parallel group of every rank
  int odd = static_cast<int>(ctx.seed % static_cast<std::uint64_t>(c.size()));
  TransportOptions options;
  if (c.rank() == odd) options.max_message_bytes = 1000;
  try {
    ModelParallelTransport mp(c, f.topology, f.groups, batch_layout(), options);
    check(false, "rank " + std::to_string(c.rank()) + " accepted a max_message_bytes mismatch");
  } catch (const Error& e) {
    std::string what = e.what();
    check(e.code() == Errc::transport_limit_mismatch &&
              what.find("1000 on ranks [" + std::to_string(odd) + "]") != std::string::npos &&
              what.find("1073741824 on ranks [") != std::string::npos,
          "rank " + std::to_string(c.rank()) + " got " + what);
  }
  return "ok refused";
}

// ---- SPEC 8: dispatch -----------------------------------------------------------------

std::string dispatch_scenario(Communicator& c, const ScenarioContext& ctx) {
  SplitMix64 g(ctx.seed ^ 0xd15ba7c4ULL);
  int p = c.size();
  std::int64_t local = 1 + static_cast<std::int64_t>(g.next() % 8);
  std::vector<std::int64_t> b = {0};
  while (b.back() < local * p)
    b.push_back(
        std::min(local * p, b.back() + 1 + static_cast<std::int64_t>(g.next() % (2 * local + 3))));
  DType types[] = {DType::float32, DType::float64,  DType::int64,
                   DType::int32,   DType::bfloat16, DType::float16};
  DType dtype = types[g.next() % 6];
  std::vector<std::int64_t> shape = {local, 1 + static_cast<std::int64_t>(g.next() % 3),
                                     1 + static_cast<std::int64_t>(g.next() % 4)};
  std::size_t axis = g.next() % 3;  // the sequence dim, anywhere; given negative half the time
  std::swap(shape[0], shape[axis]);
  int dim = g.next() % 2 ? static_cast<int>(axis) : static_cast<int>(axis) - 3;
  std::vector<Route> routes =
      g.next() % 2
          ? sliding_window_routes(b, local, p, 1 + static_cast<std::int64_t>(g.next() % 12))
          : document_prefix_routes(b, local, p, 1 + static_cast<std::int64_t>(g.next() % 2));
  const Route& mine = routes[static_cast<std::size_t>(c.rank())];
  // The global bank (sequence first), regenerable everywhere; this rank owns its shard.
  auto owners = route_owner_offsets(routes);
  std::vector<std::int64_t> bank_shape = {owners.back(), shape[axis == 0 ? 1 : 0],
                                          shape[axis == 2 ? 1 : 2]};
  std::size_t row = static_cast<std::size_t>(bank_shape[1] * bank_shape[2]) * element_size(dtype);
  auto fill = [&](std::uint64_t stream, std::size_t bytes) {
    std::vector<std::uint8_t> v(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      v[i] = data_byte(ctx.seed, stream, i) & 0x3f;  // small values: no inf/nan
    return v;
  };
  Tensor bank(dtype, bank_shape,
              SharedBytes::adopt(fill(1, static_cast<std::size_t>(owners.back()) * row)));
  auto shard_rows = [&](const Tensor& t, std::int64_t start, std::int64_t count) {
    return Tensor(t.dtype(), std::vector<std::int64_t>{count, t.shape()[1], t.shape()[2]},
                  t.storage().slice(static_cast<std::size_t>(start) * row,
                                    static_cast<std::size_t>(count) * row));
  };
  // On an accelerator world the rows are accelerator tensors (SPEC 9.1).
  Device device;
  if (c.world().memory() == MemorySpace::accelerator) device = Device{DeviceType::cuda, 0};
  Tensor shard =
      move_front_to_axis(
          shard_rows(bank, owners[static_cast<std::size_t>(c.rank())], mine.local_length), axis)
          .on(device);
  DispatchHandle handle = async_sequence_dispatch(c, c.world(), shard, dim, mine);
  Tensor out = handle.wait();
  try {
    handle.wait();
    check(false, "a second wait() on a dispatch handle was accepted");
  } catch (const Error& e) {
    check(e.code() == Errc::dispatch_reused, std::string("second wait: ") + e.what());
  }
  auto expected = oracle_forward(bank, routes);
  check(move_axis_to_front(out, axis) == expected[static_cast<std::size_t>(c.rank())],
        "rank " + std::to_string(c.rank()) + ": forward output differs from the oracle");
  // Backward: every rank's output gradient is regenerable, so every rank knows the oracle.
  std::vector<Tensor> grads;
  for (int r = 0; r < p; ++r) {
    std::int64_t rows = routes[static_cast<std::size_t>(r)].global_end -
                        routes[static_cast<std::size_t>(r)].global_start;
    grads.emplace_back(dtype, std::vector<std::int64_t>{rows, bank_shape[1], bank_shape[2]},
                       SharedBytes::adopt(fill(100 + static_cast<std::uint64_t>(r),
                                               static_cast<std::size_t>(rows) * row)));
  }
  Tensor grad_in = sequence_dispatch_backward(
      c, c.world(), move_front_to_axis(grads[static_cast<std::size_t>(c.rank())], axis).on(device),
      dim, mine);
  auto want = oracle_backward(grads, routes);
  check(move_axis_to_front(grad_in, axis) == want[static_cast<std::size_t>(c.rank())],
        "rank " + std::to_string(c.rank()) + ": backward gradient differs from the oracle");
  return "ok rows=" + std::to_string(out.shape()[axis]);
}

// A dispatch handle and Works dropped unwaited (an exception between launch and wait):
// each operation still completes before the memory it writes is freed (the handle's own
// buffers; a checked or float all_reduce's result), and the operations after them are
// undisturbed. Over MPI that memory was freed under the running request: the job crashed.
std::string dropped_unwaited(Communicator& c, const ScenarioContext& ctx) {
  int p = c.size();
  // Shards of ctx.large_bytes (128 KiB), each sent whole to the next rank: MPI is still
  // moving them when the handle is dropped.
  std::int64_t width = 8;
  auto local = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(ctx.large_bytes /
                                   (sizeof(float) * static_cast<std::size_t>(width))));
  std::vector<std::int64_t> boundaries = {0, local * p};
  std::vector<Route> routes = sliding_window_routes(boundaries, local, p, local);
  const Route& mine = routes[static_cast<std::size_t>(c.rank())];
  std::vector<float> values(static_cast<std::size_t>(local * p * width));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(data_byte(ctx.seed, 7, i));
  std::vector<std::uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  Tensor bank(DType::float32, {local * p, width}, SharedBytes::adopt(std::move(bytes)));
  std::size_t row = static_cast<std::size_t>(width) * sizeof(float);
  Device device;
  if (c.world().memory() == MemorySpace::accelerator) device = Device{DeviceType::cuda, 0};
  Tensor shard = Tensor(DType::float32, std::vector<std::int64_t>{local, width},
                        bank.storage().slice(static_cast<std::size_t>(c.rank() * local) * row,
                                             static_cast<std::size_t>(local) * row))
                     .on(device);
  { DispatchHandle dropped = async_sequence_dispatch(c, c.world(), shard, 0, mine); }
  if (c.world().memory() == MemorySpace::host) {
    std::vector<std::int64_t> ints(ctx.large_bytes / 8 + 1, c.rank() + 1);
    std::vector<double> floats(ctx.large_bytes / 8 + 1, 0.25 * (c.rank() + 1));
    Work a = c.all_reduce(c.world(), {ints.data(), 8 * ints.size(), MemorySpace::host},
                          DType::int64, ReduceOp::sum);
    Work b = c.all_reduce(c.world(), {floats.data(), 8 * floats.size(), MemorySpace::host},
                          DType::float64, ReduceOp::sum);
  }  // the Works end before the buffers they write
  Tensor out = sequence_dispatch(c, c.world(), shard, 0, mine);
  check(out == oracle_forward(bank, routes)[static_cast<std::size_t>(c.rank())],
        "rank " + std::to_string(c.rank()) +
            ": the dispatch after the dropped ones differs from "
            "the oracle");
  return "the dispatch after them equals the oracle";
}

// SPEC 5.2 / 9.3: the exchange handle owns its send buffer; writing it before the wait is
// caught at the wait.
std::string exchange_mutated_send(Communicator& c, const ScenarioContext&) {
  FixedMesh f = fixed_mesh(c, c.size(), {});
  const std::vector<int>& everyone = f.mesh.rank_list;
  DataPlaneTransport dp(c, f.groups);
  std::map<int, std::vector<Item>> out;
  for (int r : everyone)
    out[r].emplace_back(SampleKey::make(c.rank(), r).to_value(),
                        Value::bytes(std::string(16, 'a')));
  auto prepared = dp.prepare_exchange(out);
  auto buffer = prepared.send;  // a bug: keeping a pointer to the handle's buffer
  auto work = dp.begin_exchange(std::move(prepared));
  if (c.rank() == 0) (*buffer)[buffer->size() - 1] ^= 1;
  work.wait();
  return "unreachable on rank 0";
}

// The data-plane and model-parallel scenarios use host groups; the dispatch runs on the
// world's own backend.
const Registration registered(
    2,
    {
        {.name = "data_plane",
         .description = "a random mesh, readers and planner: control collectives and the payload "
                        "exchange, every item arriving exactly once where it was sent",
         .fn = data_plane_scenario,
         .needs_host_groups = true},
        {.name = "exchange_refusals",
         .description = "targets outside the data plane and oversized announced sizes are refused "
                        "on every rank, before anything is allocated",
         .fn = exchange_refusals,
         .min_ranks = 2,
         .needs_host_groups = true},
        {.name = "exchange_sender_refuses",
         .description = "one sender's own segment is over max_message_bytes: it alone refuses, "
                        "every other rank is told who refused, nobody enters the byte exchange",
         .fn = exchange_sender_refuses,
         .min_ranks = 2,
         .needs_host_groups = true},
        {.name = "exchange_receiver_refuses",
         .description = "rank 0's segment for one receiver is over max_message_bytes: sender "
                        "and receiver refuse, every bystander is told who refused",
         .fn = exchange_receiver_refuses,
         .min_ranks = 3,
         .needs_host_groups = true},
        {.name = "transport_limit_mismatch",
         .description = "one rank configures another max_message_bytes: every rank refuses "
                        "at construction, naming the ranks and their values",
         .fn = transport_limit_mismatch,
         .min_ranks = 2,
         .needs_host_groups = true},
        {.name = "batch_limit_mismatch",
         .description = "one model-parallel rank configures another max_message_bytes: every "
                        "rank refuses at construction",
         .fn = batch_limit_mismatch,
         .min_ranks = 2,
         .needs_host_groups = true},
        {.name = "object_all_gather_unequal",
         .description = "all_gather_object of values of unequal pickled sizes, padded to the "
                        "largest and decoded from each prefix",
         .fn = object_all_gather_unequal,
         .needs_host_groups = true},
        {.name = "batch_broadcast",
         .description = "model-parallel batches identical on every peer, end of data, and a "
                        "constructor failure that ends every peer before any field broadcast",
         .fn = batch_broadcast,
         .needs_host_groups = true},
        {.name = "dispatch",
         .description = "sequence dispatch forward and backward for window and prefix routes, "
                        "random row widths, dtypes and sequence dims, against the oracle",
         .fn = dispatch_scenario},
        {.name = "dropped_unwaited",
         .description = "a dispatch handle and all_reduce Works dropped unwaited: each completes "
                        "before its memory is freed, and the dispatch after them equals the oracle",
         .fn = dropped_unwaited},
        {.name = "batch_spec_mismatch",
         .description = "BROKEN on purpose: one rank declares another batch spec",
         .fn = batch_spec_mismatch,
         .min_ranks = 2,
         .on_simulator = Expect::check_failed,
         .on_device = Expect::check_failed},
        // MPI's checked mode compares send checksums too.
        {.name = "exchange_mutated_send",
         .description = "BROKEN on purpose: rank 0 writes the exchange's send buffer before "
                        "waiting",
         .fn = exchange_mutated_send,
         .min_ranks = 2,
         .on_simulator = Expect::check_failed,
         .on_device = Expect::check_failed},
    });

}  // namespace

}  // namespace hpref::scenarios
