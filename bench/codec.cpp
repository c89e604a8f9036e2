// bench/codec: HPB1 encode and decode against memcpy of the same bytes, in the same run.
//   (a) 8 float32 tensors of 1 MiB each with a small nested metadata mapping
//   (b) 10,000 small items: scalars and one 64-byte float32 tensor each
// Each is measured with the destination reused and freshly allocated (fresh pages cost a
// lot on VMs), and the run ends with a table of ratios to memcpy:
//   encode ratio = encode bandwidth / memcpy bandwidth      (target (a) reused >= 0.5)
//   decode speedup = memcpy time / decode time              (target (a) >= 20: views, no copy)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "hpref/codec.hpp"
#include "ratio_reporter.hpp"
#include "hpref/sample_key.hpp"

using namespace hpref;

namespace {

std::vector<Item> workload_a() {
  std::mt19937 rng(1);
  std::vector<Value> layers;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::uint8_t> bytes(1 << 20);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    layers.push_back(Value::tensor(Tensor::copy_of(DType::float32, {512, 512}, bytes)));
  }
  Value meta = Value::mapping({
      {Value::string("step"), Value::integer(1200)},
      {Value::string("source"), Value::string("shard-00017")},
      {Value::string("lr"), Value::floating(3e-4)},
      {Value::string("tags"), Value::list({Value::string("train"), Value::string("bf16")})},
  });
  std::vector<Item> items;
  items.emplace_back(SampleKey::make(1, 0).to_value(),
                     Value::mapping({{Value::string("layers"), Value::list(std::move(layers))},
                                     {Value::string("meta"), meta}}));
  return items;
}

std::vector<Item> workload_b() {
  std::mt19937 rng(2);
  std::vector<Item> items;
  for (int i = 0; i < 10000; ++i) {
    std::vector<std::uint8_t> bytes(64);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    items.emplace_back(
        SampleKey::make(i, 0).to_value(),
        Value::mapping({{Value::string("tokens"), Value::integer(static_cast<std::int64_t>(rng() % 4096))},
                        {Value::string("score"), Value::floating(static_cast<double>(rng() % 1000) / 7.0)},
                        {Value::string("ok"), Value::boolean(i % 3 != 0)},
                        {Value::string("emb"), Value::tensor(Tensor::copy_of(DType::float32, {16}, bytes))}}));
  }
  return items;
}

const std::vector<Item>& items_for(int which) {
  static const std::vector<Item> a = workload_a();
  static const std::vector<Item> b = workload_b();
  return which == 0 ? a : b;
}

const std::vector<std::uint8_t>& segment_for(int which) {
  static const std::vector<std::uint8_t> a = encode_segment(items_for(0));
  static const std::vector<std::uint8_t> b = encode_segment(items_for(1));
  return which == 0 ? a : b;
}

void set_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.counters["segment_bytes"] = static_cast<double>(n);
}

void BM_encode_reused(benchmark::State& state) {
  const auto& items = items_for(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> out;
  encode_segment_into(items, out);
  for (auto _ : state) {
    encode_segment_into(items, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, out.size());
}

void BM_encode_fresh(benchmark::State& state) {
  const auto& items = items_for(static_cast<int>(state.range(0)));
  std::size_t n = 0;
  for (auto _ : state) {
    std::vector<std::uint8_t> out = encode_segment(items);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    n = out.size();
  }
  set_bytes(state, n);
}

void BM_memcpy_reused(benchmark::State& state) {
  const auto& src = segment_for(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, src.size());
}

void BM_memcpy_fresh(benchmark::State& state) {
  const auto& src = segment_for(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    std::unique_ptr<std::uint8_t[]> dst(new std::uint8_t[src.size()]);
    std::memcpy(dst.get(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  set_bytes(state, src.size());
}

void BM_decode(benchmark::State& state) {
  const auto& src = segment_for(static_cast<int>(state.range(0)));
  SharedBytes buffer = SharedBytes::copy_of(src);
  for (auto _ : state) {
    auto items = decode_segment(buffer);
    benchmark::DoNotOptimize(items.data());
  }
  set_bytes(state, src.size());
}

BENCHMARK(BM_encode_reused)->Arg(0)->Arg(1)->ArgName("workload");
BENCHMARK(BM_encode_fresh)->Arg(0)->Arg(1)->ArgName("workload");
BENCHMARK(BM_memcpy_reused)->Arg(0)->Arg(1)->ArgName("workload");
BENCHMARK(BM_memcpy_fresh)->Arg(0)->Arg(1)->ArgName("workload");
BENCHMARK(BM_decode)->Arg(0)->Arg(1)->ArgName("workload");

// The ratio table printed after the runs.
class CodecReporter : public hpref::bench::RatioReporter {
 public:
  void PrintRatios() const {
    std::printf("\nratios to memcpy of the same bytes, same run (time per iteration)\n");
    std::printf("%-10s %-8s %-10s %14s %14s %10s  %s\n", "workload", "op", "dest", "op time",
                "memcpy time", "ratio", "target");
    for (int w = 0; w < 2; ++w) {
      const char* name = w == 0 ? "(a) 8x1MiB" : "(b) 10k";
      for (const char* dest : {"reused", "fresh"}) {
        double enc = get(std::string("BM_encode_") + dest + "/workload:" + std::to_string(w));
        double mem = get(std::string("BM_memcpy_") + dest + "/workload:" + std::to_string(w));
        std::printf("%-10s %-8s %-10s %14.1f %14.1f %9.2fx  %s\n", name, "encode", dest, enc, mem,
                    mem / enc, w == 0 && std::string(dest) == "reused" ? ">= 0.5x bandwidth" : "-");
      }
      for (const char* dest : {"reused", "fresh"}) {
        double dec = get("BM_decode/workload:" + std::to_string(w));
        double mem = get(std::string("BM_memcpy_") + dest + "/workload:" + std::to_string(w));
        std::printf("%-10s %-8s %-10s %14.1f %14.1f %9.1fx  %s\n", name, "decode", dest, dec, mem,
                    mem / dec, w == 0 ? ">= 20x faster" : "-");
      }
    }
    std::printf("(times in the benchmark's unit; encode ratio = memcpy time / encode time = "
                "encode bandwidth / memcpy bandwidth)\n");
  }

 private:
  double get(const std::string& name) const { return time(name); }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CodecReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
