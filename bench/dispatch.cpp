// bench/dispatch: sequence dispatch forward + backward (SPEC 8) on the simulator for
// P = 2, 4, 8 ranks and global banks of 1 to 64 MiB, as bytes/s of rows moved and as a
// ratio to copying the same rows in one process (memcpy, measured in the same run). The
// route is a sliding window as long as a shard, so every rank but the first receives its
// predecessor's whole shard forward and sends it back in the backward pass.
//
//   bench_dispatch [--max-bytes N] [--ranks 2,4,8]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hpref/dispatch.hpp"
#include "hpref/sim/cluster.hpp"

using namespace hpref;

namespace {

constexpr std::int64_t kWidth = 256;  // float32 columns: 1 KiB rows

int iterations(std::size_t bytes) { return bytes >= (16u << 20) ? 3 : 8; }

// Seconds per forward+backward, timed on rank 0 between barriers.
double measure(int p, std::size_t bank_bytes, std::size_t& moved) {
  std::int64_t rows = static_cast<std::int64_t>(bank_bytes / (kWidth * 4));
  std::int64_t local = rows / p;
  std::vector<std::int64_t> boundaries = {0, local * p};
  auto routes = sliding_window_routes(boundaries, local, p, local);
  moved = 0;
  for (const Route& r : routes) {
    for (std::int64_t n : r.output_splits) moved += static_cast<std::size_t>(n * kWidth * 4) * 2;  // there and back
  }
  sim::Options options;
  options.segment_bytes = std::max<std::size_t>(std::size_t{1} << 30, bank_bytes * 4);
  auto result = sim::Cluster::run(p, options, [&](Communicator& c) {
    const Route& route = routes[static_cast<std::size_t>(c.rank())];
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(local * kWidth * 4), 1);
    Tensor shard(DType::float32, {local, kWidth}, SharedBytes::adopt(std::move(bytes)));
    std::int64_t out_rows = route.global_end - route.global_start;
    std::vector<std::uint8_t> gbytes(static_cast<std::size_t>(out_rows * kWidth * 4), 2);
    Tensor grad(DType::float32, {out_rows, kWidth}, SharedBytes::adopt(std::move(gbytes)));
    auto step = [&] {
      Tensor out = sequence_dispatch(c, c.world(), shard, 0, route);
      Tensor back = sequence_dispatch_backward(c, c.world(), grad, 0, route);
      return out.nbytes() + back.nbytes();
    };
    for (int i = 0; i < 2; ++i) step();
    c.barrier(c.world()).wait();
    int iters = iterations(bank_bytes);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) step();
    c.barrier(c.world()).wait();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    return std::to_string(s);
  });
  if (result.failure() != sim::Failure::none) {
    std::fprintf(stderr, "simulated run failed: %s\n", result.outcomes[0].message.c_str());
    return 0;
  }
  return std::atof(result.outcomes[0].value.c_str());
}

double copy_seconds(std::size_t bytes) {
  std::vector<std::uint8_t> src(bytes, 3), dst(bytes);
  std::memcpy(dst.data(), src.data(), bytes);
  int iters = 5;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(dst.data(), src.data(), bytes);
    asm volatile("" : : "r"(dst.data()) : "memory");
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_bytes = 64u << 20;
  std::vector<int> rank_counts = {2, 4, 8};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-bytes" && i + 1 < argc) {
      max_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--ranks" && i + 1 < argc) {
      rank_counts.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) rank_counts.push_back(std::atoi(p));
    } else {
      std::fprintf(stderr, "usage: %s [--max-bytes N] [--ranks 2,4,8]\n", argv[0]);
      return 2;
    }
  }
  std::printf("# sequence dispatch forward+backward on the simulator; bank = global rows x %lld float32 columns\n",
              static_cast<long long>(kWidth));
  std::printf("# moved = rows crossing ranks, both directions; ratio = one-process memcpy time of the moved bytes / "
              "simulator time (1.0 would be a copy's speed)\n");
  std::printf("%6s %12s %12s %12s %12s %10s\n", "ranks", "bank(B)", "moved(B)", "time(us)", "GB/s", "vs memcpy");
  for (int p : rank_counts) {
    for (std::size_t bytes = 1u << 20; bytes <= max_bytes; bytes *= 4) {
      std::size_t moved = 0;
      double s = measure(p, bytes, moved);
      double copy = copy_seconds(moved);
      std::printf("%6d %12zu %12zu %12.1f %12.3f %9.3fx\n", p, bytes, moved, s * 1e6,
                  s > 0 ? static_cast<double>(moved) / s / 1e9 : 0.0, s > 0 ? copy / s : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
