// The peer of bench/sim_collectives: OpenMPI's MPI_Alltoallv on this machine, which
// bench_sim_collectives launches under mpirun with its own sizes and schedule, timed the
// same way (rank 0 between barriers). Rank 0 prints nccl-tests rows and footer.
#include <mpi.h>

#include "common.hpp"

int main(int argc, char** argv) {
  std::size_t max_bytes = std::size_t{64} << 20;
  hpref::bench::Schedule schedule;
  hpref::bench::parse(
      &argc, argv,
      "OpenMPI's MPI_Alltoallv, 1 KiB to --max-bytes per rank (doubling), under "
      "mpirun: the peer of bench_sim_collectives.",
      {{"--max-bytes N", "largest bytes per rank (default 64M)", &max_bytes}, schedule.flag()});
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  hpref::bench::Report report({""});
  if (rank == 0) report.header("MPI_Alltoallv, " + std::to_string(size) + " ranks");
  for (std::size_t total = 1024; total <= max_bytes; total *= 2) {
    hpref::bench::AllToAll b(total, rank, size);
    auto op = [&] {
      MPI_Alltoallv(b.send.data(), b.counts.data(), b.displs.data(), MPI_BYTE, b.recv.data(),
                    b.counts.data(), b.displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    };
    double us = schedule.time_us(total, op, [] { MPI_Barrier(MPI_COMM_WORLD); });
    long long wrong = b.wrong(), all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 0) report.add_wrong(all_wrong);  // every rank exits 1 on a wrong byte
    if (rank == 0) report.row(total, total, "uint8", (size - 1.0) / size, {{us, all_wrong}});
  }
  if (rank == 0) report.footer();
  MPI_Finalize();
  return report.status();
}
