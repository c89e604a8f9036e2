// The peer of bench/sim_collectives: OpenMPI's MPI_Alltoallv on this machine, launched by
// it under mpirun. Arguments: per-rank send totals in bytes. Prints, on rank 0, one line
// per size: "<bytes> <microseconds per operation> <wrong bytes>".
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int a = 1; a < argc; ++a) {
    long long total = std::atoll(argv[a]);
    long long chunk = total / size;
    std::vector<unsigned char> send(static_cast<std::size_t>(chunk * size)), recv(send.size());
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<unsigned char>(rank * 31 + i);
    std::vector<int> counts(static_cast<std::size_t>(size), static_cast<int>(chunk)), displs(counts.size());
    for (int p = 0; p < size; ++p) displs[static_cast<std::size_t>(p)] = static_cast<int>(p * chunk);
    int iters = total >= (16 << 20) ? 3 : total >= (1 << 20) ? 10 : 50;
    for (int w = 0; w < 3; ++w) {
      MPI_Alltoallv(send.data(), counts.data(), displs.data(), MPI_BYTE, recv.data(), counts.data(),
                    displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      MPI_Alltoallv(send.data(), counts.data(), displs.data(), MPI_BYTE, recv.data(), counts.data(),
                    displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters;
    long long wrong = 0;
    for (int p = 0; p < size; ++p) {
      for (long long i = 0; i < chunk; ++i) {
        std::size_t at = static_cast<std::size_t>(p * chunk + i);
        unsigned char want = static_cast<unsigned char>(p * 31 + static_cast<long long>(rank) * chunk + i);
        wrong += recv[at] != want;
      }
    }
    long long all_wrong = 0;
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%lld %.3f %lld\n", total, us, all_wrong);
  }
  MPI_Finalize();
  return 0;
}
