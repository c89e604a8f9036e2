// bench/routes: all-rank route planning (SPEC 7) for P = 64 and 1024 ranks over 1,000
// documents, sliding-window and document-prefix routes. Reports ns per route and its
// ratio to one pass over the document boundaries measured in the same run (the work a
// route cannot avoid: each rank must look at where documents start), and against writing
// its output: P routes of three P-entry int64 tables, memset into tables that exist (the
// planner into a caller's reused routes, issue 15's target <= 2x) or allocated and memset
// (the planner returning fresh routes: both pay the first touch of fresh pages). Every
// route planned is checked with Route::problem (exit 1 if any is not valid).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "common.hpp"
#include "hpref/routes.hpp"

namespace {

constexpr std::int64_t kDocuments = 1000;
constexpr std::int64_t kLocalLength = 4096;

std::vector<std::int64_t> boundaries(std::int64_t ranks) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(ranks));
  std::int64_t total = ranks * kLocalLength;
  std::vector<std::int64_t> cuts = {0, total};
  while (static_cast<std::int64_t>(cuts.size()) < kDocuments + 1) {
    cuts.push_back(1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total - 1)));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  return cuts;
}

std::vector<hpref::Route> plan(bool prefix, const std::vector<std::int64_t>& b, std::int64_t p) {
  return prefix ? hpref::document_prefix_routes(b, kLocalLength, p, 2)
                : hpref::sliding_window_routes(b, kLocalLength, p, 8192);
}

// All ranks' routes of one configuration; ns per route as a counter.
template <bool Prefix>
void BM_plan_all(benchmark::State& state) {
  auto b = boundaries(state.range(0));
  for (auto _ : state) {
    auto routes = plan(Prefix, b, state.range(0));
    benchmark::DoNotOptimize(routes.data());
  }
  state.counters["ns_per_route"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_window_plan_all(benchmark::State& state) { BM_plan_all<false>(state); }
void BM_prefix_plan_all(benchmark::State& state) { BM_plan_all<true>(state); }

// The same into a vector of routes reused from the previous iteration.
template <bool Prefix>
void BM_plan_into(benchmark::State& state) {
  auto b = boundaries(state.range(0));
  std::vector<hpref::Route> routes;
  for (auto _ : state) {
    if (Prefix) {
      hpref::document_prefix_routes(b, kLocalLength, state.range(0), 2, routes);
    } else {
      hpref::sliding_window_routes(b, kLocalLength, state.range(0), 8192, routes);
    }
    benchmark::DoNotOptimize(routes.data());
  }
}

void BM_window_plan_into(benchmark::State& state) { BM_plan_into<false>(state); }
void BM_prefix_plan_into(benchmark::State& state) { BM_plan_into<true>(state); }

// The planner's output written with memset: 3 x P tables of P int64, existing (warm) or
// allocated each time (fresh).
void BM_memset_output(benchmark::State& state) {
  auto p = static_cast<std::size_t>(state.range(0));
  std::vector<std::vector<std::int64_t>> tables(3 * p, std::vector<std::int64_t>(p));
  for (auto _ : state) {
    for (auto& t : tables) std::memset(t.data(), 0, t.size() * sizeof(std::int64_t));
    benchmark::DoNotOptimize(tables.data());
    benchmark::ClobberMemory();
  }
}

void BM_alloc_memset_output(benchmark::State& state) {
  auto p = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    std::vector<std::vector<std::int64_t>> tables(3 * p);
    for (auto& t : tables) {
      t.resize(p);
      std::memset(t.data(), 0, p * sizeof(std::int64_t));
    }
    benchmark::DoNotOptimize(tables.data());
    benchmark::ClobberMemory();
  }
}

// One pass over the boundaries: the differences' sum, which the compiler cannot skip.
void BM_boundary_pass(benchmark::State& state) {
  auto b = boundaries(state.range(0));
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i + 1 < b.size(); ++i)
      sum += (b[i + 1] - b[i]) ^ static_cast<std::int64_t>(i);
    benchmark::DoNotOptimize(sum);
  }
}

BENCHMARK(BM_window_plan_all)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_prefix_plan_all)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_boundary_pass)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_window_plan_into)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_prefix_plan_into)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_memset_output)->Arg(64)->Arg(1024)->ArgName("P");
BENCHMARK(BM_alloc_memset_output)->Arg(64)->Arg(1024)->ArgName("P");

}  // namespace

int main(int argc, char** argv) {
  const char* summary = "All-rank route planning against one boundary pass.";
  return hpref::bench::run_google_benchmark(
      argc, argv, summary, [](const hpref::bench::Times& time) {
        std::printf("\nall-rank planning, %lld documents (time units as above)\n",
                    static_cast<long long>(kDocuments));
        std::printf("%-8s %6s %16s %14s %18s\n", "route", "P", "plan all ranks", "per route",
                    "route / boundary pass");
        long long wrong = 0;  // routes that are not valid
        int left_out = 0;
        for (const char* kind : {"window", "prefix"}) {
          for (int p : {64, 1024}) {
            std::string suffix = "/P:" + std::to_string(p);
            double all = time(std::string("BM_") + kind + "_plan_all" + suffix);
            double pass = time("BM_boundary_pass" + suffix);
            if (std::isnan(all) || std::isnan(pass)) {
              ++left_out;  // not run under this --benchmark_filter
            } else {
              std::printf("%-8s %6d %16.1f %14.2f %17.2fx\n", kind, p, all, all / p,
                          all / p / pass);
            }
            auto routes = plan(kind[0] == 'p', boundaries(p), p);
            for (int r = 0; r < p; ++r)
              wrong += !routes[static_cast<std::size_t>(r)].problem(r).empty();
          }
        }
        std::printf(
            "\nall-rank planning against writing its output (3 x P x P int64) with memset\n");
        std::printf("%-8s %6s %16s %14s %9s %16s %14s %9s\n", "route", "P", "into reused", "memset",
                    "ratio", "fresh", "alloc+memset", "ratio");
        for (const char* kind : {"window", "prefix"}) {
          for (int p : {64, 1024}) {
            std::string suffix = "/P:" + std::to_string(p);
            double into = time(std::string("BM_") + kind + "_plan_into" + suffix);
            double warm = time("BM_memset_output" + suffix);
            double fresh = time(std::string("BM_") + kind + "_plan_all" + suffix);
            double cold = time("BM_alloc_memset_output" + suffix);
            if (std::isnan(into) || std::isnan(warm) || std::isnan(fresh) || std::isnan(cold)) {
              ++left_out;
              continue;
            }
            std::printf("%-8s %6d %16.1f %14.1f %8.2fx %16.1f %14.1f %8.2fx\n", kind, p, into, warm,
                        into / warm, fresh, cold, fresh / cold);
          }
        }
        std::printf("(target: into reused <= 2x memset at P = 1024)\n");
        if (left_out > 0) {
          std::printf("(%d rows left out: a benchmark they need was not run, --benchmark_filter)\n",
                      left_out);
        }
        return wrong;
      });
}
