// The data step behind `hpref demo` (see cluster_demo.hpp).
#include "cluster_demo.hpp"

#include <sys/mman.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>

#include "hpref/cli/json_value.hpp"
#include "hpref/codec.hpp"
#include "hpref/data_plane.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/error.hpp"
#include "hpref/model_parallel.hpp"
#include "hpref/oracle.hpp"
#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/scenarios/harness.hpp"
#include "hpref/sim/cluster.hpp"
#include "sim_command.hpp"

namespace hpref::cli {
namespace {

constexpr int kSamplesPerReader = 16;
constexpr std::int64_t kWidth = 16;  // row width of the sequence banks (float32)

struct Counters {
  std::int64_t samples = 0, bytes = 0, passed = 0, failed = 0;
  double before = 0, after = 0;  // token imbalance, summed over steps (planner only)
  // FNV-1a over every batch and dispatch result this rank holds, in step order: the same
  // on every backend for the same seed.
  std::uint64_t data = 0xcbf29ce484222325ULL;
  void fold(const Tensor& t) { data = fnv1a64(t.bytes().data(), t.nbytes(), data); }
};

class Checks {
 public:
  explicit Checks(Counters& c) : c_(c) {}
  void operator()(bool ok, const std::string& what, int rank) {
    if (ok) {
      ++c_.passed;
    } else {
      ++c_.failed;
      std::fprintf(stderr, "CHECK FAILED on rank %d: %s\n", rank, what.c_str());
    }
  }

 private:
  Counters& c_;
};

// ---- the synthetic corpus -------------------------------------------------------------

struct Sample {
  Value key;
  std::int64_t tokens;
  Value value;
};

Sample make_sample(std::uint64_t seed, int step, int reader, int i) {
  SplitMix64 g(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(step) * 1000003 +
               static_cast<std::uint64_t>(reader) * 131 + static_cast<std::uint64_t>(i));
  std::int64_t id = step * 100000 + reader * 1000 + i;
  std::int64_t tokens =
      16 + static_cast<std::int64_t>(g.next() % 1009);  // variable-length documents
  std::vector<std::uint8_t> ids(static_cast<std::size_t>(tokens) * 8), image(256 + g.next() % 4096);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t token = static_cast<std::int64_t>(g.next() % 50257);
    std::memcpy(ids.data() + t * 8, &token, 8);
  }
  for (auto& b : image) b = static_cast<std::uint8_t>(g.next());
  Value meta = Value::mapping({
      {Value::string("source"), Value::string(id % 3 ? "web/crawl-2026-10" : "books/ü-set")},
      {Value::string("quality"), Value::floating(static_cast<double>(g.next() % 1000) / 1000.0)},
      {Value::string("tags"),
       Value::list({Value::string("en"), Value::string(tokens > 100 ? "long" : "short")})},
  });
  Value value = Value::mapping({
      {Value::string("input_ids"), Value::tensor(Tensor::copy_of(DType::int64, {tokens}, ids))},
      {Value::string("image"), Value::bytes(std::span<const std::uint8_t>(image))},
      {Value::string("meta"), meta},
  });
  return {SampleKey::make(id, 0).to_value(), tokens, value};
}

// ---- planning: longest first onto the least loaded constructor with capacity left -----

struct Plan {
  std::vector<std::pair<Value, int>> targets;  // key -> constructor rank
  double before = 0, after = 0;
};

double imbalance(const std::vector<std::int64_t>& loads) {
  double mean = static_cast<double>(std::accumulate(loads.begin(), loads.end(), std::int64_t{0})) /
                static_cast<double>(loads.size());
  return mean > 0 ? static_cast<double>(*std::max_element(loads.begin(), loads.end())) / mean : 1.0;
}

Plan balance(const std::vector<Value>& reports, const std::vector<int>& constructors) {
  struct Entry {
    Value key;
    std::int64_t tokens;
  };
  std::vector<Entry> all;
  for (const Value& report : reports) {
    for (const Value& e : report.items()) all.push_back({e.items()[0], e.items()[1].as_int()});
  }
  std::size_t dp = constructors.size();
  std::vector<std::int64_t> naive(dp, 0), load(dp, 0);
  std::vector<std::size_t> count(dp, 0);
  for (std::size_t i = 0; i < all.size(); ++i) naive[i % dp] += all[i].tokens;  // arrival order
  std::size_t capacity = (all.size() + dp - 1) / dp;
  std::stable_sort(all.begin(), all.end(),
                   [](const Entry& a, const Entry& b) { return a.tokens > b.tokens; });
  Plan plan;
  for (const Entry& e : all) {
    std::size_t best = dp;
    for (std::size_t d = 0; d < dp; ++d) {
      if (count[d] < capacity && (best == dp || load[d] < load[best])) best = d;
    }
    load[best] += e.tokens;
    ++count[best];
    plan.targets.emplace_back(e.key, constructors[best]);
  }
  plan.before = imbalance(naive);
  plan.after = imbalance(load);
  return plan;
}

// ---- the batch ---------------------------------------------------------------------------

ModelBatchLayout batch_layout() {
  return ModelBatchLayout({
      {"tokens", DType::int64, Placement::accelerator, {Dim{std::string("T")}}},
      {"doc_lens", DType::int64, Placement::cpu, {Dim{std::string("N")}}},
      {"images", DType::uint8, Placement::cpu, {Dim{std::string("I")}}},
  });
}

Value pack(std::vector<Item> items) {
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.first.items()[0].as_int() < b.first.items()[0].as_int();
  });
  std::vector<std::uint8_t> tokens, lens, images;
  for (const Item& item : items) {
    const Tensor& ids = item.second.entries()[0].second.as_tensor();
    tokens.insert(tokens.end(), ids.bytes().begin(), ids.bytes().end());
    std::int64_t n = ids.numel();
    lens.insert(lens.end(), reinterpret_cast<std::uint8_t*>(&n),
                reinterpret_cast<std::uint8_t*>(&n) + 8);
    auto img = item.second.entries()[1].second.as_bytes().span();
    images.insert(images.end(), img.begin(), img.end());
  }
  auto t = [](DType d, std::vector<std::uint8_t> bytes) {
    std::int64_t n = static_cast<std::int64_t>(bytes.size() / element_size(d));
    return Value::tensor(Tensor(d, {n}, SharedBytes::adopt(std::move(bytes))));
  };
  return Value::mapping({{Value::string("tokens"), t(DType::int64, std::move(tokens))},
                         {Value::string("doc_lens"), t(DType::int64, std::move(lens))},
                         {Value::string("images"), t(DType::uint8, std::move(images))}});
}

std::uint64_t batch_digest(const Value& batch) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [k, v] : batch.entries())
    h = fnv1a64(v.as_tensor().bytes().data(), v.as_tensor().nbytes(), h);
  return h;
}

// ---- the sequence banks -------------------------------------------------------------------

Tensor float_rows(std::int64_t rows, const std::function<float(std::int64_t, std::int64_t)>& f) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * kWidth) * 4);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < kWidth; ++j) {
      float v = f(r, j);
      std::memcpy(bytes.data() + (r * kWidth + j) * 4, &v, 4);
    }
  }
  return Tensor(DType::float32, {rows, kWidth}, SharedBytes::adopt(std::move(bytes)));
}

Tensor row_slice(const Tensor& t, std::int64_t start, std::int64_t count) {
  return Tensor(t.dtype(), std::vector<std::int64_t>{count, kWidth},
                t.storage().slice(static_cast<std::size_t>(start * kWidth) * 4,
                                  static_cast<std::size_t>(count * kWidth) * 4));
}

// Forward and backward of one route family against the oracle; appends the output and the
// input gradient to `results`.
void dispatch_and_check(Communicator& c, const Group& cp, int k, const std::vector<Route>& routes,
                        const Tensor& bank, std::uint64_t seed, Checks& check, Counters& total,
                        Device device, const char* name, std::vector<Tensor>& results) {
  auto owners = route_owner_offsets(routes);
  Tensor shard = row_slice(bank, owners[static_cast<std::size_t>(k)],
                           routes[static_cast<std::size_t>(k)].local_length)
                     .on(device);
  Tensor out = sequence_dispatch(c, cp, shard, 0, routes[static_cast<std::size_t>(k)]);
  check(out == oracle_forward(bank, routes)[static_cast<std::size_t>(k)],
        std::string(name) + " forward differs from the oracle", c.rank());
  total.fold(out);
  results.push_back(out);
  std::vector<Tensor> grads;
  for (std::size_t r = 0; r < routes.size(); ++r) {
    grads.push_back(float_rows(routes[r].global_end - routes[r].global_start, [&](std::int64_t row,
                                                                                  std::int64_t j) {
      return static_cast<float>((seed + r * 7 + static_cast<std::uint64_t>(row * 13 + j)) % 97) /
             16.0f;
    }));
  }
  Tensor grad = sequence_dispatch_backward(c, cp, grads[static_cast<std::size_t>(k)].on(device), 0,
                                           routes[static_cast<std::size_t>(k)]);
  check(grad == oracle_backward(grads, routes)[static_cast<std::size_t>(k)],
        std::string(name) + " backward differs from the oracle", c.rank());
  total.fold(grad);
  results.push_back(grad);
}

// ---- --dump DIR: what hpref's transports produced on each rank ------------------------------
//
// DIR/step<S>/rank<R>.items.hpb1     the payload items the exchange returned (data-plane
//                                    members only), in its order, keys in the SampleKey
//                                    object pattern (kDefaultKeyClass)
// DIR/step<S>/rank<R>.batch.hpb1     one item ("batch", the model-parallel batch the rank
//                                    ends the step with: tokens, doc_lens, images)
// DIR/step<S>/rank<R>.dispatch.hpb1  four items: window_forward, window_backward,
//                                    prefix_forward, prefix_backward (this rank's shard)
// DIR/step<S>/plan.hpb1              one item ("plan", the plan the planner broadcast:
//                                    ([(key, constructor rank)], imbalance before, after))
// DIR/manifest.json                  the run and every file above; written last, by rank 0
//                                    after the closing collectives (every rank has written
//                                    every step then): no manifest, no complete dump.
// Every file goes to a ".part" name first and is renamed when complete.

std::filesystem::path step_dir(const std::string& dir, int step) {
  return std::filesystem::path(dir) / ("step" + std::to_string(step));
}

std::string rank_file(int rank, const char* what) {
  return "rank" + std::to_string(rank) + "." + what + ".hpb1";
}

void write_dump_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  std::filesystem::path part = path;
  part += ".part";
  std::FILE* f = std::fopen(part.c_str(), "wb");
  if (f == nullptr) {
    throw Error(Errc::io, "--dump: cannot create '" + part.string() + "': " + std::strerror(errno));
  }
  bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  int saved = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok || std::rename(part.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    std::remove(part.c_str());
    throw Error(Errc::io, "--dump: cannot write '" + path.string() + "': " + std::strerror(saved));
  }
}

void write_dump_segment(const std::filesystem::path& path, std::span<const Item> items) {
  EncodeOptions options;
  options.key_class = KeyClass(kDefaultKeyClass);  // keys as the Python original's SampleKey
  write_dump_file(path, encode_segment(items, options));
}

// The batch with every tensor on the host (an accelerator world's tokens are on the GPU).
Value host_batch(const Value& batch) {
  std::vector<Value::Entry> entries;
  for (const auto& [k, v] : batch.entries())
    entries.emplace_back(k, Value::tensor(v.as_tensor().on(Device{})));
  return Value::mapping(std::move(entries));
}

// DIR/manifest.json: the run's parameters, the data-plane ranks and every file, per step.
void write_dump_manifest(const DemoArgs& a, int cp, std::span<const int> data_plane) {
  Json steps = Json::array();
  for (int step = 0; step < a.steps; ++step) {
    Json ranks = Json::array();
    for (int r = 0; r < a.ranks; ++r) {
      bool member = std::find(data_plane.begin(), data_plane.end(), r) != data_plane.end();
      std::string dir = "step" + std::to_string(step) + "/";
      ranks.push_back({{"rank", r},
                       {"items", member ? Json(dir + rank_file(r, "items")) : Json(nullptr)},
                       {"batch", dir + rank_file(r, "batch")},
                       {"dispatch", dir + rank_file(r, "dispatch")}});
    }
    steps.push_back(
        {{"step", step}, {"plan", "step" + std::to_string(step) + "/plan.hpb1"}, {"ranks", ranks}});
  }
  Json j = {{"format", "hpref demo --dump 1"},
            {"backend", a.backend},
            {"seed", a.seed},
            {"ranks", a.ranks},
            {"dp", a.dp},
            {"cp", cp},
            {"steps", a.steps},
            {"window", a.window},
            {"ratio", a.ratio},
            {"data_plane", std::vector<int>(data_plane.begin(), data_plane.end())},
            {"key_class", std::string(kDefaultKeyClass)},
            {"files", steps}};
  std::string text = dump_json(j) + "\n";
  write_dump_file(std::filesystem::path(a.dump) / "manifest.json",
                  std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                                text.size()));
}

// Checks --dump's directory and makes it and its step folders (Error invalid_argument or io
// naming it); removes the manifest of an earlier dump there, so that a failing run leaves
// none. Every MPI rank calls it (create_directories accepts a folder another rank made)
// before its first collective, so no rank can remove the manifest rank 0 writes after the
// closing ones.
void prepare_dump(const DemoArgs& a) {
  if (a.dump.empty()) return;
  namespace fs = std::filesystem;
  fs::path dir(a.dump);
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw Error(Errc::invalid_argument, "--dump '" + a.dump + "' exists and is not a directory");
  }
  for (int step = -1; step < a.steps; ++step) {
    fs::path p = step < 0 ? dir : step_dir(a.dump, step);
    fs::create_directories(p, ec);
    if (ec || !fs::is_directory(p)) {
      throw Error(Errc::io, "--dump '" + a.dump + "': cannot create the directory '" + p.string() +
                                "': " + (ec ? ec.message() : std::string("not a directory")));
    }
  }
  fs::remove(dir / "manifest.json", ec);
  if (ec)
    throw Error(Errc::io,
                "--dump '" + a.dump + "': cannot remove the old manifest.json: " + ec.message());
}

// What the world has completed, written by rank 0 after each step's closing all-reduce:
// the summary of a run that fails part way counts the steps before the failure. On the
// simulator it lives in anonymous shared memory mapped before the ranks are forked.
struct Progress {
  std::int64_t steps = 0, passed = 0, failed = 0, bytes = 0, samples = 0;
  double before = 0, after = 0;  // imbalance summed over the completed steps
};

struct Config {
  DemoArgs args;
  int cp = 1;
  // The rank's accelerator ("cuda:N") on an accelerator world: groups stage through it and
  // the context-parallel dispatch runs over the model-parallel accelerator group.
  std::optional<std::string> device;
  Progress* progress = nullptr;
};

// One step's numbers on this rank, as its phases measure them.
struct StepStats {
  std::int64_t samples = 0;      // samples the plan placed (the planner's)
  std::int64_t bytes = 0;        // payload bytes this rank sent to other ranks
  std::int64_t tokens = 0;       // tokens in this rank's batch
  double before = 0, after = 0;  // the plan's token imbalance (the planner's)
};

// What a rank returns once every step completed (as the project's pickle): the world's
// totals from the closing all-reduce, the imbalance summed over the steps (the planner's,
// rank 0) and the data checksum.
struct Final {
  Progress totals;
  std::uint64_t data = 0;
};

std::string encode_final(const Final& f) {
  const Progress& p = f.totals;
  return write_pickle(
      Value::tuple({Value::integer(p.passed), Value::integer(p.failed), Value::integer(p.bytes),
                    Value::integer(p.samples), Value::floating(p.before), Value::floating(p.after),
                    Value::integer(static_cast<std::int64_t>(f.data))}));
}

Final decode_final(const std::string& value, int steps) {
  Value result = read_pickle(value);
  std::span<const Value> v = result.items();
  if (v.size() != 7) {
    throw Error(Errc::invalid_argument,
                "a demo rank's result has " + std::to_string(v.size()) + " fields, not 7");
  }
  Final f;
  f.totals = {steps,         v[0].as_int(),   v[1].as_int(),  v[2].as_int(),
              v[3].as_int(), v[4].as_float(), v[5].as_float()};
  f.data = static_cast<std::uint64_t>(v[6].as_int());
  return f;
}

// One rank of the demo: its mesh, groups and transports, fixed for the run, and one
// member function per phase of a step.
class DemoRank {
 public:
  DemoRank(Communicator& c, const Config& cfg);
  DemoRank(const DemoRank&) = delete;
  DemoRank& operator=(const DemoRank&) = delete;

  // Readers report, the planner balances and broadcasts the plan, payloads cross in one
  // exchange, checked; a constructor returns its packed batch.
  std::optional<Value> exchange(int step, StepStats& stats);
  // The constructor's batch to its model-parallel peers, checked equal on every peer.
  Value broadcast(int step, std::optional<Value> batch, StepStats& stats);
  // The batch's token sequence dispatched over the context-parallel group, sliding window
  // and document prefix, forward and backward, against the oracle.
  void dispatch(int step, const Value& batch);
  // The world's totals so far (rank 0's progress line and the shared progress).
  void progress(int step, const StepStats& stats);
  // The closing collectives; the rank's result (encode_final).
  std::string finish();

 private:
  Communicator& c_;
  const Config& cfg_;
  const DemoArgs& a_;
  std::vector<int> readers_;  // the last context-parallel rank of each replica reads
  DataTopology topo_;
  DataGroups groups_;
  std::vector<Group> singletons_;  // a one-rank context-parallel group when cp == 1
  const Group* cp_group_;
  Device device_;
  DataPlaneTransport data_;
  ModelParallelTransport model_;
  int reader_index_, k_;
  Counters total_;
  Checks check_{total_};
  std::int64_t bytes_before_ = 0;
};

std::vector<int> demo_readers(const Config& cfg) {
  std::vector<int> readers;
  for (int d = 0; d < cfg.args.dp; ++d) readers.push_back(d * cfg.cp + cfg.cp - 1);
  return readers;
}

DataTopology demo_topology(const Config& cfg, int rank) {
  std::vector<int> ranks(static_cast<std::size_t>(cfg.args.ranks));
  std::iota(ranks.begin(), ranks.end(), 0);
  return DataTopology(
      TopologyInputs{{cfg.args.dp, cfg.cp}, {"dp", "cp"}, ranks, rank, std::nullopt});
}

DataGroups demo_groups(Communicator& c, const Config& cfg, const DataTopology& topo,
                       const std::vector<int>& readers) {
  GroupPlanInputs plan_in;
  plan_in.topology = &topo;
  plan_in.reader_ranks = readers;
  plan_in.planner_rank = 0;
  plan_in.cpu_backend = scenarios::host_backend(c);
  plan_in.communication_device = cfg.device;
  return create_data_groups(c, plan_in);
}

// One-rank context-parallel groups when cp == 1 (made before the transports, whose
// construction agrees over the data groups).
std::vector<Group> cp_singletons(Communicator& c, const Config& cfg) {
  std::string backend = cfg.device ? c.world_backend() : scenarios::host_backend(c);
  std::vector<Group> out;
  if (cfg.cp == 1) {
    for (int r = 0; r < cfg.args.ranks; ++r)
      out.push_back(c.new_group(std::vector<int>{r}, backend));
  }
  return out;
}

TransportOptions demo_transport_options(const Config& cfg) {
  TransportOptions options;
  options.communication_device = cfg.device;
  return options;
}

DemoRank::DemoRank(Communicator& c, const Config& cfg)
    : c_(c),
      cfg_(cfg),
      a_(cfg.args),
      readers_(demo_readers(cfg)),
      topo_(demo_topology(cfg, c.rank())),
      groups_(demo_groups(c, cfg, topo_, readers_)),
      singletons_(cp_singletons(c, cfg)),
      cp_group_(cfg.cp == 1                     ? &singletons_[static_cast<std::size_t>(c.rank())]
                : groups_.model_parallel_tensor ? &*groups_.model_parallel_tensor
                                                : &*groups_.model_parallel),
      device_(cp_group_->memory() == MemorySpace::accelerator && cfg.device
                  ? Device::parse(*cfg.device)
                  : Device{}),
      data_(c, groups_, demo_transport_options(cfg)),
      model_(c, topo_, groups_, batch_layout(), demo_transport_options(cfg)) {
  reader_index_ =
      static_cast<int>(std::find(readers_.begin(), readers_.end(), c.rank()) - readers_.begin());
  k_ = static_cast<int>(topo_.coordinate()[1]);
}

std::optional<Value> DemoRank::exchange(int step, StepStats& stats) {
  bytes_before_ = total_.bytes;
  if (!data_.is_member()) return std::nullopt;
  std::vector<Sample> samples;
  std::vector<Value> report;
  if (reader_index_ < static_cast<int>(readers_.size())) {
    for (int i = 0; i < kSamplesPerReader; ++i)
      samples.push_back(make_sample(a_.seed, step, reader_index_, i));
    for (const Sample& s : samples)
      report.push_back(Value::tuple({s.key, Value::integer(s.tokens)}));
  }
  auto gathered = data_.gather_object_to_planner(Value::list(report));
  Value plan_value;
  if (gathered) {
    Plan plan = balance(*gathered, topo_.constructor_ranks());
    std::vector<Value> entries;
    for (auto& [key, target] : plan.targets)
      entries.push_back(Value::tuple({key, Value::integer(target)}));
    plan_value = Value::tuple(
        {Value::list(entries), Value::floating(plan.before), Value::floating(plan.after)});
    stats.before = plan.before;
    stats.after = plan.after;
    stats.samples = static_cast<std::int64_t>(plan.targets.size());
  }
  plan_value = data_.broadcast_from_planner(plan_value);
  if (!a_.dump.empty() && c_.rank() == 0) {
    Item plan_item{Value::string("plan"), plan_value};
    write_dump_segment(step_dir(a_.dump, step) / "plan.hpb1", std::span<const Item>(&plan_item, 1));
  }
  std::map<std::string, int> planned_here;
  std::map<int, std::vector<Item>> outgoing;
  for (const Value& e : plan_value.items()[0].items()) {
    int target = static_cast<int>(e.items()[1].as_int());
    if (target == c_.rank()) planned_here[repr(e.items()[0])] = 0;
    for (const Sample& s : samples) {
      if (key_equal(s.key, e.items()[0])) outgoing[target].emplace_back(s.key, s.value);
    }
  }
  auto prepared = data_.prepare_exchange(outgoing);
  for (std::size_t i = 0; i < prepared.input_splits.size(); ++i) {
    if (data_.ranks()[i] != c_.rank())
      stats.bytes += static_cast<std::int64_t>(prepared.input_splits[i]);
  }
  total_.bytes += stats.bytes;
  std::vector<Item> arrived = data_.exchange(std::move(prepared));
  if (!a_.dump.empty())
    write_dump_segment(step_dir(a_.dump, step) / rank_file(c_.rank(), "items"), arrived);
  // Every sample arrives exactly once, where the plan put it, with the reader's bytes.
  bool exact = arrived.size() == planned_here.size();
  for (const Item& item : arrived) {
    auto it = planned_here.find(repr(item.first));
    exact = exact && it != planned_here.end() && it->second++ == 0;
    std::int64_t id = item.first.items()[0].as_int();
    Sample again = make_sample(a_.seed, step, static_cast<int>(id % 100000 / 1000),
                               static_cast<int>(id % 1000));
    exact = exact && item.second == again.value;
  }
  check_(exact,
         "step " + std::to_string(step) +
             ": the samples that arrived are not exactly the planned ones",
         c_.rank());
  if (!model_.is_constructor()) return std::nullopt;
  return pack(std::move(arrived));
}

Value DemoRank::broadcast(int step, std::optional<Value> batch, StepStats& stats) {
  std::optional<Value> got = model_.broadcast(model_.is_constructor() ? batch : std::nullopt);
  check_(got.has_value(), "a batch step ended as end of data", c_.rank());
  if (!a_.dump.empty() && got) {
    Item batch_item{Value::string("batch"), host_batch(*got)};
    write_dump_segment(step_dir(a_.dump, step) / rank_file(c_.rank(), "batch"),
                       std::span<const Item>(&batch_item, 1));
  }
  std::uint64_t digest = batch_digest(*got);
  total_.data = fnv1a64(&digest, 8, total_.data);
  const Group& cp = *cp_group_;
  std::vector<std::uint64_t> digests(static_cast<std::size_t>(cp.size()));
  c_.all_gather(cp, {&digest, 8, cp.memory()}, {digests.data(), digests.size() * 8, cp.memory()})
      .wait();
  check_(
      std::all_of(digests.begin(), digests.end(), [&](std::uint64_t d) { return d == digests[0]; }),
      "model-parallel peers hold different batches", c_.rank());
  stats.tokens = got->entries()[0].second.as_tensor().numel();
  return std::move(*got);
}

void DemoRank::dispatch(int step, const Value& batch) {
  // Embeddings of the batch's tokens, sharded over the context-parallel ranks.
  const Tensor& tokens = batch.entries()[0].second.as_tensor();
  const Tensor& lens = batch.entries()[1].second.as_tensor();
  std::int64_t n_tokens = tokens.numel();
  std::int64_t local = (n_tokens + cfg_.cp - 1) / cfg_.cp;
  std::vector<std::int64_t> boundaries = {0};
  for (std::int64_t i = 0; i < lens.numel(); ++i)
    boundaries.push_back(boundaries.back() + lens.element<std::int64_t>(i));
  if (local * cfg_.cp > n_tokens) boundaries.push_back(local * cfg_.cp);  // a padding document
  Tensor bank = float_rows(local * cfg_.cp, [&](std::int64_t row, std::int64_t j) {
    std::int64_t token = row < n_tokens ? tokens.element<std::int64_t>(row) : 0;
    return static_cast<float>((token * 31 + j * 7) % 1000) / 8.0f;
  });
  std::vector<Tensor> results;  // window forward, window backward, prefix forward, backward
  dispatch_and_check(c_, *cp_group_, k_,
                     sliding_window_routes(boundaries, local, cfg_.cp, a_.window), bank, a_.seed,
                     check_, total_, device_, "sliding-window", results);
  auto keys = compressed_document_offsets(boundaries, a_.ratio);
  Tensor compressed = float_rows(keys.back(), [&](std::int64_t block, std::int64_t j) {
    return static_cast<float>((block * 17 + j) % 251) / 4.0f;
  });
  dispatch_and_check(c_, *cp_group_, k_,
                     document_prefix_routes(boundaries, local, cfg_.cp, a_.ratio), compressed,
                     a_.seed, check_, total_, device_, "document-prefix", results);
  if (a_.dump.empty()) return;
  std::vector<Item> items;
  const char* names[] = {"window_forward", "window_backward", "prefix_forward", "prefix_backward"};
  for (std::size_t i = 0; i < results.size(); ++i)
    items.emplace_back(Value::string(names[i]), Value::tensor(results[i].on(Device{})));
  write_dump_segment(step_dir(a_.dump, step) / rank_file(c_.rank(), "dispatch"), items);
}

void DemoRank::progress(int step, const StepStats& stats) {
  total_.samples += stats.samples;
  total_.before += stats.before;
  total_.after += stats.after;
  std::int64_t sums[3] = {total_.passed, total_.failed, total_.bytes - bytes_before_};
  c_.all_reduce(c_.world(), {sums, 24, c_.world().memory()}, DType::int64, ReduceOp::sum).wait();
  // sim: one shared page, written by rank 0; under mpirun each rank keeps its own.
  if (cfg_.progress != nullptr && (c_.rank() == 0 || c_.world_backend() != "sim")) {
    Progress& p = *cfg_.progress;
    p.steps = step + 1;
    p.passed = sums[0];
    p.failed = sums[1];
    p.bytes += sums[2];
    p.samples = total_.samples;
    p.before = total_.before;
    p.after = total_.after;
  }
  if (c_.rank() == 0 && !a_.json) {
    std::printf(
        "step %d/%d: %d samples, %lld bytes exchanged, %lld tokens in rank 0's batch, imbalance "
        "%.3f -> %.3f, checks %lld passed, %lld failed\n",
        step + 1, a_.steps, static_cast<int>(readers_.size()) * kSamplesPerReader,
        static_cast<long long>(sums[2]), static_cast<long long>(stats.tokens),
        total_.before / (step + 1), total_.after / (step + 1), static_cast<long long>(sums[0]),
        static_cast<long long>(sums[1]));
    std::fflush(stdout);
  }
}

std::string DemoRank::finish() {
  std::int64_t sums[4] = {total_.passed, total_.failed, total_.bytes, total_.samples};
  c_.all_reduce(c_.world(), {sums, 32, c_.world().memory()}, DType::int64, ReduceOp::sum).wait();
  std::vector<std::uint64_t> digests(static_cast<std::size_t>(c_.size()));
  c_.all_gather(c_.world(), {&total_.data, 8, c_.world().memory()},
                {digests.data(), digests.size() * 8, c_.world().memory()})
      .wait();
  // Every rank wrote every step's files before the closing collectives: the manifest last.
  if (!a_.dump.empty() && c_.rank() == 0) write_dump_manifest(a_, cfg_.cp, data_.ranks());
  Final f;
  f.totals = {a_.steps, sums[0], sums[1], sums[2], sums[3], total_.before, total_.after};
  f.data = fnv1a64(digests.data(), digests.size() * 8);
  return encode_final(f);
}

std::string rank_main(Communicator& c, const Config& cfg) {
  DemoRank rank(c, cfg);
  for (int step = 0; step < cfg.args.steps; ++step) {
    StepStats stats;
    std::optional<Value> batch = rank.exchange(step, stats);
    Value got = rank.broadcast(step, std::move(batch), stats);
    rank.dispatch(step, got);
    rank.progress(step, stats);
  }
  return rank.finish();
}

// How a run ended, for the report.
struct Outcome {
  Progress progress;
  std::optional<std::uint64_t> data;        // the data checksum when every step completed
  std::optional<std::uint64_t> trace_hash;  // the simulator's
  sim::Failure failure = sim::Failure::none;
  Json rank_errors = Json::array();  // [{"rank", "status", "kind", "message"}]
  std::vector<sim::Fault> faults;
  Json faults_not_fired = Json::array();
  std::string replay;  // the command that reproduces a failure (simulator)
  double seconds = 0;
};

// A completed run's summary is its closing totals; one that failed part way has the
// progress of the steps that completed.
void settle(Outcome& o, const Progress& progress, const std::string* value, int steps) {
  o.progress = progress;
  if (value == nullptr) return;
  Final f = decode_final(*value, steps);
  o.progress = f.totals;
  o.data = f.data;
}

Json report_json(const DemoArgs& a, const Config& cfg, const Outcome& o) {
  const Progress& p = o.progress;
  double n = p.steps > 0 ? static_cast<double>(p.steps) : 1.0;
  return Json{{"seed", a.seed},
              {"backend", a.backend},
              {"ranks", a.ranks},
              {"dp", a.dp},
              {"cp", cfg.cp},
              {"steps", a.steps},
              {"steps_completed", p.steps},
              {"samples", p.samples},
              {"bytes_exchanged", p.bytes},
              {"imbalance_before", p.before / n},
              {"imbalance_after", p.after / n},
              {"checks_passed", p.passed},
              {"checks_failed", p.failed},
              {"data_checksum", o.data ? Json(hex(*o.data)) : Json(nullptr)},
              {"trace_hash", o.trace_hash ? Json(hex(*o.trace_hash)) : Json(nullptr)},
              {"wall_seconds", o.seconds},
              {"faults", faults_json(o.faults)},
              {"faults_not_fired", o.faults_not_fired},
              {"failure", failure_key(o.failure)},
              {"exit_code", sim::exit_code(o.failure)},
              {"rank_errors", o.rank_errors},
              {"replay", o.failure == sim::Failure::none || o.replay.empty() ? Json(nullptr)
                                                                             : Json(o.replay)},
              {"ok", o.failure == sim::Failure::none}};
}

// --dump's manifest when the run wrote it ("" otherwise: no dump, or an incomplete one).
std::string dump_manifest(const DemoArgs& a) {
  if (a.dump.empty()) return "";
  std::filesystem::path manifest = std::filesystem::path(a.dump) / "manifest.json";
  std::error_code ec;
  return std::filesystem::is_regular_file(manifest, ec) ? manifest.string() : "";
}

// The table (or the JSON object); returns the exit status.
int report(const DemoArgs& a, const Config& cfg, const Outcome& o, std::ostream& out) {
  int code = sim::exit_code(o.failure);
  if (a.json) {
    Json j = report_json(a, cfg, o);
    if (!a.dump.empty()) {  // only with --dump: the default object is unchanged
      std::string manifest = dump_manifest(a);
      j["dump"] = manifest.empty() ? Json(nullptr) : Json(manifest);
    }
    out << dump_json(j) << "\n";
    out.flush();
    return code;
  }
  const Progress& p = o.progress;
  double n = p.steps > 0 ? static_cast<double>(p.steps) : 1.0;
  char line[160];
  auto row = [&](const char* name, const std::string& value) {
    std::snprintf(line, sizeof line, "| %-22s | %-26s |\n", name, value.c_str());
    out << line;
  };
  std::string rule = "+" + std::string(24, '-') + "+" + std::string(28, '-') + "+\n";
  char imb[64], wall[32];
  std::snprintf(imb, sizeof imb, "%.3f -> %.3f", p.before / n, p.after / n);
  std::snprintf(wall, sizeof wall, "%.2f s", o.seconds);
  out << rule;
  row("steps", p.steps == a.steps
                   ? std::to_string(a.steps)
                   : std::to_string(p.steps) + " of " + std::to_string(a.steps) + " completed");
  row("samples", std::to_string(p.samples));
  row("bytes exchanged", std::to_string(p.bytes));
  row("token imbalance", std::string(imb) + " (max/mean)");
  row("checks", std::to_string(p.passed) + " passed, " + std::to_string(p.failed) + " failed");
  row("data checksum", o.data ? hex(*o.data) : std::string("none (not every step ran)"));
  row("trace hash", o.trace_hash ? hex(*o.trace_hash) : std::string("none (simulator only)"));
  row("wall time", wall);
  out << rule;
  if (!a.dump.empty()) {
    std::string manifest = dump_manifest(a);
    out << "dump: "
        << (manifest.empty()
                ? a.dump + " is incomplete (no manifest.json: not every step completed)"
                : manifest)
        << "\n";
  }
  if (o.failure == sim::Failure::none) {
    out << "every check passed\n";
  } else {
    out << "result: " << sim::failure_name(o.failure) << "\n";
    if (!o.replay.empty()) out << "replay: " << o.replay << "\n";
  }
  out.flush();
  return code;
}

void header(const DemoArgs& a, const Config& cfg, const std::string& what, std::ostream& out) {
  if (a.json) return;
  out << "SEED=" << a.seed << "\n"
      << "hpref demo: " << a.ranks << " " << what << ", mesh dp=" << a.dp << " x cp=" << cfg.cp
      << ", " << a.steps << " steps, window " << a.window << ", ratio " << a.ratio << "\n";
  out.flush();
}

Config configure(DemoArgs a) {
  if (a.ranks < 1 || a.ranks > 64 || a.dp < 1 || a.ranks % a.dp != 0) {
    throw Error(Errc::invalid_argument, "--dp " + std::to_string(a.dp) + " must divide --ranks " +
                                            std::to_string(a.ranks) + " (1 to 64 ranks)");
  }
  if (a.steps < 1 || a.window < 1 || (a.ratio != 1 && a.ratio != 2)) {
    throw Error(Errc::invalid_argument,
                "--steps and --window must be positive and --ratio 1 or 2, got " +
                    std::to_string(a.steps) + ", " + std::to_string(a.window) + " and " +
                    std::to_string(a.ratio));
  }
  prepare_dump(a);
  return Config{a, a.ranks / a.dp, std::nullopt};
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A Progress in anonymous shared memory, mapped before the ranks are forked so that what
// rank 0 writes in its process is read here.
class SharedProgress {
 public:
  SharedProgress() {
    void* p =
        mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(Errc::comm_resource,
                  std::string("cannot map the demo's progress page: ") + std::strerror(errno));
    }
    p_ = new (p) Progress{};
  }
  ~SharedProgress() { munmap(p_, sizeof(Progress)); }
  SharedProgress(const SharedProgress&) = delete;
  SharedProgress& operator=(const SharedProgress&) = delete;
  Progress* get() const { return p_; }

 private:
  Progress* p_ = nullptr;
};

std::string demo_replay(const DemoArgs& a, const std::vector<sim::Fault>& faults) {
  std::string line = "hpref demo --ranks " + std::to_string(a.ranks) + " --dp " +
                     std::to_string(a.dp) + " --steps " + std::to_string(a.steps) + " --seed " +
                     std::to_string(a.seed) + " --window " + std::to_string(a.window) +
                     " --ratio " + std::to_string(a.ratio);
  if (a.turn_timeout_ms != sim::Options{}.turn_timeout_ms) {
    line += " --turn-timeout-ms " + std::to_string(a.turn_timeout_ms);
  }
  for (const sim::Fault& f : faults) line += " --fault " + f.str();
  return line;
}

int run_on_simulator(DemoArgs a, std::ostream& out) {
  if (a.ranks == 0) a.ranks = 8;
  Config cfg = configure(a);
  Outcome o;
  o.faults = faults_for(a.faults, a.seed, a.ranks);
  header(a, cfg, "simulated ranks", out);
  if (!a.json) {
    for (const auto& f : o.faults) out << "fault " << f.str() << "\n";
  }
  out.flush();
  std::fflush(stdout);
  SharedProgress progress;
  cfg.progress = progress.get();
  auto start = std::chrono::steady_clock::now();
  sim::Options options;
  options.seed = a.seed;
  options.faults = o.faults;
  options.turn_timeout_ms = a.turn_timeout_ms;
  sim::RunResult r =
      sim::Cluster::run(a.ranks, options, [&](Communicator& c) { return rank_main(c, cfg); });
  o.seconds = since(start);
  // Rank errors: with the table on stdout, to stderr under --json (and into the object).
  std::ostream& errors = a.json ? std::cerr : out;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& ro = r.outcomes[i];
    if (ro.status != sim::RankOutcome::Status::ok) {
      errors << "rank " << i << " did not finish: " << (ro.kind.empty() ? "" : ro.kind + ": ")
             << ro.message << "\n";
    }
  }
  for (const std::string& f : r.unfired_faults) {
    errors << "fault never fired: " << f << "\n";
    o.faults_not_fired.push_back(f);
  }
  o.rank_errors = rank_errors_json(r);
  o.trace_hash = r.trace_hash;
  o.failure = r.failure();
  settle(o, *progress.get(), o.failure == sim::Failure::none ? &r.outcomes[0].value : nullptr,
         a.steps);
  if (o.failure == sim::Failure::none && (!o.data || o.progress.failed > 0))
    o.failure = sim::Failure::check;
  o.replay = demo_replay(a, o.faults);
  if (a.json && o.failure != sim::Failure::none) std::cerr << "replay: " << o.replay << "\n";
  return report(a, cfg, o, out);
}

// Under mpirun: every rank runs the step; rank 0 prints.
// Refuses a world of one rank that the mesh cannot use: hpref started without mpirun.
void check_world(const DemoArgs& a, int size) {
  if (size != 1 || (a.ranks <= 1 && a.dp <= 1)) return;
  int n = a.ranks > 1 ? a.ranks : 4 * a.dp;
  throw Error(
      Errc::invalid_argument,
      "--backend " + a.backend +
          ": the MPI world has one rank (was hpref started without mpirun?), but " +
          (a.ranks > 1
               ? "--ranks " + std::to_string(a.ranks) + " asks for " + std::to_string(a.ranks)
               : "--dp " + std::to_string(a.dp) + " needs at least " + std::to_string(a.dp)) +
          "; launch the ranks with mpirun: mpirun -np " + std::to_string(n) +
          " hpref demo --backend " + a.backend);
}

// The configuration checks of a run under mpirun (Error invalid_argument).
Config configure_device(DemoArgs& a, int size) {
  if (a.ranks == 0) a.ranks = size;
  if (a.ranks != size) {
    throw Error(Errc::invalid_argument, "--ranks " + std::to_string(a.ranks) +
                                            " but mpirun started " + std::to_string(size) +
                                            " ranks");
  }
  if (!a.faults.empty())
    throw Error(Errc::invalid_argument, "--fault plans are the simulator's (--backend sim)");
  if (a.turn_timeout_ms != sim::Options{}.turn_timeout_ms) {
    throw Error(Errc::invalid_argument,
                "--turn-timeout-ms " + std::to_string(a.turn_timeout_ms) +
                    " is the simulator's (--backend sim); under mpirun use --timeout-ms");
  }
  return configure(a);
}
// Under mpirun: every rank runs the step; rank 0 prints.
int run_on_device(DemoArgs a, std::ostream& out) {
  scenarios::WorldOptions options;
  options.timeout_ms = a.timeout_ms;
  auto host = scenarios::open_world("mpi", options);
  Communicator* comm = host->local()[0];
  std::ostringstream discard;
  std::ostream& print = comm->rank() == 0 ? out : discard;
  try {
    check_world(a, comm->size());
  } catch (const Error& e) {
    if (!a.json) throw;
    Json j = {{"backend", a.backend}, {"seed", a.seed}};
    return json_error(j, e, print);
  }
  std::unique_ptr<scenarios::World> accel;
  if (a.backend == "nccl") {
    accel = scenarios::open_world("nccl", options, host.get());
    comm = accel->local()[0];
  }
  Config cfg;
  try {
    cfg = configure_device(a, comm->size());
  } catch (const Error& e) {
    if (!a.json) throw;
    Json j = {{"backend", a.backend}, {"seed", a.seed}};
    return json_error(j, e, print);
  }
  if (accel) cfg.device = accel->device();
  Progress progress;  // this process's own: every rank keeps the world's counts
  cfg.progress = &progress;
  header(a, cfg, a.backend == "nccl" ? "NCCL ranks (one GPU each)" : "MPI ranks", print);
  auto start = std::chrono::steady_clock::now();
  Outcome o;
  std::optional<std::string> value;
  try {
    value = rank_main(*comm, cfg);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d did not finish: %s: %s\n", comm->rank(),
                 std::string(e.kind()).c_str(), e.what());
    std::fflush(stderr);
    o.failure = failure_of(e);
    o.rank_errors.push_back(
        {{"rank", comm->rank()}, {"status", "error"}, {"kind", e.kind()}, {"message", e.what()}});
  }
  o.seconds = since(start);
  settle(o, progress, value ? &*value : nullptr, a.steps);
  if (o.failure == sim::Failure::none && (!o.data || o.progress.failed > 0))
    o.failure = sim::Failure::check;
  int code = report(a, cfg, o, print);
  // A timed-out request can never complete: end the whole job with this rank's class.
  host->end_if_failed(code);
  return code;
}

int run_demo(const DemoArgs& a, std::ostream& out) {
  if (a.backend == "sim") return run_on_simulator(a, out);
  if (a.backend == "mpi" || a.backend == "nccl") return run_on_device(a, out);
  throw Error(Errc::invalid_argument,
              "--backend must be sim, mpi or nccl, got '" + a.backend + "'");
}

}  // namespace

int run_cluster_demo(const DemoArgs& a, std::ostream& out) {
  if (!a.json) return run_demo(a, out);
  // --json: exactly one object on `out`, whatever happens.
  Json j = {{"seed", a.seed}, {"backend", a.backend}};
  try {
    return run_demo(a, out);
  } catch (const std::exception& e) {
    return json_error(j, e, out);
  }
}

void add_demo_sim_options(CLI::App& demo, DemoArgs& a) {
  a.turn_timeout_ms = sim::Options{}.turn_timeout_ms;
  add_turn_timeout_option(demo, a.turn_timeout_ms);
  demo.add_option("--fault", a.faults,
                  "A simulator fault plan, repeatable (see hpref sim run --help); default none");
  CLI::Option* json = demo.add_flag("--json", a.json,
                                    "Print one JSON object whatever happens: the summary (steps "
                                    "completed, checks, checksums), the failure "
                                    "class and exit code, each rank's error, the fault plan, the "
                                    "faults that never fired and the replay line");
  CLI::Option* dump =
      demo.add_option("--dump", a.dump,
                      "Write what hpref's transports produced on every rank, per step, as HPB1 "
                      "segments of the C++ encoder: "
                      "DIR/step<S>/rank<R>.items.hpb1 (the received payload items, in the "
                      "exchange's order; data-plane ranks), "
                      "rank<R>.batch.hpb1 (one item: the model-parallel batch), "
                      "rank<R>.dispatch.hpb1 (the four dispatch results), "
                      "plan.hpb1 (the broadcast plan), then DIR/manifest.json once every rank "
                      "wrote every step. DIR is created; "
                      "under mpirun every rank writes its own files (a directory all ranks see)");
  dump->type_name("DIR")->check([](const std::string& dir) {
    return dir.empty() ? std::string("the directory name is empty") : std::string();
  });
  demo.add_flag("--codec", a.codec,
                "Instead: the codec demonstration (encode, inspect, decode one segment)")
      ->excludes(json)
      ->excludes(dump);
}

}  // namespace hpref::cli
