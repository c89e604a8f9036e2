// bench/sim_collectives: the simulator's all_to_all_v, all_gather and broadcast (2, 4, 8
// ranks, 1 KiB ... 64 MiB per rank) in nccl-tests' rows, with two last columns: the
// one-copy limit (one memcpy, in this process, of the bytes that cross ranks, timed in the
// same run) and OpenMPI's MPI_Alltoallv / MPI_Allgather / MPI_Bcast on the same machine:
// bench_mpi_alltoallv, launched here under mpirun with the same sizes and schedule. Not
// Google Benchmark: each row is timed inside a simulated cluster (between barriers: from the
// first rank to leave one to the first to leave the next, Schedule::time_us_cluster),
// as nccl-tests time inside their ranks.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/communicator.hpp"
#include "hpref/sim/cluster.hpp"

using namespace hpref;

namespace {

enum class Op { all_to_all_v, all_gather, broadcast };

// Times `op` with `bytes` per rank on a fresh simulated cluster of n ranks.
bench::Side measure(Op op, int n, std::size_t bytes, const bench::Schedule& schedule) {
  return bench::simulate(n, bytes * static_cast<std::size_t>(n) * 4, [&](Communicator& c) {
    std::size_t chunk = bytes / static_cast<std::size_t>(n);
    bench::AllToAll a(op == Op::all_to_all_v ? bytes : 0, c.rank(), n);
    std::vector<std::uint8_t> send(op == Op::all_gather ? chunk : 0);
    std::vector<std::uint8_t> recv(op == Op::all_gather  ? chunk * static_cast<std::size_t>(n)
                                   : op == Op::broadcast ? bytes
                                                         : 0);
    bench::fill_pattern(send, static_cast<std::uint64_t>(c.rank()));
    if (op == Op::broadcast && c.rank() == 0) bench::fill_pattern(recv, 0);
    Group w = c.world();
    auto once = [&] {
      if (op == Op::all_to_all_v) {
        c.all_to_all_v(w, {a.send.data(), a.send.size()}, a.sizes, {a.recv.data(), a.recv.size()},
                       a.sizes)
            .wait();
      } else if (op == Op::all_gather) {
        c.all_gather(w, {send.data(), send.size()}, {recv.data(), recv.size()}).wait();
      } else {
        c.broadcast(w, {recv.data(), recv.size()}, 0).wait();
      }
    };
    bench::Side side{schedule.time_us_cluster(bytes, once, c),
                     op == Op::broadcast ? bench::count_wrong(recv, 0) : a.wrong()};
    for (std::size_t p = 0; op == Op::all_gather && p < static_cast<std::size_t>(n); ++p) {
      side.wrong += bench::count_wrong(std::span(recv).subspan(p * chunk, chunk), p);
    }
    return side;
  });
}

// The one-copy limit: one memcpy of the (n - 1) * bytes that cross ranks in every one of
// these operations (all_to_all_v and all_gather: (n - 1) / n of each rank's bytes; broadcast:
// the root's bytes to n - 1 ranks), into a buffer of this process, on the same schedule.
double measure_one_copy(int n, std::size_t bytes, const bench::Schedule& schedule) {
  std::size_t crossing = bytes * static_cast<std::size_t>(n - 1);
  std::vector<std::uint8_t> src(crossing, 1), dst(crossing);
  return schedule.time_us(
      bytes, [&] { std::memcpy(dst.data(), src.data(), crossing); }, [] {});
}

using PeerRows = std::map<Op, std::map<std::size_t, bench::Side>>;

// MPI_Alltoallv's, MPI_Allgather's and MPI_Bcast's rows by size for n ranks, from one
// mpirun of the peer with the same sizes and schedule; empty if it did not run.
PeerRows measure_mpi(const std::string& peer, int n, std::size_t min_bytes, std::size_t max_bytes,
                     const bench::Schedule& schedule) {
  PeerRows out;
  Op section = Op::all_to_all_v;
  std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(n) + " " +
                    peer + " --min-bytes " + std::to_string(min_bytes) + " --max-bytes " +
                    std::to_string(max_bytes) + " --iters " + std::to_string(schedule.iters);
  FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
  char line[512];
  while (pipe && std::fgets(line, sizeof line, pipe)) {
    unsigned long long bytes = 0;
    bench::Side side;
    if (std::strncmp(line, "# MPI_", 6) == 0) {
      section = std::strncmp(line, "# MPI_Allgather", 15) == 0 ? Op::all_gather
                : std::strncmp(line, "# MPI_Bcast", 11) == 0   ? Op::broadcast
                                                               : Op::all_to_all_v;
    }
    if (line[0] != '#' &&
        std::sscanf(line, "%llu %*s %*s %lf %*s %*s %lld", &bytes, &side.us, &side.wrong) == 3) {
      out[section][bytes] = side;
    }
  }
  if (pipe) pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t min_bytes = 1024, max_bytes = std::size_t{64} << 20;
  std::vector<int> rank_counts = {2, 4, 8};
  bool no_mpi = false, only_a2a = false, only_gather = false, only_bcast = false;
  bench::Schedule schedule;
  bench::parse(&argc, argv,
               "The simulator's all_to_all_v, all_gather and broadcast, 1 KiB to --max-bytes "
               "per rank (doubling),\nagainst one memcpy of the bytes that cross ranks and "
               "OpenMPI's MPI_Alltoallv,\nMPI_Allgather and MPI_Bcast (bench_mpi_alltoallv).",
               {{"--min-bytes N", "smallest bytes per rank (default 1K)", &min_bytes},
                {"--max-bytes N", "largest bytes per rank (default 64M)", &max_bytes},
                {"--ranks P,P,...", "simulated cluster sizes (default 2,4,8)", &rank_counts},
                {"--no-mpi", "leave out the OpenMPI column", &no_mpi},
                {"--all-to-all-v", "only all_to_all_v (with the two below: those)", &only_a2a},
                {"--all-gather", "only all_gather", &only_gather},
                {"--broadcast", "only broadcast", &only_bcast},
                schedule.flag()});
  std::string self = argv[0];
  std::string peer = self.substr(0, self.rfind('/') + 1) + "bench_mpi_alltoallv";
  if (!no_mpi && access(peer.c_str(), X_OK) != 0) {
    std::printf("# %s not built (no MPI at configure time): no OpenMPI column\n", peer.c_str());
    no_mpi = true;
  }
  std::printf(
      "# hpref simulator collectives; sizes are bytes per rank; busbw as nccl-tests "
      "(all_to_all_v, all_gather: algbw*(n-1)/n; broadcast: algbw)\n");
  std::printf(
      "# one-copy: simulator time / one memcpy in this process of the (ranks - 1) * size bytes "
      "that cross ranks (1.0: the limit), and that memcpy's time\n"
      "# vs OpenMPI: OpenMPI's time (MPI_Alltoallv, MPI_Allgather, MPI_Bcast) / simulator time "
      "on the same sizes (> 1: the simulator is faster), mpirun --oversubscribe on this "
      "machine\n");
  if (min_bytes < 1 || min_bytes > max_bytes) {
    std::fprintf(stderr, "--min-bytes %zu must be at least 1 and at most --max-bytes %zu\n",
                 min_bytes, max_bytes);
    return 2;
  }
  std::vector<Op> ops;
  bool all = !only_a2a && !only_gather && !only_bcast;
  if (all || only_a2a) ops.push_back(Op::all_to_all_v);
  if (all || only_gather) ops.push_back(Op::all_gather);
  if (all || only_bcast) ops.push_back(Op::broadcast);
  bench::Report report({""}, {"vs one-copy", "vs OpenMPI"});
  for (int n : rank_counts) {
    PeerRows peer_rows = no_mpi ? PeerRows{} : measure_mpi(peer, n, min_bytes, max_bytes, schedule);
    // SPEC 9.3 makes each member's launch and wait a scheduling decision: 2n an operation.
    try {
      sim::HandoffFloor floor = sim::measure_handoff_floor(n, 20000);
      std::printf(
          "# handoff floor, %d ranks (bare processes on one CPU): %.2f us a decision through a "
          "monitor (the simulator's design), %.2f us handed directly; an operation's %d "
          "decisions: %.1f us, %.1f us\n",
          n, floor.via_monitor_us, floor.direct_us, 2 * n, 2 * n * floor.via_monitor_us,
          2 * n * floor.direct_us);
    } catch (const Error& e) {
      std::printf("# handoff floor, %d ranks: not measured: %s\n", n, e.what());
    }
    for (Op op : ops) {
      const char* name[] = {"all_to_all_v", "all_gather", "broadcast"};
      report.header(name[static_cast<int>(op)] + (", " + std::to_string(n)) + " ranks");
      for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        bench::Side ours = measure(op, n, bytes, schedule);
        double limit = measure_one_copy(n, bytes, schedule);
        char copy[64];
        std::snprintf(copy, sizeof copy, "%.1fx (%.2fus)", ours.us / limit, limit);
        auto it = peer_rows[op].find(bytes);
        char vs[64] = "-";
        if (it != peer_rows[op].end()) {  // the peer's wrong bytes count too
          report.add_wrong(it->second.wrong);
          std::snprintf(vs, sizeof vs, "%.2fx (%.1fus%s)", it->second.us / ours.us, it->second.us,
                        it->second.wrong ? ", WRONG BYTES" : "");
        }
        report.row(bytes, bytes, "uint8", op == Op::broadcast ? 1.0 : (n - 1.0) / n, {ours},
                   {copy, vs});
      }
    }
  }
  return report.footer();
}
