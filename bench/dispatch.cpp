// bench/dispatch: sequence dispatch forward + backward (SPEC 8) on the simulator for
// P = 2, 4, 8 ranks and global banks of 1 to 64 MiB, as bytes/s of rows moved and as a
// ratio to copying the same rows in one process (memcpy, same schedule, same run). The
// route is a sliding window as long as a shard, so every rank but the first receives its
// predecessor's whole shard forward and sends it back in the backward pass. Checked: the
// forward rows against the pattern, the backward sums against the gradients sent.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/dispatch.hpp"

using namespace hpref;

namespace {

constexpr std::int64_t kWidth = 256;  // float32 columns: 1 KiB rows
constexpr std::int64_t kRowBytes = kWidth * 4;

// Gradient element k (row-major over global rows): exact in float32 when a few are summed.
float grad_value(std::uint64_t k) { return 1.0f + bench::pattern_byte(1, k) / 256.0f; }

// Microseconds per forward+backward on rank 0 between barriers, and the wrong values: the
// forward rows against the pattern, the backward sums against the gradients sent.
bench::Side measure(int p, std::size_t bank_bytes, const bench::Schedule& schedule,
                    std::size_t& moved) {
  std::int64_t local = static_cast<std::int64_t>(bank_bytes) / kRowBytes / p;
  auto routes = sliding_window_routes(std::vector<std::int64_t>{0, local * p}, local, p, local);
  moved = 0;
  for (const Route& r : routes) {
    for (std::int64_t n : r.output_splits) moved += static_cast<std::size_t>(n * kRowBytes) * 2;
  }
  return bench::simulate(p, bank_bytes * 4, [&](Communicator& c) {
    const Route& route = routes[static_cast<std::size_t>(c.rank())];
    std::int64_t first = c.rank() * local, rows = route.global_end - route.global_start;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(local * kRowBytes));
    bench::fill_pattern(bytes, 0, static_cast<std::uint64_t>(first * kRowBytes));
    Tensor shard(DType::float32, {local, kWidth}, SharedBytes::adopt(std::move(bytes)));
    std::vector<std::uint8_t> g(static_cast<std::size_t>(rows * kRowBytes));
    for (std::int64_t k = 0; k < rows * kWidth; ++k) {
      float v = grad_value(route.global_start * kWidth + k);
      std::memcpy(&g[static_cast<std::size_t>(k) * 4], &v, 4);
    }
    Tensor grad(DType::float32, {rows, kWidth}, SharedBytes::adopt(std::move(g)));
    Tensor out, back;
    auto step = [&] {
      out = back = Tensor();  // freed before the next step allocates, as a step's own would be
      out = sequence_dispatch(c, c.world(), shard, 0, route);
      back = sequence_dispatch_backward(c, c.world(), grad, 0, route);
    };
    bench::Side side{schedule.time_us(bank_bytes, step, [&] { c.barrier(c.world()).wait(); }),
                     bench::count_wrong(out.bytes(), 0, route.global_start * kRowBytes)};
    for (std::int64_t k = first * kWidth; k < (first + local) * kWidth; ++k) {
      float cover = 0;  // the windows that hold row k / kWidth: their gradients add up
      for (const Route& r : routes)
        cover += r.global_start <= k / kWidth && k / kWidth < r.global_end;
      side.wrong += back.element<float>(k - first * kWidth) != grad_value(k) * cover;
    }
    return side;
  });
}

// memcpy of `bytes` in one process on the schedule of a bank of `bank_bytes`.
double copy_us(std::size_t bytes, std::size_t bank_bytes, const bench::Schedule& schedule) {
  std::vector<std::uint8_t> src(bytes), dst(bytes);
  bench::fill_pattern(src, 2);
  auto copy = [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    asm volatile("" : : "r"(dst.data()) : "memory");
  };
  return schedule.time_us(bank_bytes, copy, [] {});
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_bytes = std::size_t{64} << 20;
  std::vector<int> rank_counts = {2, 4, 8};
  // The schedule dispatch had before the harness: a step's cost depends on its index (the
  // allocator's state), and 3 warm-ups measured 16 MiB banks 1.3-2x slower, 10 iterations
  // 1 MiB banks 1.12x slower than 2 and 8.
  bench::Schedule schedule{.warmup = 2, .by_size = {8, 8, 3}};
  bench::parse(&argc, argv,
               "Sequence dispatch forward+backward on the simulator, banks of 1 MiB to "
               "--max-bytes (x4),\nagainst memcpy of the moved bytes.",
               {{"--max-bytes N", "largest global bank (default 64M)", &max_bytes},
                {"--ranks P,P,...", "simulated cluster sizes (default 2,4,8)", &rank_counts},
                schedule.flag()});
  std::printf(
      "# sequence dispatch forward+backward on the simulator; bank = global rows x %lld "
      "float32 columns\n# size = moved: rows crossing ranks, both directions; vs memcpy "
      "= one-process memcpy time of the moved bytes / simulator time (1.0 would be a "
      "copy's speed)\n",
      static_cast<long long>(kWidth));
  bench::Report report({""}, {"bank(B)", "vs memcpy"});
  for (int p : rank_counts) {
    report.header("sequence_dispatch forward+backward, " + std::to_string(p) + " ranks");
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
      std::size_t moved = 0;
      bench::Side side = measure(p, bytes, schedule, moved);
      double copy = copy_us(moved, bytes, schedule);
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%8.3fx", side.us > 0 ? copy / side.us : 0.0);
      report.row(moved, moved / 4, "float32", 1.0, {side}, {std::to_string(bytes), ratio});
    }
  }
  return report.footer();
}
