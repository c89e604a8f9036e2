// bench/codec: HPB1 encode and decode against memcpy of the same bytes, in the same run.
//   (a) 8 float32 tensors of 1 MiB each with a small nested metadata mapping
//   (b) 10,000 small items: scalars and one 64-byte float32 tensor each
// Each is measured with the destination reused and freshly allocated (fresh pages cost a
// lot on VMs), and the run ends with a table of ratios to memcpy:
//   encode ratio = encode bandwidth / memcpy bandwidth      (target (a) reused >= 0.5)
//   decode speedup = memcpy time / decode time              (target (a) >= 20: views, no copy)
// and (b)'s decode time per item                            (target <= 0.3 us, issue 15)
// The tensors hold the shared pattern; a decode's are checked against it (exit 1 if wrong).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common.hpp"
#include "hpref/codec.hpp"
#include "hpref/sample_key.hpp"

using namespace hpref;

namespace {

// A float32 tensor of the pattern of stream k (tensor k of its workload, in encoding order).
Value pattern_tensor(std::vector<std::int64_t> shape, std::size_t bytes, std::uint64_t k) {
  std::vector<std::uint8_t> data(bytes);
  bench::fill_pattern(data, k);
  return Value::tensor(Tensor::copy_of(DType::float32, std::move(shape), data));
}

std::vector<Item> workload_a() {
  std::vector<Value> layers;
  for (std::uint64_t k = 0; k < 8; ++k) layers.push_back(pattern_tensor({512, 512}, 1 << 20, k));
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
  std::vector<Item> items;
  for (int i = 0; i < 10000; ++i) {
    auto k = static_cast<std::uint64_t>(i);
    auto at = [k](std::uint64_t j) { return bench::pattern_byte(1u << 16, 4 * k + j); };
    items.emplace_back(
        SampleKey::make(i, 0).to_value(),
        Value::mapping({{Value::string("tokens"), Value::integer(at(0) << 4 | (at(1) & 15))},
                        {Value::string("score"), Value::floating((at(2) << 2 | (at(3) & 3)) / 7.0)},
                        {Value::string("ok"), Value::boolean(i % 3 != 0)},
                        {Value::string("emb"), pattern_tensor({16}, 64, k)}}));
  }
  return items;
}

// Wrong bytes of the tensors in `v` (the k-th holding stream k) against the pattern.
long long wrong_bytes(const Value& v, std::uint64_t& k) {
  long long n = 0;
  if (v.is(ValueKind::tensor)) n += bench::count_wrong(v.as_tensor().bytes(), k++);
  if (v.is(ValueKind::list) || v.is(ValueKind::tuple)) {
    for (const Value& x : v.items()) n += wrong_bytes(x, k);
  }
  if (v.is(ValueKind::mapping)) {
    for (const auto& [key, value] : v.entries()) n += wrong_bytes(key, k) + wrong_bytes(value, k);
  }
  return n;
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

// The ratio table printed after the runs: one row per op and destination whose op and
// memcpy both ran (a --benchmark_filter may leave some out; they are counted, not printed
// as NaN).
void print_ratios(const bench::Times& time) {
  std::printf("\nratios to memcpy of the same bytes, same run (time per iteration)\n");
  std::printf("%-10s %-8s %-10s %14s %14s %10s  %s\n", "workload", "op", "dest", "op time",
              "memcpy time", "ratio", "target");
  int left_out = 0;
  auto row = [&](const char* name, const char* op, const char* dest, double op_time, double mem,
                 const char* target) {
    if (std::isnan(op_time) || std::isnan(mem)) {
      ++left_out;
      return;
    }
    std::printf("%-10s %-8s %-10s %14.1f %14.1f %9.2fx  %s\n", name, op, dest, op_time, mem,
                mem / op_time, target);
  };
  for (int w = 0; w < 2; ++w) {
    const char* name = w == 0 ? "(a) 8x1MiB" : "(b) 10k";
    std::string arg = "/workload:" + std::to_string(w);
    for (const char* dest : {"reused", "fresh"}) {
      row(name, "encode", dest, time(std::string("BM_encode_") + dest + arg),
          time(std::string("BM_memcpy_") + dest + arg),
          w == 0 && std::string(dest) == "reused" ? ">= 0.5x bandwidth" : "-");
    }
    for (const char* dest : {"reused", "fresh"}) {
      row(name, "decode", dest, time("BM_decode" + arg),
          time(std::string("BM_memcpy_") + dest + arg), w == 0 ? ">= 20x faster" : "-");
    }
  }
  // Workload (b) has no memcpy-class target: issue 15 asks for a decode of at most 0.3 us
  // an item (10x the 2.87 us of its first build).
  double b_decode = time("seconds:BM_decode/workload:1");
  if (!std::isnan(b_decode)) {
    double us = b_decode / static_cast<double>(items_for(1).size()) * 1e6;
    std::printf("%-10s %-8s %-10s %14.1f %14s %9.3f   us an item, target <= 0.3 (%s)\n", "(b) 10k",
                "decode", "per item", time("BM_decode/workload:1"), "-", us,
                us <= 0.3 ? "met" : "NOT met");
  }
  if (left_out > 0) {
    std::printf("(%d rows left out: their op or its memcpy was not run, --benchmark_filter)\n",
                left_out);
  }
  std::printf(
      "(times in the benchmark's unit; encode ratio = memcpy time / encode time = "
      "encode bandwidth / memcpy bandwidth)\n");
}

}  // namespace

int main(int argc, char** argv) {
  const char* summary = "HPB1 encode and decode against memcpy of the same bytes.";
  return bench::run_google_benchmark(argc, argv, summary, [](const bench::Times& time) {
    print_ratios(time);
    long long wrong = 0;  // a decode's tensors against the pattern
    for (int w = 0; w < 2; ++w) {
      std::uint64_t k = 0;
      for (const Item& item : decode_segment(SharedBytes::copy_of(segment_for(w)))) {
        wrong += wrong_bytes(item.first, k) + wrong_bytes(item.second, k);
      }
    }
    return wrong;
  });
}
