// The NCCL check: one rank per visible GPU in one process (ncclCommInitAll, a thread per
// GPU) runs the collective and dispatch scenarios of tests/sim, which check every result
// against values each rank regenerates and against the oracle, then a check of buffers
// that already live in device memory, and prints a pass/fail table. With one GPU the
// world is one rank. Exit status 0 when every row passed.
//
//   hpref_gpu_check [--seeds N] [--devices N] [--timeout-ms T]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "hpref/error.hpp"
#include "hpref/nccl/communicator.hpp"
#include "hpref/scenarios/harness.hpp"

namespace {

struct Row {
  std::string name;
  std::string seed;
  int ranks = 0;
  std::string result;
  bool ok = false;
  double ms = 0;
};

std::string first_line(std::string s) {
  auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s.size() > 150 ? s.substr(0, 147) + "..." : s;
}

namespace sc = hpref::scenarios;

// Runs fn(rank communicator) on a fresh clique, a thread per GPU; "" when every rank
// returned, else the first failure.
std::string on_clique(const sc::WorldOptions& options,
                      const std::function<std::string(hpref::Communicator&)>& fn,
                      std::string* value) {
  auto results = sc::run_world(*sc::open_world("nccl-clique", options), fn);
  if (value) *value = results[0].value;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const sc::RankResult& r = results[i];
    if (r.ok) continue;
    return "rank " + std::to_string(i) + ": " + (r.code ? r.kind + ": " : "") + r.message;
  }
  return "";
}

// Buffers that already live in device memory travel in place (no staging).
std::string device_buffers(hpref::Communicator& c) {
  using hpref::MemorySpace;
  const std::size_t each = 1 << 20;
  auto n = static_cast<std::size_t>(c.size());
  std::vector<unsigned char> host_in(each), host_out(each * n);
  for (std::size_t i = 0; i < each; ++i)
    host_in[i] = static_cast<unsigned char>(i * 7 + static_cast<std::size_t>(c.rank()));
  void *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, each) != cudaSuccess || cudaMalloc(&out, each * n) != cudaSuccess)
    return "cudaMalloc failed";
  cudaMemcpy(in, host_in.data(), each, cudaMemcpyHostToDevice);
  c.all_gather(c.world(), {in, each, MemorySpace::accelerator},
               {out, each * n, MemorySpace::accelerator})
      .wait();
  cudaMemcpy(host_out.data(), out, each * n, cudaMemcpyDeviceToHost);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < each; i += 997) {
      if (host_out[r * each + i] != static_cast<unsigned char>(i * 7 + r)) {
        cudaFree(in);
        cudaFree(out);
        throw hpref::Error(hpref::Errc::scenario_check, "device all_gather: member " +
                                                            std::to_string(r) + " byte " +
                                                            std::to_string(i) + " differs");
      }
    }
  }
  // all_to_all_v: rank r sends r + j + 1 bytes of value (r * 16 + j) to rank j.
  std::vector<std::size_t> in_counts(n), out_counts(n);
  for (std::size_t j = 0; j < n; ++j) {
    in_counts[j] = static_cast<std::size_t>(c.rank()) + j + 1;
    out_counts[j] = j + static_cast<std::size_t>(c.rank()) + 1;
  }
  std::vector<unsigned char> send;
  for (std::size_t j = 0; j < n; ++j)
    send.insert(send.end(), in_counts[j],
                static_cast<unsigned char>(c.rank() * 16 + static_cast<int>(j)));
  std::size_t received = std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0});
  cudaMemcpy(in, send.data(), send.size(), cudaMemcpyHostToDevice);
  c.all_to_all_v(c.world(), {in, send.size(), MemorySpace::accelerator}, in_counts,
                 {out, received, MemorySpace::accelerator}, out_counts)
      .wait();
  std::vector<unsigned char> got(received);
  cudaMemcpy(got.data(), out, received, cudaMemcpyDeviceToHost);
  cudaFree(in);
  cudaFree(out);
  std::size_t off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < out_counts[i]; ++k, ++off) {
      if (got[off] != static_cast<unsigned char>(i * 16 + static_cast<std::size_t>(c.rank()))) {
        throw hpref::Error(
            hpref::Errc::scenario_check,
            "device all_to_all_v: the block from rank " + std::to_string(i) + " differs");
      }
    }
  }
  return "ok";
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 3, devices = hpref::nccl::visible_devices();
  sc::WorldOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--seeds" || a == "--devices" || a == "--timeout-ms") && i + 1 < argc) {
      int v = std::atoi(argv[++i]);
      if (a == "--seeds") seeds = v;
      if (a == "--devices") devices = v;
      if (a == "--timeout-ms") options.timeout_ms = v;
    } else {
      std::fprintf(stderr, "usage: hpref_gpu_check [--seeds N] [--devices N] [--timeout-ms T]\n");
      return 2;
    }
  }
  if (devices < 1) {
    std::fprintf(stderr, "hpref_gpu_check: no CUDA device is visible\n");
    return 2;
  }
  std::printf(
      "hpref GPU check: %d rank(s), one per GPU, in one process (ncclCommInitAll, a thread per "
      "GPU)\n",
      devices);
  std::fflush(stdout);
  std::vector<Row> rows;
  auto timed = [&](Row row, const std::function<std::string(std::string*)>& body) {
    auto start = std::chrono::steady_clock::now();
    std::string value, error;
    try {
      error = body(&value);
    } catch (const std::exception& e) {
      error = e.what();
    }
    row.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    row.ok = error.empty();
    row.result = row.ok ? "pass (" + first_line(value) + ")" : "FAIL: " + first_line(error);
    std::printf("  %-18s seed %-4s %s\n", row.name.c_str(), row.seed.c_str(), row.result.c_str());
    std::fflush(stdout);
    rows.push_back(row);
  };
  options.devices = devices;
  // The collective scenarios and the dispatch: every working scenario but the data-plane
  // ones, whose control groups are host groups (they run under mpirun --backend nccl).
  for (const sc::Scenario* s :
       sc::select({.kind = sc::BackendKind::device, .ranks = devices, .host_groups = false})) {
    for (int seed = 1; seed <= seeds; ++seed) {
      timed({s->name, std::to_string(seed), devices, "", false, 0}, [&](std::string* value) {
        sc::ScenarioContext ctx{static_cast<std::uint64_t>(seed), devices};
        return on_clique(
            options, [&](hpref::Communicator& c) { return s->fn(c, ctx); }, value);
      });
    }
  }
  // Checked mode once: the signatures agree, so the program runs as before.
  timed({"collectives checked", "1", devices, "", false, 0}, [&](std::string* value) {
    sc::WorldOptions checked = options;
    checked.checked = true;
    return on_clique(
        checked,
        [&](hpref::Communicator& c) {
          return sc::find_scenario("collectives")->fn(c, sc::ScenarioContext{1, devices});
        },
        value);
  });
  timed({"device buffers", "-", devices, "", false, 0},
        [&](std::string* value) { return on_clique(options, device_buffers, value); });

  int passed = 0;
  std::printf("\n| %-20s | %-4s | %-5s | %-8s | %-60s |\n", "check", "seed", "ranks", "ms",
              "result");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(), std::string(6, '-').c_str(),
              std::string(7, '-').c_str(), std::string(10, '-').c_str(),
              std::string(62, '-').c_str());
  for (const Row& r : rows) {
    std::printf("| %-20s | %-4s | %-5d | %8.1f | %-60s |\n", r.name.c_str(), r.seed.c_str(),
                r.ranks, r.ms, r.result.substr(0, 60).c_str());
    passed += r.ok ? 1 : 0;
  }
  std::printf("\n%d of %zu checks passed on %d GPU(s)\n", passed, rows.size(), devices);
  return passed == static_cast<int>(rows.size()) ? 0 : 1;
}
