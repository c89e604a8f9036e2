// The shared benchmark harness (common.hpp).
#include "common.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "hpref/scenarios/scenario.hpp"
#include "hpref/sim/cluster.hpp"

namespace hpref::bench {

namespace {

// Digits with an optional K, M or G (binary) suffix.
bool parse_number(std::string_view text, std::size_t* out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  std::string_view suffix = text.substr(static_cast<std::size_t>(end - text.data()));
  int shift = suffix.empty()  ? 0
              : suffix == "K" ? 10
              : suffix == "M" ? 20
              : suffix == "G" ? 30
                              : 64;
  if (error != std::errc() || shift == 64 || *out > (SIZE_MAX >> shift)) return false;
  *out <<= shift;
  return true;
}

// Rank counts from 1 to 64, separated by commas.
bool parse_list(const std::string& text, std::vector<int>* out) {
  out->clear();
  for (std::size_t at = 0, comma = 0, n = 0; comma != std::string::npos; at = comma + 1) {
    comma = text.find(',', at);
    if (!parse_number(text.substr(at, comma - at), &n) || n < 1 || n > 64) return false;
    out->push_back(static_cast<int>(n));
  }
  return true;
}

std::string g_usage;  // what --help prints, before Google Benchmark's flags if g_benchmark
bool g_benchmark = false;
void print_usage() {
  std::printf("%s%s", g_usage.c_str(), g_benchmark ? "\nGoogle Benchmark's flags:\n" : "");
  if (g_benchmark) benchmark::PrintDefaultHelp();
}

}  // namespace

void parse(int* argc, char** argv, const std::string& summary, const std::vector<Flag>& flags,
           bool google_benchmark) {
  std::string program = std::string(argv[0]).substr(std::string(argv[0]).rfind('/') + 1);
  g_usage = "usage: " + program + " [flags]\n" + summary + "\n\n";
  char line[256];
  for (const Flag& f : flags) {
    std::snprintf(line, sizeof line, "  %-18s  %s\n", f.name, f.help);
    g_usage += line;
  }
  g_usage += "  --help              this text\n";
  g_benchmark = google_benchmark;
  if (google_benchmark) benchmark::Initialize(argc, argv, print_usage);  // takes its flags out
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    auto f = std::find_if(flags.begin(), flags.end(), [&](const Flag& f) {
      return std::string_view(f.name).substr(0, std::string_view(f.name).find(' ')) == a;
    });
    if (a == "--help") {
      print_usage();
      std::exit(0);
    }
    if (f != flags.end() && f->value.index() == 2) {
      *std::get<2>(f->value) = true;
      continue;
    }
    std::string value = i + 1 < *argc ? argv[++i] : "";
    if (f != flags.end() && (f->value.index() == 0 ? parse_number(value, std::get<0>(f->value))
                                                   : parse_list(value, std::get<1>(f->value)))) {
      continue;
    }
    std::string why = f == flags.end() ? "unknown flag " + a
                                       : a + " '" + value + "' is not " +
                                             (f->value.index() == 0
                                                  ? "a number (digits, optional K, M or G suffix)"
                                                  : "a list of rank counts from 1 to 64 (2,4,8)");
    std::fprintf(stderr, "%s: %s; --help lists the flags\n", program.c_str(), why.c_str());
    std::exit(2);
  }
}

std::uint8_t pattern_byte(std::uint64_t stream, std::uint64_t index) noexcept {
  return scenarios::data_byte(1, stream, index);
}

void fill_pattern(std::span<std::uint8_t> out, std::uint64_t stream, std::uint64_t first) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = pattern_byte(stream, first + i);
}

long long count_wrong(std::span<const std::uint8_t> got, std::uint64_t stream,
                      std::uint64_t first) {
  long long wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != pattern_byte(stream, first + i);
  return wrong;
}

AllToAll::AllToAll(std::size_t total, int rank_, int ranks)
    : rank(rank_),
      chunk(total / static_cast<std::size_t>(ranks)),
      send(chunk * ranks),
      recv(send.size()),
      sizes(static_cast<std::size_t>(ranks), chunk),
      counts(sizes.size(), static_cast<int>(chunk)),
      displs(sizes.size()) {
  fill_pattern(send, static_cast<std::uint64_t>(rank));
  for (std::size_t p = 0; p < displs.size(); ++p) displs[p] = static_cast<int>(p * chunk);
}

long long AllToAll::wrong() const {
  long long out = 0;
  for (std::size_t p = 0; p < sizes.size(); ++p) {
    out += count_wrong(std::span(recv).subspan(p * chunk, chunk), p, rank * chunk);
  }
  return out;
}

Flag Schedule::flag() {
  return {"--iters N", "timed operations per size, every side (default: by size)", &iters};
}

std::size_t Schedule::iterations(std::size_t bytes) const {
  return iters > 0 ? iters : by_size[bytes < (1u << 20) ? 0 : bytes < (16u << 20) ? 1 : 2];
}

double Schedule::time_us(std::size_t bytes, const std::function<void()>& op,
                         const std::function<void()>& barrier) const {
  for (std::size_t i = 0; i < warmup; ++i) op();
  barrier();
  std::size_t n = iterations(bytes);
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < n; ++i) op();
  barrier();
  std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
  return took.count() / static_cast<double>(n);
}

double Schedule::time_us_cluster(std::size_t bytes, const std::function<void()>& op,
                                 Communicator& c) const {
  auto now_ns = [] {
    return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now().time_since_epoch())
                                         .count());
  };
  Group world = c.world();
  for (std::size_t i = 0; i < warmup; ++i) op();
  c.barrier(world).wait();
  std::int64_t t[2] = {now_ns(), 0};
  std::size_t n = iterations(bytes);
  for (std::size_t i = 0; i < n; ++i) op();
  c.barrier(world).wait();
  t[1] = now_ns();
  c.all_reduce(world, {t, sizeof t}, DType::int64, ReduceOp::min).wait();
  return static_cast<double>(t[1] - t[0]) / 1000.0 / static_cast<double>(n);
}

Side simulate(int n, std::size_t segment_bytes, const std::function<Side(Communicator&)>& rank_fn) {
  sim::Options options;
  options.segment_bytes = std::max(std::size_t{1} << 30, segment_bytes);
  options.keep_trace = false;  // hashed, not kept: as sim explore and sim.run without trace=
  auto result = sim::Cluster::run(n, options, [&](Communicator& c) {
    Side side = rank_fn(c);
    std::vector<std::int64_t> wrong = {side.wrong};
    c.all_reduce(c.world(), {wrong.data(), 8}, DType::int64, ReduceOp::sum).wait();
    return std::to_string(side.us) + " " + std::to_string(wrong[0]);
  });
  Side side{0, -1};
  if (result.failure() != sim::Failure::none) {
    std::fprintf(stderr, "simulated run failed: %s\n", result.outcomes[0].message.c_str());
  } else {
    std::sscanf(result.outcomes[0].value.c_str(), "%lf %lld", &side.us, &side.wrong);
  }
  return side;
}

Report::Report(std::vector<std::string> sides, std::vector<std::string> extra)
    : sides_(std::move(sides)), extra_(std::move(extra)), busbw_sum_(sides_.size()) {}

void Report::header(const std::string& title) const {
  std::printf("\n# %s\n#%11s %12s %8s", title.c_str(), "size(B)", "count", "type");
  for (const std::string& side : sides_) {
    std::printf(" %10s %11s %11s %6s", ((side.empty() ? "time" : side) + "(us)").c_str(),
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  for (const std::string& e : extra_) std::printf("  %s", e.c_str());
  std::printf("\n");
}

void Report::row(std::size_t bytes, std::size_t count, const char* type, double bus_factor,
                 const std::vector<Side>& sides, const std::vector<std::string>& extra) {
  std::printf("%12zu %12zu %8s", bytes, count, type);
  for (std::size_t s = 0; s < sides.size(); ++s) {
    double algbw = sides[s].us > 0 ? static_cast<double>(bytes) / sides[s].us / 1e3 : 0.0;
    std::printf(" %10.2f %11.3f %11.3f %6lld", sides[s].us, algbw, algbw * bus_factor,
                sides[s].wrong);
    busbw_sum_[s] += algbw * bus_factor;
    wrong_ += sides[s].wrong < 0 ? 1 : sides[s].wrong;  // < 0: the run failed
  }
  for (const std::string& e : extra) std::printf("  %s", e.c_str());
  std::printf("\n");
  std::fflush(stdout);
  ++rows_;
}

int Report::footer() const {
  std::printf("# %-20s : %lld %s\n", "Out of bounds values", wrong_, wrong_ ? "FAILED" : "OK");
  for (std::size_t s = 0; s < sides_.size() && rows_ > 0; ++s) {
    std::printf("# %-20s : %.3f %s\n", "Avg bus bandwidth", busbw_sum_[s] / rows_,
                sides_[s].c_str());
  }
  std::printf("#\n");
  std::fflush(stdout);
  return status();
}

int run_google_benchmark(int argc, char** argv, const std::string& summary,
                         const std::function<long long(const Times&)>& after) {
  struct Reporter : benchmark::ConsoleReporter {  // keeps each run's time per iteration
    std::map<std::string, double> times;
    void ReportRuns(const std::vector<Run>& runs) override {
      for (const Run& run : runs) {
        if (run.run_type == Run::RT_Iteration && run.iterations > 0 && !run.error_occurred) {
          times[run.benchmark_name()] = run.GetAdjustedRealTime();
          times["seconds:" + run.benchmark_name()] =
              run.real_accumulated_time / static_cast<double>(run.iterations);
        }
      }
      ConsoleReporter::ReportRuns(runs);
    }
  } reporter;
  parse(&argc, argv, summary, {}, true);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  Report report;
  report.add_wrong(after([&](const std::string& name) {
    auto it = reporter.times.find(name);
    return it == reporter.times.end() ? std::nan("") : it->second;
  }));
  benchmark::Shutdown();
  return report.footer();
}

}  // namespace hpref::bench
