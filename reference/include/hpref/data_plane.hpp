// The data-plane transport (SPEC 4-5): control collectives between reader, planner and
// constructor ranks (values travel as metadata pickles), and the payload exchange, one
// variable-size all-to-all of HPB1 segments. Every size a peer announces is checked
// against max_message_bytes before anything is allocated; the limit itself is agreed at
// construction (SPEC 4), and a refusal of the exchange is agreed by a vote (SPEC 5.2).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpref/codec.hpp"
#include "hpref/communicator.hpp"
#include "hpref/data_groups.hpp"

namespace hpref {

struct TransportOptions {
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;
  // The rank-local accelerator ("cuda:0") that accelerator-backed groups stage through
  // (SPEC 4.5); absent or "cpu" for host groups only.
  std::optional<std::string> communication_device;
  // Where accelerator-placed batch fields land (SPEC 6.3); default: the communication device.
  std::optional<std::string> device;
};

// SPEC 4 (ours): Error transport_limit_mismatch naming each max_message_bytes value with the
// ranks that hold it, unless every limits[i] (of world rank ranks[i]) is the same; `who`
// names the ranks in the message ("data-plane", "model-parallel").
void require_same_limit(std::span<const std::uint64_t> limits, std::span<const int> ranks,
                        const char* who);

// The memory space a buffer on `group` must be in, after SPEC 4.5's check that an
// accelerator-backed group has a communication device of its type (Error transport_device).
MemorySpace staging_space(const Group& group, const TransportOptions& options);

class DataPlaneTransport {
 public:
  // A member of a data plane of more than one rank all-gathers max_message_bytes over the
  // control group (SPEC 4): a difference is Error transport_limit_mismatch on every rank,
  // naming each value and its ranks.
  DataPlaneTransport(Communicator& comm, const DataGroups& groups, TransportOptions options = {});

  bool is_member() const noexcept { return index_ >= 0; }
  const std::vector<int>& ranks() const noexcept { return ranks_; }
  int planner_rank() const noexcept { return planner_; }

  // SPEC 4.1: sizes are all-gathered at launch; the padded bytes in flight; decoding at wait.
  class GatherWork {
   public:
    std::vector<Value> wait();

   private:
    friend class DataPlaneTransport;
    std::vector<Value> done_;
    bool completed_ = false;
    Work work_;
    std::shared_ptr<std::vector<std::uint8_t>> send_, received_;
    std::vector<std::uint64_t> sizes_;
    std::uint64_t padded_ = 0;
  };
  GatherWork begin_all_gather_object(const Value& value);
  std::vector<Value> all_gather_object(const Value& value);
  // SPEC 4.3: all-reduce MIN of an int32.
  bool all_ranks_true(bool value);
  // SPEC 4.4: the gathered values on the planner, nullopt elsewhere.
  std::optional<std::vector<Value>> gather_object_to_planner(const Value& value);
  // SPEC 4.2: the planner's value on every data-plane rank (others pass anything).
  Value broadcast_from_planner(const Value& value);

  // SPEC 5.1: one segment per data-plane rank in rank order in one contiguous buffer.
  struct Prepared {
    std::vector<std::uint64_t> input_splits;
    std::shared_ptr<std::vector<std::uint8_t>> send;
    std::uint64_t local_offset = 0;  // this rank's own segment within `send`
  };
  // Error transport_targets listing targets outside the data plane, sorted.
  Prepared prepare_exchange(const std::map<int, std::vector<Item>>& outgoing) const;

  // SPEC 5.2: owns the send buffer until the exchange completes; wait() decodes and
  // merges once (SPEC 2.5) and returns the same items on later calls.
  class ExchangeWork {
   public:
    const std::vector<Item>& wait();

   private:
    friend class DataPlaneTransport;
    Prepared prepared_;
    Work work_;
    std::vector<std::uint64_t> output_splits_;
    std::shared_ptr<std::vector<std::uint8_t>> received_;
    std::optional<std::vector<Item>> items_;
    DecodeOptions decode_;
  };
  // After the size all-to-all every rank votes (one int32 all-gathered over the control
  // group): a rank with an outgoing segment or an announced incoming size over
  // max_message_bytes (or negative) raises transport_size_limit naming sender, receiver
  // and size; every other rank raises exchange_refused naming the refusing ranks. Nothing
  // is allocated and no byte exchange is launched on any rank then.
  ExchangeWork begin_exchange(Prepared prepared);
  std::vector<Item> exchange(Prepared prepared);

 private:
  void require_member(const char* what) const;
  void check_size(std::int64_t size, int from, const char* what) const;

  Communicator& comm_;
  std::vector<int> ranks_;
  int planner_;
  int index_ = -1;
  std::optional<Group> control_, payload_;
  TransportOptions options_;
};

}  // namespace hpref
