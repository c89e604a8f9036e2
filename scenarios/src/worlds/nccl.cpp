// The NCCL worlds: "nccl", one rank per process bootstrapped over a host world (mpi), and
// "nccl-clique", one rank per visible GPU in this process (ncclCommInitAll, a thread each).
#include "hpref/error.hpp"
#include "hpref/nccl/communicator.hpp"
#include "hpref/scenarios/harness.hpp"

namespace hpref::scenarios {
namespace {

class NcclWorld final : public World {
 public:
  explicit NcclWorld(std::vector<std::unique_ptr<nccl::NcclCommunicator>> comms)
      : comms_(std::move(comms)) {}
  std::vector<Communicator*> local() override {
    std::vector<Communicator*> out;
    for (auto& c : comms_) out.push_back(c.get());
    return out;
  }
  std::optional<std::string> device() const override {
    return "cuda:" + std::to_string(comms_[0]->device());
  }

 private:
  std::vector<std::unique_ptr<nccl::NcclCommunicator>> comms_;
};

nccl::Options nccl_options(const WorldOptions& o) {
  nccl::Options options;
  options.checked = o.checked;
  options.timeout_ms = o.timeout_ms;
  return options;
}

const WorldRegistration over("nccl", [](const WorldOptions& o, World* host) {
  if (host == nullptr || host->local().size() != 1) {
    throw Error(Errc::invalid_argument, "the nccl world is bootstrapped over one host rank");
  }
  std::vector<std::unique_ptr<nccl::NcclCommunicator>> comms;
  comms.push_back(nccl::NcclCommunicator::over(*host->local()[0], nccl_options(o)));
  return std::unique_ptr<World>(new NcclWorld(std::move(comms)));
});

const WorldRegistration clique("nccl-clique", [](const WorldOptions& o, World*) {
  int devices = o.devices > 0 ? o.devices : nccl::visible_devices();
  return std::unique_ptr<World>(
      new NcclWorld(nccl::NcclCommunicator::clique(devices, nccl_options(o))));
});

}  // namespace
}  // namespace hpref::scenarios
