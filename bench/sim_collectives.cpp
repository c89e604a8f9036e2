// bench/sim_collectives: the simulator's all_to_all_v, all_gather and broadcast (2, 4, 8
// ranks, 1 KiB ... 64 MiB per rank) in nccl-tests' rows, with a last column comparing
// OpenMPI's MPI_Alltoallv on the same machine: bench_mpi_alltoallv, launched here under
// mpirun with the same sizes and schedule. Not Google Benchmark: each row is timed inside
// a simulated cluster (rank 0 between barriers), as nccl-tests time inside their ranks.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/communicator.hpp"

using namespace hpref;

namespace {

enum class Op { all_to_all_v, all_gather, broadcast };

// Times `op` with `bytes` per rank on a fresh simulated cluster of n ranks.
bench::Side measure(Op op, int n, std::size_t bytes, const bench::Schedule& schedule) {
  return bench::simulate(n, bytes * static_cast<std::size_t>(n) * 3, [&](Communicator& c) {
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
    bench::Side side{schedule.time_us(bytes, once, [&] { c.barrier(w).wait(); }),
                     op == Op::broadcast ? bench::count_wrong(recv, 0) : a.wrong()};
    for (std::size_t p = 0; op == Op::all_gather && p < static_cast<std::size_t>(n); ++p) {
      side.wrong += bench::count_wrong(std::span(recv).subspan(p * chunk, chunk), p);
    }
    return side;
  });
}

// MPI_Alltoallv's rows by size for n ranks, from one mpirun of the peer with the same
// sizes and schedule; empty if it did not run.
std::map<std::size_t, bench::Side> measure_mpi(const std::string& peer, int n,
                                               std::size_t max_bytes,
                                               const bench::Schedule& schedule) {
  std::map<std::size_t, bench::Side> out;
  std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(n) + " " +
                    peer + " --max-bytes " + std::to_string(max_bytes) + " --iters " +
                    std::to_string(schedule.iters);
  FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
  char line[512];
  while (pipe && std::fgets(line, sizeof line, pipe)) {
    unsigned long long bytes = 0;
    bench::Side side;
    if (line[0] != '#' &&
        std::sscanf(line, "%llu %*s %*s %lf %*s %*s %lld", &bytes, &side.us, &side.wrong) == 3) {
      out[bytes] = side;
    }
  }
  if (pipe) pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_bytes = std::size_t{64} << 20;
  std::vector<int> rank_counts = {2, 4, 8};
  bool no_mpi = false;
  bench::Schedule schedule;
  bench::parse(&argc, argv,
               "The simulator's all_to_all_v, all_gather and broadcast, 1 KiB to --max-bytes "
               "per rank (doubling),\nagainst OpenMPI's MPI_Alltoallv (bench_mpi_alltoallv).",
               {{"--max-bytes N", "largest bytes per rank (default 64M)", &max_bytes},
                {"--ranks P,P,...", "simulated cluster sizes (default 2,4,8)", &rank_counts},
                {"--no-mpi", "leave out the OpenMPI column", &no_mpi},
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
      "# last column: OpenMPI MPI_Alltoallv time / simulator time on the same sizes "
      "(> 1: the simulator is faster), mpirun --oversubscribe on this machine\n");
  bench::Report report({""}, {"vs OpenMPI"});
  for (int n : rank_counts) {
    auto peer_rows =
        no_mpi ? std::map<std::size_t, bench::Side>{} : measure_mpi(peer, n, max_bytes, schedule);
    for (Op op : {Op::all_to_all_v, Op::all_gather, Op::broadcast}) {
      const char* name[] = {"all_to_all_v", "all_gather", "broadcast"};
      report.header(name[static_cast<int>(op)] + (", " + std::to_string(n)) + " ranks");
      for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
        bench::Side ours = measure(op, n, bytes, schedule);
        auto it = op == Op::all_to_all_v ? peer_rows.find(bytes) : peer_rows.end();
        char vs[64] = "-";
        if (it != peer_rows.end()) {  // the peer's wrong bytes count too
          report.add_wrong(it->second.wrong);
          std::snprintf(vs, sizeof vs, "%.2fx (%.1fus%s)", it->second.us / ours.us, it->second.us,
                        it->second.wrong ? ", WRONG BYTES" : "");
        }
        report.row(bytes, bytes, "uint8", op == Op::broadcast ? 1.0 : (n - 1.0) / n, {ours}, {vs});
      }
    }
  }
  return report.footer();
}
