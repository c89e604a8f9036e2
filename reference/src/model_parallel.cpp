// SPEC 6: header-first batch broadcast over the model-parallel groups.
#include "hpref/model_parallel.hpp"

#include <cstring>

#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"

namespace hpref {
namespace {

// Where accelerator-placed fields land (SPEC 6.3): `device`, else the communication
// device; cpu unless that names cuda. Throws Error invalid_argument for a text that does
// not parse.
Device result_device(const TransportOptions& options) {
  const auto& where = options.device ? options.device : options.communication_device;
  if (!where || where->substr(0, 4) != "cuda") return Device{};
  if (*where != "cuda") return Device::parse(*where);
  // A bare "cuda" (torch's current device): the communication device's index if it names one.
  const auto& comm = options.communication_device;
  if (comm && comm->size() > 5 && comm->substr(0, 5) == "cuda:") return Device::parse(*comm);
  return Device{DeviceType::cuda, 0};
}

}  // namespace

ModelParallelTransport::ModelParallelTransport(Communicator& comm, const DataTopology& topology,
                                               const DataGroups& groups, ModelBatchLayout layout,
                                               TransportOptions options)
    : comm_(comm),
      constructor_(topology.constructor_rank()),
      ranks_(topology.model_parallel_ranks()),
      host_(groups.model_parallel),
      tensor_(groups.model_parallel_tensor),
      layout_(std::move(layout)),
      options_(std::move(options)) {
  std::string device_problem;
  try {
    result_device_ = result_device(options_);
  } catch (const Error& e) {
    if (ranks_.size() <= 1) throw;
    device_problem = e.what();
  }
  if (ranks_.size() <= 1) return;
  if (!host_) {
    throw Error(Errc::transport_not_member, "model-parallel broadcast over ranks " +
                                                rank_list_text(ranks_) +
                                                " needs a host model-parallel group; rank " +
                                                std::to_string(comm.rank()) + " has none");
  }
  // SPEC 6.1 and 4: every rank must declare the same spec and apply the same
  // max_message_bytes, and have a result device; one all-gather of [fingerprint (64 hex
  // characters), limit (8 bytes), device valid (1 byte)].
  const std::string& mine = layout_.fingerprint();
  std::size_t record = mine.size() + 9;
  std::vector<char> own(record);
  std::memcpy(own.data(), mine.data(), mine.size());
  std::memcpy(own.data() + mine.size(), &options_.max_message_bytes, 8);
  own[mine.size() + 8] = device_problem.empty() ? 1 : 0;
  MemorySpace space = staging_space(*host_, options_);
  const std::vector<int>& members = host_->ranks();
  std::vector<char> all(record * members.size());
  comm_.all_gather(*host_, {own.data(), record, space}, {all.data(), all.size(), space}).wait();
  std::size_t ci = static_cast<std::size_t>(host_->index_of(constructor_));
  std::string reference(all.data() + ci * record, mine.size());
  std::vector<int> differ, bad_device;
  std::vector<std::uint64_t> limits(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (std::string(all.data() + i * record, mine.size()) != reference)
      differ.push_back(members[i]);
    std::memcpy(&limits[i], all.data() + i * record + mine.size(), 8);
    if (all[i * record + mine.size() + 8] == 0) bad_device.push_back(members[i]);
  }
  if (!device_problem.empty()) {
    throw Error(Errc::invalid_argument,
                "model-parallel result " + device_problem + "; no field was broadcast");
  }
  if (!bad_device.empty()) {
    throw Error(Errc::transport_device,
                "model-parallel ranks " + rank_list_text(bad_device) +
                    " refused their result device (invalid_argument there); no field "
                    "was broadcast");
  }
  if (!differ.empty()) {
    throw Error(Errc::transport_spec_mismatch,
                "model-parallel ranks " + rank_list_text(differ) +
                    " declare a model_batch_spec whose fingerprint differs "
                    "from constructor rank " +
                    std::to_string(constructor_) + "'s; every rank must declare the same spec");
  }
  require_same_limit(limits, members, "model-parallel");
}

// Broadcasts one field (SPEC 6.3): cpu fields over the host group (staged through the
// communication device when that group is accelerator-backed), accelerator fields over
// the accelerator group, or the host group when there is none.
Tensor ModelParallelTransport::field(std::size_t index, const std::vector<std::int64_t>& shape,
                                     const Tensor* source) {
  const FieldSpec& f = layout_.fields()[index];
  bool accelerator = f.placement == Placement::accelerator;
  const Group& group = accelerator && tensor_ ? *tensor_ : *host_;
  MemorySpace space = staging_space(group, options_);
  std::size_t bytes = static_cast<std::size_t>(*checked_numel(shape)) * element_size(f.dtype);
  auto buffer = std::make_shared<std::vector<std::uint8_t>>(bytes);
  if (source != nullptr && bytes) std::memcpy(buffer->data(), source->bytes().data(), bytes);
  if (bytes) comm_.broadcast(group, {buffer->data(), bytes, space}, constructor_).wait();
  Device device = accelerator ? result_device_ : Device{};
  SharedBytes data(buffer, std::span<const std::uint8_t>(*buffer));
  return Tensor(f.dtype, shape, std::move(data), device);
}

std::optional<Value> ModelParallelTransport::broadcast(const std::optional<Value>& batch,
                                                       std::exception_ptr error) {
  if (ranks_.size() <= 1) {  // SPEC 6.4
    if (error) std::rethrow_exception(error);
    return batch;
  }
  bool constructor = is_constructor();
  ModelBatchLayout::Flat flat;
  std::vector<std::int64_t> header = layout_.header(kEndOfData);
  if (constructor) {
    try {
      if (error) std::rethrow_exception(error);
      if (batch) {
        flat = layout_.flatten(*batch);
        header = layout_.header(flat);
      }
    } catch (...) {  // peers learn of the failure before anyone allocates
      error = std::current_exception();
      header = layout_.header(kBatchFailed);
    }
  }
  MemorySpace space = staging_space(*host_, options_);
  comm_.broadcast(*host_, {header.data(), header.size() * 8, space}, constructor_).wait();
  std::int64_t status = layout_.header_status(header);
  if (status == kBatchFailed) {
    if (error) std::rethrow_exception(error);
    throw Error(Errc::transport_constructor_failed, "the data constructor (rank " +
                                                        std::to_string(constructor_) +
                                                        ") failed to prepare the declared batch");
  }
  if (status == kEndOfData) return std::nullopt;
  auto shapes = layout_.shapes(header, options_.max_message_bytes);
  std::vector<Tensor> fields;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    fields.push_back(field(i, shapes[i], constructor ? &flat.tensors[i] : nullptr));
  }
  return layout_.rebuild(std::move(fields));
}

}  // namespace hpref
