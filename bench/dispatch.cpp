// bench/dispatch: sequence dispatch forward and backward (SPEC 8) on the simulator for
// P = 2, 4, 8 ranks and global banks of 1 to 64 MiB, each timed alone, as bytes/s of rows
// moved and as a ratio to copying the same rows in one process (memcpy, same schedule, same
// run). A third side is the bare all_to_all_v of the same counts from and into buffers kept
// across steps: what the simulator alone costs, so that dispatch's own share is the
// difference. Dispatch keeps one DispatchBuffers across steps (--fresh: the calls without
// it). The route is a sliding window as long as a shard, so every rank but the first
// receives its predecessor's whole shard forward and sends it back in the backward pass.
// Checked: the forward rows against the pattern, the backward sums against the gradients
// sent, the bare exchange's rows against the pattern.
#include <cstdio>
#include <cstring>
#include <numeric>
#include <span>
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

enum class Op { forward, backward, exchange };

// The backward sums of this rank's shard against the gradients of every window holding
// the row.
long long wrong_sums(const std::vector<Route>& routes, std::int64_t first, std::int64_t local,
                     const Tensor& back) {
  long long wrong = 0;
  for (std::int64_t k = first * kWidth; k < (first + local) * kWidth; ++k) {
    float cover = 0;  // the windows that hold row k / kWidth: their gradients add up
    for (const Route& r : routes)
      cover += r.global_start <= k / kWidth && k / kWidth < r.global_end;
    wrong += back.element<float>(k - first * kWidth) != grad_value(k) * cover;
  }
  return wrong;
}

// Microseconds per operation `op` between barriers (Schedule::time_us_cluster), and the wrong
// values.
bench::Side measure(Op op, int p, std::size_t bank_bytes, const bench::Schedule& schedule,
                    bool fresh) {
  std::int64_t local = static_cast<std::int64_t>(bank_bytes) / kRowBytes / p;
  auto routes = sliding_window_routes(std::vector<std::int64_t>{0, local * p}, local, p, local);
  return bench::simulate(p, bank_bytes * 4, [&](Communicator& c) {
    const Route& route = routes[static_cast<std::size_t>(c.rank())];
    std::int64_t first = c.rank() * local, rows = route.global_end - route.global_start;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(local * kRowBytes));
    bench::fill_pattern(bytes, 0, static_cast<std::uint64_t>(first * kRowBytes));
    Tensor shard(DType::float32, {local, kWidth}, SharedBytes::adopt(std::move(bytes)));
    DispatchBuffers buffers;  // kept across steps, as a training loop keeps it
    if (op == Op::forward) {
      Tensor out;
      double us = schedule.time_us_cluster(
          bank_bytes,
          [&] {
            out = Tensor();  // freed before the next step allocates, as a step's own would be
            out = fresh ? sequence_dispatch(c, c.world(), shard, 0, route)
                        : sequence_dispatch(c, c.world(), shard, 0, route, buffers);
          },
          c);
      return bench::Side{us, bench::count_wrong(out.bytes(), 0, route.global_start * kRowBytes)};
    }
    if (op == Op::backward) {
      std::vector<std::uint8_t> g(static_cast<std::size_t>(rows * kRowBytes));
      for (std::int64_t k = 0; k < rows * kWidth; ++k) {
        float v = grad_value(route.global_start * kWidth + k);
        std::memcpy(&g[static_cast<std::size_t>(k) * 4], &v, 4);
      }
      Tensor grad(DType::float32, {rows, kWidth}, SharedBytes::adopt(std::move(g)));
      Tensor back;
      double us = schedule.time_us_cluster(
          bank_bytes,
          [&] {
            back = Tensor();
            back = fresh ? sequence_dispatch_backward(c, c.world(), grad, 0, route)
                         : sequence_dispatch_backward(c, c.world(), grad, 0, route, buffers);
          },
          c);
      return bench::Side{us, wrong_sums(routes, first, local, back)};
    }
    // The bare exchange: the forward's counts, from the shard's sent rows (one run here)
    // into a buffer kept across steps.
    std::vector<std::size_t> in_counts, out_counts;
    for (std::int64_t n : route.input_splits)
      in_counts.push_back(static_cast<std::size_t>(n * kRowBytes));
    for (std::int64_t n : route.output_splits)
      out_counts.push_back(static_cast<std::size_t>(n * kRowBytes));
    std::vector<std::uint8_t> recv(std::accumulate(out_counts.begin(), out_counts.end(), 0ul));
    std::size_t sent = std::accumulate(in_counts.begin(), in_counts.end(), 0ul), offset = 0;
    for (auto [off, n] : route.owner_ranges())
      offset = n > 0 ? static_cast<std::size_t>(off * kRowBytes) : offset;
    double us = schedule.time_us_cluster(
        bank_bytes,
        [&] {
          c.all_to_all_v(c.world(), {shard.bytes().data() + offset, sent, MemorySpace::host},
                         in_counts, {recv.data(), recv.size(), MemorySpace::host}, out_counts)
              .wait();
        },
        c);
    return bench::Side{us, bench::count_wrong(recv, 0, route.global_start * kRowBytes)};
  });
}

// Bytes one direction moves: the forward's received rows, which the backward sends back.
std::size_t moved_bytes(int p, std::size_t bank_bytes) {
  std::int64_t local = static_cast<std::int64_t>(bank_bytes) / kRowBytes / p;
  std::size_t moved = 0;
  for (const Route& r :
       sliding_window_routes(std::vector<std::int64_t>{0, local * p}, local, p, local)) {
    for (std::int64_t n : r.output_splits) moved += static_cast<std::size_t>(n * kRowBytes);
  }
  return moved;
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
  bool fresh = false;
  bench::Schedule schedule;
  bench::parse(&argc, argv,
               "Sequence dispatch forward and backward on the simulator, each alone, and the bare\n"
               "all_to_all_v of the same counts, banks of 1 MiB to --max-bytes (x4), against\n"
               "memcpy of the moved bytes.",
               {{"--max-bytes N", "largest global bank (default 64M)", &max_bytes},
                {"--ranks P,P,...", "simulated cluster sizes (default 2,4,8)", &rank_counts},
                {"--fresh", "dispatch without DispatchBuffers (fresh memory every step)", &fresh},
                {"--warmup N", "untimed operations before each side (default 3)", &schedule.warmup},
                schedule.flag()});
  std::printf(
      "# sequence dispatch on the simulator; bank = global rows x %lld float32 columns\n"
      "# size = moved: rows crossing ranks one way (forward's received rows, which the backward\n"
      "# sends back); a2a = bare all_to_all_v of the forward's counts from and into kept buffers\n"
      "# fwd%%, bwd%%, a2a%% = one-process memcpy time of the moved bytes / that side's time\n",
      static_cast<long long>(kWidth));
  bench::Report report({"fwd", "bwd", "a2a"}, {"bank(B)", "fwd%", "bwd%", "a2a%"});
  for (int p : rank_counts) {
    report.header("sequence_dispatch, " + std::to_string(p) + " ranks");
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
      std::size_t moved = moved_bytes(p, bytes);
      std::vector<bench::Side> sides;
      for (Op op : {Op::forward, Op::backward, Op::exchange})
        sides.push_back(measure(op, p, bytes, schedule, fresh));
      double copy = copy_us(moved, bytes, schedule);
      std::vector<std::string> extra = {std::to_string(bytes)};
      for (const bench::Side& side : sides) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%5.1f%%", side.us > 0 ? 100 * copy / side.us : 0.0);
        extra.push_back(ratio);
      }
      report.row(moved, moved / 4, "float32", 1.0, sides, extra);
    }
  }
  return report.footer();
}
