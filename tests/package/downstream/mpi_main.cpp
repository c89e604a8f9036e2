// hpref::mpi from an installed hpref: an all_reduce over every rank of mpirun.
#include <cstdio>

#include "hpref/mpi/communicator.hpp"

int main() {
  hpref::mpi::MpiCommunicator comm;
  std::int64_t v = comm.rank() + 1;
  comm.all_reduce(comm.world(), {&v, 8}, hpref::DType::int64, hpref::ReduceOp::sum).wait();
  bool ok = v == std::int64_t{comm.size()} * (comm.size() + 1) / 2;
  if (comm.rank() == 0)
    std::printf("hpref::mpi on %d rank(s): all_reduce %s\n", comm.size(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
