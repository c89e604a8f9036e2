// SPEC 4-5: control collectives and the payload exchange over a Communicator.
#include "hpref/data_plane.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"
#include "hpref/pickle.hpp"

namespace hpref {
namespace {

std::vector<std::uint8_t> pickled(const Value& v) {
  std::string bytes = write_pickle(v);
  return {bytes.begin(), bytes.end()};
}

Value unpickled(const std::uint8_t* data, std::size_t size) {
  return read_pickle(std::span<const std::uint8_t>(data, size));
}

std::string comm_rank_text(int rank) { return "rank " + std::to_string(rank); }

}  // namespace

void require_same_limit(std::span<const std::uint64_t> limits, std::span<const int> ranks,
                        const char* who) {
  if (std::all_of(limits.begin(), limits.end(), [&](std::uint64_t v) { return v == limits[0]; }))
    return;
  std::map<std::uint64_t, std::vector<int>> by_value;
  for (std::size_t i = 0; i < limits.size(); ++i) by_value[limits[i]].push_back(ranks[i]);
  std::string text;
  for (const auto& [value, holders] : by_value) {
    text +=
        (text.empty() ? "" : ", ") + std::to_string(value) + " on ranks " + rank_list_text(holders);
  }
  throw Error(Errc::transport_limit_mismatch, std::string("the ") + who +
                                                  " ranks disagree on max_message_bytes (" + text +
                                                  "); every rank must apply the same limit");
}

MemorySpace staging_space(const Group& group, const TransportOptions& options) {
  if (group.memory() != MemorySpace::accelerator) return MemorySpace::host;
  std::string want = accelerator_device_type(group.backend());  // "cuda" or "npu" here
  const auto& device = options.communication_device;
  std::string type = device ? device->substr(0, device->find(':')) : std::string();
  if (type != want) {
    throw Error(Errc::transport_device, "group " + std::to_string(group.id()) + " on backend " +
                                            group.backend() + " moves " + want +
                                            " memory and needs a " + want +
                                            " communication_device, got " +
                                            (device ? "'" + *device + "'" : std::string("none")));
  }
  return MemorySpace::accelerator;
}

DataPlaneTransport::DataPlaneTransport(Communicator& comm, const DataGroups& groups,
                                       TransportOptions options)
    : comm_(comm),
      ranks_(groups.data_plane_ranks),
      planner_(groups.planner_rank),
      control_(groups.control),
      payload_(groups.payload),
      options_(std::move(options)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), comm.rank());
  if (it != ranks_.end()) index_ = static_cast<int>(it - ranks_.begin());
  if (is_member() && ranks_.size() > 1 && !control_) {
    throw Error(Errc::transport_not_member,
                "multi-rank data-plane communication needs a control group; rank " +
                    std::to_string(comm.rank()) + " has none");
  }
  // SPEC 4 (ours): every rank of the control group must apply the same max_message_bytes,
  // or one rank refuses a size the others accept and they wait forever.
  if (is_member() && ranks_.size() > 1) {
    MemorySpace space = staging_space(*control_, options_);
    auto n = ranks_.size();
    std::uint64_t mine = options_.max_message_bytes;
    std::vector<std::uint64_t> all(n);
    comm_.all_gather(*control_, {&mine, 8, space}, {all.data(), 8 * n, space}).wait();
    require_same_limit(all, ranks_, "data-plane");
  }
}

void DataPlaneTransport::require_member(const char* what) const {
  if (!is_member()) {
    throw Error(Errc::transport_not_member,
                std::string(what) + " on rank " + std::to_string(comm_.rank()) +
                    ", which is not in the data plane " + rank_list_text(ranks_));
  }
}

// A size announced by a peer (SPEC 4): refused when negative (whatever the limit) or over
// max_message_bytes, before anything is allocated for it.
void DataPlaneTransport::check_size(std::int64_t size, int from, const char* what) const {
  if (size < 0) {
    throw Error(Errc::transport_size_limit, std::string(what) + " size " + std::to_string(size) +
                                                " announced by rank " + std::to_string(from) +
                                                " is negative; nothing was allocated");
  }
  if (static_cast<std::uint64_t>(size) > options_.max_message_bytes) {
    throw Error(Errc::transport_size_limit,
                std::string(what) + " of " + std::to_string(size) + " bytes announced by rank " +
                    std::to_string(from) + " exceeds max_message_bytes " +
                    std::to_string(options_.max_message_bytes) + "; nothing was allocated");
  }
}

// ---- SPEC 4 -----------------------------------------------------------------------------

DataPlaneTransport::GatherWork DataPlaneTransport::begin_all_gather_object(const Value& value) {
  require_member("all_gather_object");
  GatherWork w;
  if (ranks_.size() == 1) {
    w.done_ = {value};
    w.completed_ = true;
    return w;
  }
  MemorySpace space = staging_space(*control_, options_);
  auto encoded = pickled(value);
  auto n = ranks_.size();
  std::int64_t mine = static_cast<std::int64_t>(encoded.size());
  std::vector<std::int64_t> sizes(n);
  comm_.all_gather(*control_, {&mine, 8, space}, {sizes.data(), 8 * n, space}).wait();
  w.sizes_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    check_size(sizes[i], ranks_[i], "control value");
    w.sizes_[i] = static_cast<std::uint64_t>(sizes[i]);
    w.padded_ = std::max(w.padded_, w.sizes_[i]);
  }
  w.send_ = std::make_shared<std::vector<std::uint8_t>>(w.padded_);
  std::copy(encoded.begin(), encoded.end(), w.send_->begin());
  w.received_ = std::make_shared<std::vector<std::uint8_t>>(w.padded_ * n);
  w.work_ = comm_.all_gather(*control_, {w.send_->data(), w.padded_, space},
                             {w.received_->data(), w.received_->size(), space});
  return w;
}

std::vector<Value> DataPlaneTransport::GatherWork::wait() {
  if (completed_) return done_;
  work_.wait();
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    done_.push_back(unpickled(received_->data() + i * padded_, sizes_[i]));
  }
  completed_ = true;
  send_.reset();
  received_.reset();
  return done_;
}

std::vector<Value> DataPlaneTransport::all_gather_object(const Value& value) {
  GatherWork work = begin_all_gather_object(value);
  work.wait();
  return std::move(work.done_);  // the handle dies here: move the values out, not a copy
}

bool DataPlaneTransport::all_ranks_true(bool value) {
  require_member("all_ranks_true");
  if (ranks_.size() == 1) return value;
  std::int32_t flag = value ? 1 : 0;
  comm_
      .all_reduce(*control_, {&flag, 4, staging_space(*control_, options_)}, DType::int32,
                  ReduceOp::min)
      .wait();
  return flag != 0;
}

std::optional<std::vector<Value>> DataPlaneTransport::gather_object_to_planner(const Value& value) {
  auto all = all_gather_object(value);
  if (comm_.rank() != planner_) return std::nullopt;
  return all;
}

Value DataPlaneTransport::broadcast_from_planner(const Value& value) {
  require_member("broadcast_from_planner");
  if (ranks_.size() == 1) return value;
  MemorySpace space = staging_space(*control_, options_);
  bool planner = comm_.rank() == planner_;
  std::vector<std::uint8_t> encoded = planner ? pickled(value) : std::vector<std::uint8_t>();
  std::int64_t size = static_cast<std::int64_t>(encoded.size());
  comm_.broadcast(*control_, {&size, 8, space}, planner_).wait();
  check_size(size, planner_, "broadcast value");
  encoded.resize(static_cast<std::size_t>(size));
  comm_.broadcast(*control_, {encoded.data(), encoded.size(), space}, planner_).wait();
  return planner ? value : unpickled(encoded.data(), encoded.size());
}

// ---- SPEC 5 -----------------------------------------------------------------------------

DataPlaneTransport::Prepared DataPlaneTransport::prepare_exchange(
    const std::map<int, std::vector<Item>>& outgoing) const {
  require_member("prepare_exchange");
  std::vector<int> bad;
  for (const auto& [target, items] : outgoing) {
    if (std::find(ranks_.begin(), ranks_.end(), target) == ranks_.end()) bad.push_back(target);
  }
  if (!bad.empty()) {
    throw Error(Errc::transport_targets, "payload routes target ranks outside the data plane " +
                                             rank_list_text(ranks_) + ": " + rank_list_text(bad));
  }
  std::vector<SegmentPlan> plans;
  Prepared p;
  std::uint64_t total = 0;
  for (int rank : ranks_) {
    auto it = outgoing.find(rank);
    plans.push_back(it == outgoing.end() ? plan_segment({}) : plan_segment(it->second));
    if (rank == comm_.rank()) p.local_offset = total;
    p.input_splits.push_back(plans.back().size());
    total += plans.back().size();
  }
  p.send = std::make_shared<std::vector<std::uint8_t>>(total);
  std::uint64_t at = 0;
  for (const SegmentPlan& plan : plans) {
    plan.write_to(std::span<std::uint8_t>(p.send->data() + at, plan.size()));
    at += plan.size();
  }
  return p;
}

DataPlaneTransport::ExchangeWork DataPlaneTransport::begin_exchange(Prepared prepared) {
  require_member("begin_exchange");
  ExchangeWork w;
  w.prepared_ = std::move(prepared);
  auto n = ranks_.size();
  if (n == 1) {  // SPEC 5.2: decode the local segment, no communication
    auto local = SharedBytes(w.prepared_.send, std::span<const std::uint8_t>(*w.prepared_.send));
    w.items_ = merge_received(local, w.prepared_.input_splits, w.decode_);
    w.prepared_.send.reset();
    return w;
  }
  if (!payload_) {
    throw Error(Errc::transport_no_payload_group,
                "the payload exchange needs a payload group; rank " + std::to_string(comm_.rank()) +
                    " has none");
  }
  MemorySpace control_space = staging_space(*control_, options_);
  MemorySpace payload_space = staging_space(*payload_, options_);
  std::vector<std::int64_t> sizes_out(w.prepared_.input_splits.begin(),
                                      w.prepared_.input_splits.end());
  std::vector<std::int64_t> sizes_in(n);
  std::vector<std::size_t> eight(n, 8);
  comm_
      .all_to_all_v(*control_, {sizes_out.data(), 8 * n, control_space}, eight,
                    {sizes_in.data(), 8 * n, control_space}, eight)
      .wait();
  // SPEC 5.2 (ours): agree before moving bytes. This rank's vote is false when one of its
  // own outgoing segments exceeds the limit (checked first: the cause) or it refuses an
  // announced size; one int32 per rank is all-gathered, so every rank learns who refused
  // and none enters the byte exchange alone.
  std::string mine = comm_rank_text(comm_.rank());
  std::string refusal;
  for (std::size_t i = 0; i < n && refusal.empty(); ++i) {
    if (w.prepared_.input_splits[i] > options_.max_message_bytes) {
      refusal = "outgoing payload segment of " + std::to_string(w.prepared_.input_splits[i]) +
                " bytes from " + mine + " to rank " + std::to_string(ranks_[i]) +
                " exceeds max_message_bytes " + std::to_string(options_.max_message_bytes);
    }
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n && refusal.empty(); ++i) {
    if (sizes_in[i] < 0) {
      refusal = "payload segment size " + std::to_string(sizes_in[i]) + " announced by rank " +
                std::to_string(ranks_[i]) + " for " + mine + " is negative";
    } else if (static_cast<std::uint64_t>(sizes_in[i]) > options_.max_message_bytes) {
      refusal = "payload segment of " + std::to_string(sizes_in[i]) + " bytes announced by rank " +
                std::to_string(ranks_[i]) + " for " + mine + " exceeds max_message_bytes " +
                std::to_string(options_.max_message_bytes);
    } else if (__builtin_add_overflow(total, static_cast<std::uint64_t>(sizes_in[i]), &total)) {
      refusal = "payload segments announced for " + mine + " sum past 2^64 bytes at rank " +
                std::to_string(ranks_[i]);
    }
  }
  std::int32_t vote = refusal.empty() ? 1 : 0;
  std::vector<std::int32_t> votes(n);
  comm_.all_gather(*control_, {&vote, 4, control_space}, {votes.data(), 4 * n, control_space})
      .wait();
  std::vector<int> refusing;
  for (std::size_t i = 0; i < n; ++i) {
    if (votes[i] == 0) refusing.push_back(ranks_[i]);
  }
  if (!refusal.empty()) {
    throw Error(Errc::transport_size_limit,
                refusal + "; no rank allocated or launched the byte exchange");
  }
  if (!refusing.empty()) {
    throw Error(Errc::exchange_refused,
                "the payload exchange was refused by data-plane ranks " + rank_list_text(refusing) +
                    " (a segment over max_message_bytes " +
                    std::to_string(options_.max_message_bytes) +
                    ", a negative size or sizes summing past 2^64); no rank allocated or "
                    "launched the byte exchange");
  }
  for (std::size_t i = 0; i < n; ++i)
    w.output_splits_.push_back(static_cast<std::uint64_t>(sizes_in[i]));
  w.received_ = std::make_shared<std::vector<std::uint8_t>>(total);
  std::vector<std::size_t> in_counts(w.prepared_.input_splits.begin(),
                                     w.prepared_.input_splits.end());
  std::vector<std::size_t> out_counts(w.output_splits_.begin(), w.output_splits_.end());
  w.work_ = comm_.all_to_all_v(*payload_,
                               {w.prepared_.send->data(), w.prepared_.send->size(), payload_space},
                               in_counts, {w.received_->data(), total, payload_space}, out_counts);
  return w;
}

const std::vector<Item>& DataPlaneTransport::ExchangeWork::wait() {
  if (items_) return *items_;
  work_.wait();
  prepared_.send.reset();  // the exchange is complete: the send buffer may go
  SharedBytes received(received_, std::span<const std::uint8_t>(*received_));
  items_ = merge_received(received, output_splits_, decode_);
  return *items_;
}

std::vector<Item> DataPlaneTransport::exchange(Prepared prepared) {
  ExchangeWork work = begin_exchange(std::move(prepared));
  work.wait();
  return std::move(*work.items_);  // the handle dies here: move its items out, not a copy
}

}  // namespace hpref
