// The model-parallel batch broadcast (SPEC 6): a constructor hands its batch to its
// model-parallel peers. Every rank declares the same ModelBatchSpec (checked by
// fingerprint at construction), so only an int64 header [status, symbol values...]
// travels first; status -1 (failure) or 0 (end of data) ends every peer without any field
// broadcast, and peers allocate fields from their own declaration within the 6.3 bounds.
#pragma once

#include <exception>
#include <optional>

#include "hpref/communicator.hpp"
#include "hpref/data_groups.hpp"
#include "hpref/data_plane.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/topology.hpp"

namespace hpref {

class ModelParallelTransport {
 public:
  // Checks the spec fingerprint, max_message_bytes and each rank's result device across
  // the host model-parallel group in one all-gather, before any field moves, so every rank
  // refuses together: a rank whose `device` (or communication_device) does not parse raises
  // Error invalid_argument naming it, the others Error transport_device naming those ranks;
  // then Error transport_spec_mismatch naming the ranks that differ from the constructor;
  // then Error transport_limit_mismatch naming each limit and its ranks. Accelerator fields
  // land on `device` ("cuda:N"; a bare "cuda" means the communication device's index when
  // it names one, else cuda:0, torch's default current device).
  ModelParallelTransport(Communicator& comm, const DataTopology& topology, const DataGroups& groups,
                         ModelBatchLayout layout, TransportOptions options = {});

  bool is_constructor() const noexcept { return constructor_ == comm_.rank(); }
  int constructor_rank() const noexcept { return constructor_; }

  // SPEC 6.3. The constructor passes its batch (nullopt at end of data) and, if preparing
  // it failed, that error; peers pass nullopt (and their own error, if any). Returns the
  // batch on every rank, nullopt at end of data; after a failure the constructor rethrows
  // its error and each peer its own, or Error transport_constructor_failed.
  std::optional<Value> broadcast(const std::optional<Value>& batch,
                                 std::exception_ptr error = nullptr);

  const ModelBatchLayout& layout() const noexcept { return layout_; }

 private:
  Tensor field(std::size_t index, const std::vector<std::int64_t>& shape, const Tensor* source);

  Communicator& comm_;
  int constructor_;
  std::vector<int> ranks_;
  std::optional<Group> host_, tensor_;
  ModelBatchLayout layout_;
  TransportOptions options_;
  Device result_device_;  // where accelerator-placed fields land
};

}  // namespace hpref
