// The peer of bench/sim_collectives: OpenMPI's MPI_Alltoallv, MPI_Allgather and MPI_Bcast on
// this machine, which bench_sim_collectives launches under mpirun with its own sizes and
// schedule, timed the same way (rank 0 between barriers) on the same data as the
// simulator's rows. Rank 0 prints nccl-tests rows and footer, one section per operation.
#include <mpi.h>

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common.hpp"

namespace {

using hpref::bench::AllToAll;

// One section: `make(total)` sets up a size and returns the operation and its wrong bytes.
struct Section {
  const char* name;
  std::function<std::pair<std::function<void()>, std::function<long long()>>(std::size_t)> make;
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t min_bytes = 1024, max_bytes = std::size_t{64} << 20;
  hpref::bench::Schedule schedule;
  hpref::bench::parse(
      &argc, argv,
      "OpenMPI's MPI_Alltoallv, MPI_Allgather and MPI_Bcast, --min-bytes to --max-bytes "
      "per rank (doubling),\nunder mpirun: the peer of bench_sim_collectives.",
      {{"--min-bytes N", "smallest bytes per rank (default 1K)", &min_bytes},
       {"--max-bytes N", "largest bytes per rank (default 64M)", &max_bytes},
       schedule.flag()});
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto n = static_cast<std::size_t>(size);
  std::unique_ptr<AllToAll> a2a;
  std::vector<std::uint8_t> send, recv;
  std::vector<Section> sections = {
      {"MPI_Alltoallv",
       [&](std::size_t total) {
         a2a = std::make_unique<AllToAll>(total, rank, size);
         AllToAll& b = *a2a;
         return std::pair<std::function<void()>, std::function<long long()>>(
             [&b] {
               MPI_Alltoallv(b.send.data(), b.counts.data(), b.displs.data(), MPI_BYTE,
                             b.recv.data(), b.counts.data(), b.displs.data(), MPI_BYTE,
                             MPI_COMM_WORLD);
             },
             [&b] { return b.wrong(); });
       }},
      {"MPI_Allgather",  // as the simulator's rows: total / ranks bytes from each rank
       [&](std::size_t total) {
         std::size_t chunk = total / n;
         send.assign(chunk, 0);
         recv.assign(chunk * n, 0);
         hpref::bench::fill_pattern(send, static_cast<std::uint64_t>(rank));
         return std::pair<std::function<void()>, std::function<long long()>>(
             [&, chunk] {
               MPI_Allgather(send.data(), static_cast<int>(chunk), MPI_BYTE, recv.data(),
                             static_cast<int>(chunk), MPI_BYTE, MPI_COMM_WORLD);
             },
             [&, chunk] {
               long long wrong = 0;
               for (std::size_t p = 0; p < n; ++p) {
                 wrong += hpref::bench::count_wrong(std::span(recv).subspan(p * chunk, chunk), p);
               }
               return wrong;
             });
       }},
      {"MPI_Bcast",  // total bytes from rank 0
       [&](std::size_t total) {
         recv.assign(total, 0);
         if (rank == 0) hpref::bench::fill_pattern(recv, 0);
         return std::pair<std::function<void()>, std::function<long long()>>(
             [&, total] {
               MPI_Bcast(recv.data(), static_cast<int>(total), MPI_BYTE, 0, MPI_COMM_WORLD);
             },
             [&] { return hpref::bench::count_wrong(recv, 0); });
       }},
  };
  hpref::bench::Report report({""});
  for (const Section& section : sections) {
    if (rank == 0)
      report.header(std::string(section.name) + ", " + std::to_string(size) + " ranks");
    bool bcast = std::string(section.name) == "MPI_Bcast";
    for (std::size_t total = min_bytes; total <= max_bytes; total *= 2) {
      auto [op, count_wrong] = section.make(total);
      double us = schedule.time_us(total, op, [] { MPI_Barrier(MPI_COMM_WORLD); });
      long long wrong = count_wrong(), all_wrong = 0;
      MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (rank != 0) report.add_wrong(all_wrong);  // every rank exits 1 on a wrong byte
      if (rank == 0) {
        report.row(total, total, "uint8", bcast ? 1.0 : (size - 1.0) / size, {{us, all_wrong}});
      }
    }
  }
  if (rank == 0) report.footer();
  MPI_Finalize();
  return report.status();
}
