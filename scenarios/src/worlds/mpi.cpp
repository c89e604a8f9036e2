// The "mpi" world: this process's rank of the mpirun job, over hpref::mpi.
#include "hpref/mpi/communicator.hpp"
#include "hpref/scenarios/harness.hpp"

namespace hpref::scenarios {
namespace {

class MpiWorld final : public World {
 public:
  explicit MpiWorld(const mpi::Options& options) : comm_(options) {}
  std::vector<Communicator*> local() override { return {&comm_}; }
  void end_if_failed(int code) override {
    if (comm_.failed()) comm_.abort_job(code);
  }

 private:
  mpi::MpiCommunicator comm_;
};

const WorldRegistration registered("mpi", [](const WorldOptions& o, World*) {
  mpi::Options options;
  options.checked = o.checked;
  options.timeout_ms = o.timeout_ms;
  if (o.max_count != 0) options.max_count = o.max_count;
  return std::unique_ptr<World>(new MpiWorld(options));
});

}  // namespace
}  // namespace hpref::scenarios
