// bench/sim_collectives: the simulator's all_to_all_v (2, 4, 8 ranks, 1 KiB ... 64 MiB per
// rank), all_gather and broadcast, in nccl-tests' columns, with a last column comparing
// OpenMPI's MPI_Alltoallv measured on the same machine by launching mpirun itself
// (bench_mpi_alltoallv). Not Google Benchmark: each row is timed inside a simulated
// cluster (rank 0 between barriers), as nccl-tests time inside their ranks.
//
//   bench_sim_collectives [--max-bytes N] [--ranks 2,4,8] [--no-mpi]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "hpref/sim/cluster.hpp"

using namespace hpref;

namespace {

enum class Op { all_to_all_v, all_gather, broadcast };
const char* op_name(Op op) {
  return op == Op::all_to_all_v ? "all_to_all_v" : op == Op::all_gather ? "all_gather" : "broadcast";
}

int iterations(std::size_t bytes) { return bytes >= (16u << 20) ? 3 : bytes >= (1u << 20) ? 10 : 50; }

struct Row {
  double us = 0;
  long long wrong = 0;
};

std::uint8_t pattern(int rank, std::size_t i) { return static_cast<std::uint8_t>(rank * 31 + i); }

// Times `op` with `bytes` per rank on a fresh simulated cluster of n ranks.
Row measure(Op op, int n, std::size_t bytes) {
  sim::Options options;
  options.seed = 1;
  options.segment_bytes = std::max<std::size_t>(std::size_t{1} << 30, bytes * static_cast<std::size_t>(n) * 3);
  auto result = sim::Cluster::run(n, options, [&](Communicator& c) {
    std::size_t chunk = bytes / static_cast<std::size_t>(n);
    std::vector<std::uint8_t> send, recv;
    std::vector<std::size_t> counts(static_cast<std::size_t>(n), chunk);
    Group w = c.world();
    auto once = [&] {
      switch (op) {
        case Op::all_to_all_v:
          c.all_to_all_v(w, {send.data(), send.size()}, counts, {recv.data(), recv.size()}, counts).wait();
          break;
        case Op::all_gather:
          c.all_gather(w, {send.data(), send.size()}, {recv.data(), recv.size()}).wait();
          break;
        case Op::broadcast:
          c.broadcast(w, {recv.data(), recv.size()}, 0).wait();
          break;
      }
    };
    if (op == Op::all_to_all_v) {
      send.resize(chunk * static_cast<std::size_t>(n));
      recv.resize(send.size());
    } else if (op == Op::all_gather) {
      send.resize(chunk);
      recv.resize(chunk * static_cast<std::size_t>(n));
    } else {
      recv.resize(bytes);
    }
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = pattern(c.rank(), i);
    if (op == Op::broadcast && c.rank() == 0) {
      for (std::size_t i = 0; i < recv.size(); ++i) recv[i] = pattern(0, i);
    }
    for (int i = 0; i < 3; ++i) once();  // warm up: staging pages get mapped in every rank
    c.barrier(w).wait();
    int iters = iterations(bytes);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) once();
    c.barrier(w).wait();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    long long wrong = 0;
    for (int p = 0; p < n; ++p) {
      std::size_t m = op == Op::broadcast ? recv.size() : chunk;
      for (std::size_t i = 0; i < m && op != Op::broadcast; ++i) {
        std::size_t src = op == Op::all_to_all_v ? static_cast<std::size_t>(c.rank()) * chunk + i : i;
        wrong += recv[static_cast<std::size_t>(p) * chunk + i] != pattern(p, src);
      }
    }
    if (op == Op::broadcast) {
      for (std::size_t i = 0; i < recv.size(); ++i) wrong += recv[i] != pattern(0, i);
    }
    std::vector<std::int64_t> w64 = {wrong};
    c.all_reduce(w, {w64.data(), 8}, DType::int64, ReduceOp::sum).wait();
    char text[64];
    std::snprintf(text, sizeof text, "%.3f %lld", us, static_cast<long long>(w64[0]));
    return std::string(text);
  });
  Row row;
  if (result.failure() != sim::Failure::none) {
    std::fprintf(stderr, "simulated run failed: %s\n", result.outcomes[0].message.c_str());
    row.wrong = -1;
    return row;
  }
  std::sscanf(result.outcomes[0].value.c_str(), "%lf %lld", &row.us, &row.wrong);
  return row;
}

// MPI_Alltoallv times (us) by size for n ranks, from one mpirun; empty if unavailable.
std::map<std::size_t, Row> measure_mpi(const std::string& program, int n, const std::vector<std::size_t>& sizes) {
  std::map<std::size_t, Row> out;
  std::string cmd = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(n) + " " + program;
  for (std::size_t s : sizes) cmd += " " + std::to_string(s);
  cmd += " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[256];
  while (std::fgets(line, sizeof line, pipe)) {
    unsigned long long bytes = 0;
    Row row;
    if (std::sscanf(line, "%llu %lf %lld", &bytes, &row.us, &row.wrong) == 3) out[bytes] = row;
  }
  pclose(pipe);
  return out;
}

std::string sibling(const char* argv0, const char* name) {
  std::string self = argv0;
  auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/" + name;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_bytes = 64u << 20;
  std::vector<int> rank_counts = {2, 4, 8};
  bool mpi = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-bytes" && i + 1 < argc) {
      max_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--no-mpi") {
      mpi = false;
    } else if (a == "--ranks" && i + 1 < argc) {
      rank_counts.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) rank_counts.push_back(std::atoi(p));
    } else {
      std::fprintf(stderr, "usage: %s [--max-bytes N] [--ranks 2,4,8] [--no-mpi]\n", argv[0]);
      return 2;
    }
  }
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1024; s <= max_bytes; s *= 2) sizes.push_back(s);
  std::string peer = sibling(argv[0], "bench_mpi_alltoallv");
  if (mpi && access(peer.c_str(), X_OK) != 0) {
    std::printf("# %s not built (no MPI at configure time): the OpenMPI column is empty\n", peer.c_str());
    mpi = false;
  }
  std::printf("# hpref simulator collectives; sizes are bytes per rank; busbw as nccl-tests "
              "(all_to_all_v, all_gather: algbw*(n-1)/n; broadcast: algbw)\n");
  std::printf("# last column: OpenMPI MPI_Alltoallv time / simulator time on the same sizes "
              "(> 1: the simulator is faster), mpirun --oversubscribe on this machine\n");
  for (int n : rank_counts) {
    std::map<std::size_t, Row> peer_rows;
    if (mpi) peer_rows = measure_mpi(peer, n, sizes);
    for (Op op : {Op::all_to_all_v, Op::all_gather, Op::broadcast}) {
      std::printf("\n# %s, %d ranks\n", op_name(op), n);
      std::printf("%12s %12s %6s %12s %10s %10s %7s %14s\n", "size(B)", "count", "type", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "#wrong", "vs OpenMPI");
      for (std::size_t bytes : sizes) {
        Row r = measure(op, n, bytes);
        double algbw = r.us > 0 ? static_cast<double>(bytes) / r.us / 1e3 : 0;
        double busbw = op == Op::broadcast ? algbw : algbw * (n - 1) / n;
        std::string vs = "-";
        if (op == Op::all_to_all_v) {
          auto it = peer_rows.find(bytes);
          if (it != peer_rows.end() && r.us > 0) {
            char buf[48];
            std::snprintf(buf, sizeof buf, "%.2fx (%.0fus)", it->second.us / r.us, it->second.us);
            vs = buf;
          } else if (mpi) {
            vs = "n/a";
          }
        }
        std::printf("%12zu %12zu %6s %12.1f %10.3f %10.3f %7lld %14s\n", bytes, bytes, "uint8", r.us, algbw,
                    busbw, r.wrong, vs.c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
