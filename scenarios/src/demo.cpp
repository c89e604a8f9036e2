// The data step behind `hpref demo` (demo.hpp), and the scenario "demo".
#include "hpref/scenarios/demo.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "hpref/codec.hpp"
#include "hpref/data_plane.hpp"
#include "hpref/dispatch.hpp"
#include "hpref/error.hpp"
#include "hpref/model_parallel.hpp"
#include "hpref/oracle.hpp"
#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/scenarios/scenario.hpp"
#include "hpref/splitmix64.hpp"
#include "mesh.hpp"

namespace hpref::scenarios {
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

void write_dump_segment(const std::filesystem::path& path, std::span<const Item> items) {
  EncodeOptions options;
  options.key_class = KeyClass(kDefaultKeyClass);  // keys as the Python original's SampleKey
  write_demo_file(path, encode_segment(items, options));
}

// The batch with every tensor on the host (an accelerator world's tokens are on the GPU).
Value host_batch(const Value& batch) {
  std::vector<Value::Entry> entries;
  for (const auto& [k, v] : batch.entries())
    entries.emplace_back(k, Value::tensor(v.as_tensor().on(Device{})));
  return Value::mapping(std::move(entries));
}

// One step's numbers on this rank, as its phases measure them.
struct StepStats {
  std::int64_t samples = 0;      // samples the plan placed (the planner's)
  std::int64_t bytes = 0;        // payload bytes this rank sent to other ranks
  std::int64_t tokens = 0;       // tokens in this rank's batch
  double before = 0, after = 0;  // the plan's token imbalance (the planner's)
};

std::string encode_result(const DemoResult& f) {
  const DemoProgress& p = f.totals;
  return write_pickle(
      Value::tuple({Value::integer(p.passed), Value::integer(p.failed), Value::integer(p.bytes),
                    Value::integer(p.samples), Value::floating(p.before), Value::floating(p.after),
                    Value::integer(static_cast<std::int64_t>(f.data))}));
}

// One rank of the demo: its mesh, groups and transports, fixed for the run, and one
// member function per phase of a step.
class DemoRank {
 public:
  DemoRank(Communicator& c, const DemoConfig& cfg);
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
  // The closing collectives; the rank's result (encode_result).
  std::string finish();

 private:
  Communicator& c_;
  const DemoConfig& cfg_;
  std::vector<int> readers_;       // the last context-parallel rank of each replica reads
  FixedMesh mesh_;                 // the transport scenarios' set-up: dp x cp, planner 0
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

std::vector<int> demo_readers(const DemoConfig& cfg) {
  std::vector<int> readers;
  for (int d = 0; d < cfg.dp; ++d) readers.push_back(d * cfg.cp + cfg.cp - 1);
  return readers;
}

// One-rank context-parallel groups when cp == 1 (made before the transports, whose
// construction agrees over the data groups).
std::vector<Group> cp_singletons(Communicator& c, const DemoConfig& cfg) {
  std::string backend = cfg.device ? c.world_backend() : host_backend(c);
  std::vector<Group> out;
  if (cfg.cp == 1) {
    for (int r = 0; r < c.size(); ++r) out.push_back(c.new_group(std::vector<int>{r}, backend));
  }
  return out;
}

TransportOptions transport_options(const DemoConfig& cfg) {
  TransportOptions options;
  options.communication_device = cfg.device;
  return options;
}

DemoRank::DemoRank(Communicator& c, const DemoConfig& cfg)
    : c_(c),
      cfg_(cfg),
      readers_(demo_readers(cfg)),
      mesh_(fixed_mesh(c, cfg.dp, readers_, cfg.device)),
      singletons_(cp_singletons(c, cfg)),
      cp_group_(cfg.cp == 1 ? &singletons_[static_cast<std::size_t>(c.rank())]
                : mesh_.groups.model_parallel_tensor ? &*mesh_.groups.model_parallel_tensor
                                                     : &*mesh_.groups.model_parallel),
      device_(cp_group_->memory() == MemorySpace::accelerator && cfg.device
                  ? Device::parse(*cfg.device)
                  : Device{}),
      data_(c, mesh_.groups, transport_options(cfg)),
      model_(c, mesh_.topology, mesh_.groups, batch_layout(), transport_options(cfg)) {
  reader_index_ =
      static_cast<int>(std::find(readers_.begin(), readers_.end(), c.rank()) - readers_.begin());
  k_ = static_cast<int>(mesh_.topology.coordinate()[1]);
}

std::optional<Value> DemoRank::exchange(int step, StepStats& stats) {
  bytes_before_ = total_.bytes;
  if (!data_.is_member()) return std::nullopt;
  std::vector<Sample> samples;
  std::vector<Value> report;
  if (reader_index_ < static_cast<int>(readers_.size())) {
    for (int i = 0; i < kSamplesPerReader; ++i)
      samples.push_back(make_sample(cfg_.seed, step, reader_index_, i));
    for (const Sample& s : samples)
      report.push_back(Value::tuple({s.key, Value::integer(s.tokens)}));
  }
  auto gathered = data_.gather_object_to_planner(Value::list(report));
  Value plan_value;
  if (gathered) {
    Plan plan = balance(*gathered, mesh_.topology.constructor_ranks());
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
  if (!cfg_.dump.empty() && c_.rank() == 0) {
    Item plan_item{Value::string("plan"), plan_value};
    write_dump_segment(demo_step_dir(cfg_.dump, step) / "plan.hpb1",
                       std::span<const Item>(&plan_item, 1));
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
  if (!cfg_.dump.empty())
    write_dump_segment(demo_step_dir(cfg_.dump, step) / demo_rank_file(c_.rank(), "items"),
                       arrived);
  // Every sample arrives exactly once, where the plan put it, with the reader's bytes.
  bool exact = arrived.size() == planned_here.size();
  for (const Item& item : arrived) {
    auto it = planned_here.find(repr(item.first));
    exact = exact && it != planned_here.end() && it->second++ == 0;
    std::int64_t id = item.first.items()[0].as_int();
    Sample again = make_sample(cfg_.seed, step, static_cast<int>(id % 100000 / 1000),
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
  if (!cfg_.dump.empty() && got) {
    Item batch_item{Value::string("batch"), host_batch(*got)};
    write_dump_segment(demo_step_dir(cfg_.dump, step) / demo_rank_file(c_.rank(), "batch"),
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
                     sliding_window_routes(boundaries, local, cfg_.cp, cfg_.window), bank,
                     cfg_.seed, check_, total_, device_, "sliding-window", results);
  auto keys = compressed_document_offsets(boundaries, cfg_.ratio);
  Tensor compressed = float_rows(keys.back(), [&](std::int64_t block, std::int64_t j) {
    return static_cast<float>((block * 17 + j) % 251) / 4.0f;
  });
  dispatch_and_check(c_, *cp_group_, k_,
                     document_prefix_routes(boundaries, local, cfg_.cp, cfg_.ratio), compressed,
                     cfg_.seed, check_, total_, device_, "document-prefix", results);
  if (cfg_.dump.empty()) return;
  std::vector<Item> items;
  const char* names[] = {"window_forward", "window_backward", "prefix_forward", "prefix_backward"};
  for (std::size_t i = 0; i < results.size(); ++i)
    items.emplace_back(Value::string(names[i]), Value::tensor(results[i].on(Device{})));
  write_dump_segment(demo_step_dir(cfg_.dump, step) / demo_rank_file(c_.rank(), "dispatch"), items);
}

void DemoRank::progress(int step, const StepStats& stats) {
  total_.samples += stats.samples;
  total_.before += stats.before;
  total_.after += stats.after;
  std::int64_t sums[3] = {total_.passed, total_.failed, total_.bytes - bytes_before_};
  c_.all_reduce(c_.world(), {sums, 24, c_.world().memory()}, DType::int64, ReduceOp::sum).wait();
  // sim: one shared page, written by rank 0; under mpirun each rank keeps its own.
  if (cfg_.progress != nullptr && (c_.rank() == 0 || c_.world_backend() != "sim")) {
    DemoProgress& p = *cfg_.progress;
    p.steps = step + 1;
    p.passed = sums[0];
    p.failed = sums[1];
    p.bytes += sums[2];
    p.samples = total_.samples;
    p.before = total_.before;
    p.after = total_.after;
  }
  if (c_.rank() == 0 && cfg_.print_steps) {
    std::printf(
        "step %d/%d: %d samples, %lld bytes exchanged, %lld tokens in rank 0's batch, imbalance "
        "%.3f -> %.3f, checks %lld passed, %lld failed\n",
        step + 1, cfg_.steps, static_cast<int>(readers_.size()) * kSamplesPerReader,
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
  if (!cfg_.dump.empty() && c_.rank() == 0 && cfg_.dump_finished) cfg_.dump_finished(data_.ranks());
  DemoResult f;
  f.totals = {cfg_.steps, sums[0], sums[1], sums[2], sums[3], total_.before, total_.after};
  f.data = fnv1a64(digests.data(), digests.size() * 8);
  return encode_result(f);
}

}  // namespace

std::string run_demo_rank(Communicator& c, const DemoConfig& cfg) {
  DemoRank rank(c, cfg);
  for (int step = 0; step < cfg.steps; ++step) {
    StepStats stats;
    std::optional<Value> batch = rank.exchange(step, stats);
    Value got = rank.broadcast(step, std::move(batch), stats);
    rank.dispatch(step, got);
    rank.progress(step, stats);
  }
  return rank.finish();
}

DemoResult read_demo_result(const std::string& value, int steps) {
  Value result = read_pickle(value);
  std::span<const Value> v = result.items();
  if (v.size() != 7) {
    throw Error(Errc::invalid_argument,
                "a demo rank's result has " + std::to_string(v.size()) + " fields, not 7");
  }
  DemoResult f;
  f.totals = {steps,         v[0].as_int(),   v[1].as_int(),  v[2].as_int(),
              v[3].as_int(), v[4].as_float(), v[5].as_float()};
  f.data = static_cast<std::uint64_t>(v[6].as_int());
  return f;
}

std::filesystem::path demo_step_dir(const std::string& dir, int step) {
  return std::filesystem::path(dir) / ("step" + std::to_string(step));
}

std::string demo_rank_file(int rank, const char* what) {
  return "rank" + std::to_string(rank) + "." + what + ".hpb1";
}

void write_demo_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
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

namespace {

// The scenario: the demo's step on any world size (dp 2 when the size is even), 2 steps;
// its value is the summary and the data checksum.
std::string demo_scenario(Communicator& c, const ScenarioContext& ctx) {
  DemoConfig cfg;
  cfg.dp = c.size() % 2 == 0 ? 2 : 1;
  cfg.cp = c.size() / cfg.dp;
  cfg.steps = 2;
  cfg.seed = ctx.seed;
  DemoResult r = read_demo_result(run_demo_rank(c, cfg), cfg.steps);
  check(r.totals.failed == 0, std::to_string(r.totals.failed) + " checks failed");
  char data[24];
  std::snprintf(data, sizeof data, "%016llx", static_cast<unsigned long long>(r.data));
  return "checks=" + std::to_string(r.totals.passed) +
         " samples=" + std::to_string(r.totals.samples) +
         " bytes=" + std::to_string(r.totals.bytes) + " data=" + data;
}

const Registration registered(
    3, {{.name = "demo",
         .description = "the data step of hpref demo (2 steps, dp 2 on an even world): plan, "
                        "exchange, batch broadcast, dispatch, each checked",
         .fn = demo_scenario,
         .needs_host_groups = true,
         .in_sweeps = false}});

}  // namespace

}  // namespace hpref::scenarios
