// SPEC 4-6 edges of the transports (reference/src/data_plane.cpp, model_parallel.cpp) on
// the in-process loopback Communicator (tests/support/loopback.hpp): the staging-space
// check of 4.5, calls on a rank outside the data plane, control values over
// max_message_bytes (4.1, 4.2, and the equal size accepted), sizes a peer announces
// negative (4, 5.2: refused on every rank, the refusal agreed by the vote), and the
// model-parallel broadcast's choice of group, memory space and result device (6.3).
// A Tap communicator around the loopback records each call and may rewrite this rank's
// outgoing bytes, as a faulty peer would send them.
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "../support/loopback.hpp"
#include "hpref/data_groups.hpp"
#include "hpref/data_plane.hpp"
#include "hpref/model_parallel.hpp"
#include "hpref/topology.hpp"
#include "test_util.hpp"

using namespace hpref;
using hpref::test::describe;
using hpref::test::run_loopback;

namespace {

// Forwards every call to `inner` and records it; `tamper(index, bytes)` may rewrite this
// rank's outgoing bytes of its index-th launch (counted over all groups from 0) before
// they leave. The loopback copies send data at launch (loopback.hpp), so the rewritten
// copy may die when the call returns; a broadcast's buffer is rewritten in place.
class Tap final : public Communicator {
 public:
  struct Call {
    std::string op;
    int group;
    std::size_t bytes;
    MemorySpace space;
  };
  explicit Tap(Communicator& inner) : inner_(inner) {}

  std::function<void(std::size_t index, std::vector<std::uint8_t>& bytes)> tamper;
  std::vector<Call> calls;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string world_backend() const override { return inner_.world_backend(); }
  Group world() const override { return inner_.world(); }
  Group new_group(std::span<const int> ranks, const std::string& backend) override {
    return inner_.new_group(ranks, backend);
  }
  Work all_gather(const Group& g, ConstBuffer in, MutableBuffer out) override {
    auto bytes = outgoing("all_gather", g, in);
    return inner_.all_gather(g, {bytes.data(), bytes.size(), in.space}, out);
  }
  Work broadcast(const Group& g, MutableBuffer buffer, int root) override {
    auto bytes = outgoing("broadcast", g, buffer);
    if (!bytes.empty()) std::memcpy(buffer.data, bytes.data(), bytes.size());
    return inner_.broadcast(g, buffer, root);
  }
  Work all_reduce(const Group& g, MutableBuffer buffer, DType dtype, ReduceOp op) override {
    auto bytes = outgoing("all_reduce", g, buffer);
    if (!bytes.empty()) std::memcpy(buffer.data, bytes.data(), bytes.size());
    return inner_.all_reduce(g, buffer, dtype, op);
  }
  using Communicator::all_to_all_v;
  Work all_to_all_v(const Group& g, ConstBuffer in, std::span<const std::size_t> in_counts,
                    std::span<const std::size_t> in_displs, MutableBuffer out,
                    std::span<const std::size_t> out_counts) override {
    auto bytes = outgoing("all_to_all_v", g, in);
    return inner_.all_to_all_v(g, {bytes.data(), bytes.size(), in.space}, in_counts, in_displs, out,
                               out_counts);
  }
  Work barrier(const Group& g) override {
    calls.push_back({"barrier", g.id(), 0, g.memory()});
    return inner_.barrier(g);
  }

 private:
  std::vector<std::uint8_t> outgoing(const char* op, const Group& g, ConstBuffer in) {
    calls.push_back({op, g.id(), in.bytes, in.space});
    const auto* p = static_cast<const std::uint8_t*>(in.data);
    std::vector<std::uint8_t> bytes(p, p + in.bytes);
    if (tamper) tamper(calls.size() - 1, bytes);
    return bytes;
  }

  Communicator& inner_;
};

// Writes `value` as the int64 at byte `at` of `bytes` (host order, as the transports send).
void put_int64(std::vector<std::uint8_t>& bytes, std::size_t at, std::int64_t value) {
  if (at + 8 > bytes.size()) {
    throw Error(Errc::scenario_check, "no int64 at byte " + std::to_string(at));
  }
  std::memcpy(bytes.data() + at, &value, 8);
}

// The call list as text, "op group bytes space" per call, for exact comparisons.
std::string calls_text(const std::vector<Tap::Call>& calls) {
  std::string out;
  for (const auto& c : calls) {
    out += c.op + " " + std::to_string(c.group) + " " + std::to_string(c.bytes) +
           (c.space == MemorySpace::host ? " host" : " accelerator") + "\n";
  }
  return out;
}

// Data-plane groups over `plane` (sorted world ranks): one control group, also the payload
// group. A world collective: every rank calls it.
DataGroups plane_groups(Communicator& c, const std::vector<int>& plane, int planner) {
  DataGroups g;
  g.data_plane_ranks = plane;
  g.planner_rank = planner;
  Group control = c.new_group(plane, "loopback");
  if (control.is_member()) {
    g.control = control;
    g.payload = control;
  }
  return g;
}

// "ok", or describe() of what fn threw ("kind: message").
std::string outcome(const std::function<void()>& fn) {
  try {
    fn();
  } catch (...) {
    return describe(std::current_exception());
  }
  return "ok";
}

// Rank `rank`'s view of a 1 x size mesh ("dp" of 1, "cp" of size): one model-parallel
// group of every rank, constructor rank 0 (SPEC 3.1).
DataTopology one_model_parallel_group(int size, int rank) {
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  return DataTopology(TopologyInputs{{1, size}, {"dp", "cp"}, ranks, rank, std::nullopt});
}

// SPEC 6.1: an accelerator field [B, 2] of int64 and a cpu field [N] of uint8; the header
// is [status, B, N].
ModelBatchLayout two_fields() {
  return ModelBatchLayout({
      {"tokens",
       DType::int64,
       Placement::accelerator,
       {Dim{std::string("B")}, Dim{std::int64_t{2}}}},
      {"image", DType::uint8, Placement::cpu, {Dim{std::string("N")}}},
  });
}

// tokens = int64 0..2B-1 of shape [B, 2], image = N bytes 9, 8, ...
Value two_field_batch(std::int64_t b, std::int64_t n) {
  std::vector<std::uint8_t> tokens(static_cast<std::size_t>(16 * b)), image;
  for (std::int64_t i = 0; i < 2 * b; ++i) std::memcpy(tokens.data() + 8 * i, &i, 8);
  for (std::int64_t i = 0; i < n; ++i) image.push_back(static_cast<std::uint8_t>(9 - i));
  return Value::mapping({
      {Value::string("tokens"), Value::tensor(Tensor::copy_of(DType::int64, {b, 2}, tokens))},
      {Value::string("image"), Value::tensor(Tensor::copy_of(DType::uint8, {n}, image))},
  });
}

// The tensor of field `name` in a batch mapping.
const Tensor& field_of(const Value& batch, std::string_view name) {
  for (const auto& [k, v] : batch.entries()) {
    if (k.as_str() == name) return v.as_tensor();
  }
  throw Error(Errc::scenario_check, "no field " + std::string(name));
}

constexpr std::uint64_t kDefaultLimit = std::uint64_t{1} << 30;  // SPEC 4: 1 GiB

}  // namespace

BOOST_AUTO_TEST_SUITE(transport_edges)

// SPEC 4.5: an accelerator-backed group stages through a communication_device of its own
// type (cuda for nccl, npu for hccl, any case, "type[:index]"); anything else, or none, is
// transport_device before any communication. Host groups stage on the host whatever the
// device.
BOOST_AUTO_TEST_CASE(staging_space_spec_4_5) {
  auto with = [](std::optional<std::string> device) {
    TransportOptions o;
    o.communication_device = std::move(device);
    return o;
  };
  Group host(2, {0, 1}, "gloo", 0);
  BOOST_TEST((staging_space(host, with(std::nullopt)) == MemorySpace::host));
  BOOST_TEST((staging_space(host, with("cuda:0")) == MemorySpace::host));
  Group nccl(3, {0}, "nccl", 0), upper(4, {0}, "NCCL", 0), hccl(5, {0}, "hccl", 0);
  BOOST_TEST((staging_space(nccl, with("cuda:1")) == MemorySpace::accelerator));
  BOOST_TEST((staging_space(nccl, with("cuda")) == MemorySpace::accelerator));
  BOOST_TEST((staging_space(upper, with("cuda:0")) == MemorySpace::accelerator));
  BOOST_TEST((staging_space(hccl, with("npu:2")) == MemorySpace::accelerator));
  HPREF_CHECK_ERROR(staging_space(nccl, with(std::nullopt)), Errc::transport_device,
                    "group 3 on backend nccl moves cuda memory and needs a cuda "
                    "communication_device, got none");
  HPREF_CHECK_ERROR(staging_space(nccl, with("npu:0")), Errc::transport_device,
                    "group 3 on backend nccl moves cuda memory and needs a cuda "
                    "communication_device, got 'npu:0'");
  HPREF_CHECK_ERROR(staging_space(nccl, with("cpu")), Errc::transport_device, "got 'cpu'");
  // The type is the text before ':', compared whole: "cudax" is not "cuda".
  HPREF_CHECK_ERROR(staging_space(nccl, with("cudax:0")), Errc::transport_device, "got 'cudax:0'");
  HPREF_CHECK_ERROR(staging_space(hccl, with("cuda:0")), Errc::transport_device,
                    "group 5 on backend hccl moves npu memory and needs a npu "
                    "communication_device, got 'cuda:0'");
}

// A rank outside the data plane constructs the transport (no communication) and every
// call is transport_not_member naming the call, the rank and the plane; the plane's
// members are not held up by it.
BOOST_AUTO_TEST_CASE(calls_outside_the_data_plane_refused) {
  std::vector<std::vector<Value>> gathered(4);
  std::vector<std::string> outside;  // rank 0's outcome of each call
  auto errors = run_loopback(4, [&](Communicator& c) {
    DataGroups g = plane_groups(c, {1, 2, 3}, 2);
    DataPlaneTransport t(c, g);
    if (c.rank() != 0) {
      gathered[static_cast<std::size_t>(c.rank())] =
          t.all_gather_object(Value::integer(10 * c.rank()));
      return;
    }
    if (t.is_member() || t.ranks() != std::vector<int>({1, 2, 3}) || t.planner_rank() != 2) {
      throw Error(Errc::scenario_check, "rank 0's view of the plane is wrong");
    }
    std::map<int, std::vector<Item>> none;
    outside.push_back(outcome([&] { t.all_gather_object(Value::none()); }));
    outside.push_back(outcome([&] { t.begin_all_gather_object(Value::none()); }));
    outside.push_back(outcome([&] { t.gather_object_to_planner(Value::none()); }));
    outside.push_back(outcome([&] { t.all_ranks_true(true); }));
    outside.push_back(outcome([&] { t.broadcast_from_planner(Value::none()); }));
    outside.push_back(outcome([&] { t.prepare_exchange(none); }));
    outside.push_back(outcome([&] { t.begin_exchange(DataPlaneTransport::Prepared{}); }));
    outside.push_back(outcome([&] { t.exchange(DataPlaneTransport::Prepared{}); }));
  });
  for (int r = 0; r < 4; ++r) BOOST_TEST(describe(errors[static_cast<std::size_t>(r)]) == "ok");
  const std::string tail = " on rank 0, which is not in the data plane [1, 2, 3]";
  const std::string kind = "transport_not_member: ";
  std::vector<std::string> want = {
      kind + "all_gather_object" + tail,      kind + "all_gather_object" + tail,
      kind + "all_gather_object" + tail,      kind + "all_ranks_true" + tail,
      kind + "broadcast_from_planner" + tail, kind + "prepare_exchange" + tail,
      kind + "begin_exchange" + tail,         kind + "begin_exchange" + tail};
  BOOST_TEST(outside == want, boost::test_tools::per_element());
  BOOST_TEST(gathered[0].empty());
  for (int r = 1; r < 4; ++r) {
    BOOST_TEST((gathered[static_cast<std::size_t>(r)] ==
                std::vector<Value>{Value::integer(10), Value::integer(20), Value::integer(30)}),
               "rank " << r);
  }
}

// SPEC 4.1, 4.2: every size a peer announces is checked against max_message_bytes before
// anything is allocated, on every rank (each sees the same sizes, so all refuse together,
// naming the announcing rank); a size equal to the limit is accepted. The golden pickle of
// b"x" * 100 (SPEC 2.3: PROTO 5, no FRAME, SHORT_BINBYTES, STOP) is 2 + 2 + 100 + 1 = 105
// bytes.
BOOST_AUTO_TEST_CASE(control_values_over_the_limit_spec_4_1_4_2) {
  Value big = Value::bytes(std::string(100, 'x')), small = Value::bytes(std::string("xyz"));
  for (std::uint64_t limit : {105, 104}) {
    BOOST_TEST_CONTEXT("max_message_bytes " << limit) {
      std::vector<std::string> gather(3), broadcast(3), after(3);
      auto errors = run_loopback(3, [&](Communicator& c) {
        auto r = static_cast<std::size_t>(c.rank());
        TransportOptions o;
        o.max_message_bytes = limit;
        DataPlaneTransport t(c, plane_groups(c, {0, 1, 2}, 1), o);
        gather[r] = outcome([&] {
          auto all = t.all_gather_object(c.rank() == 1 ? big : small);
          if (!(all == std::vector<Value>{small, big, small})) {
            throw Error(Errc::scenario_check, "gathered values differ");
          }
        });
        broadcast[r] = outcome([&] {
          // Only the planner's (rank 1's) value travels; the others pass anything.
          if (!(t.broadcast_from_planner(c.rank() == 1 ? big : Value::none()) == big)) {
            throw Error(Errc::scenario_check, "broadcast value differs");
          }
        });
        // Nothing was left half-launched: the control group still works (SPEC 4.3).
        after[r] = t.all_ranks_true(c.rank() != 2) ? "true" : "false";
      });
      for (std::size_t r = 0; r < 3; ++r) {
        BOOST_TEST_CONTEXT("rank " << r) {
          BOOST_TEST(describe(errors[r]) == "ok");
          BOOST_TEST(after[r] == "false");
          if (limit == 105) {
            BOOST_TEST(gather[r] == "ok");
            BOOST_TEST(broadcast[r] == "ok");
          } else {
            BOOST_TEST(gather[r] ==
                       "transport_size_limit: control value of 105 bytes announced by rank 1 "
                       "exceeds max_message_bytes 104; nothing was allocated");
            BOOST_TEST(broadcast[r] ==
                       "transport_size_limit: broadcast value of 105 bytes announced by rank 1 "
                       "exceeds max_message_bytes 104; nothing was allocated");
          }
        }
      }
    }
  }
}

// SPEC 4: a negative size announced for a control value (a faulty peer; the transport
// only ever sends sizes >= 0) is refused on every rank as negative, whatever
// max_message_bytes (even the largest, where it once passed the limit check and every rank
// died in std::length_error), before anything is allocated: all-gathered by rank 2,
// broadcast by the planner, rank 0.
BOOST_AUTO_TEST_CASE(negative_control_value_sizes_refused_spec_4_1_4_2) {
  for (std::uint64_t limit : {std::uint64_t{1} << 30, ~std::uint64_t{0}}) {
    BOOST_TEST_CONTEXT("max_message_bytes " << limit) {
      std::vector<std::string> gather(3), broadcast(3);
      auto errors = run_loopback(3, [&](Communicator& inner) {
        Tap c(inner);
        auto r = static_cast<std::size_t>(c.rank());
        TransportOptions o;
        o.max_message_bytes = limit;
        DataPlaneTransport t(c, plane_groups(c, {0, 1, 2}, 0), o);  // call 0: the limits
        // Call 1: the sizes of the object all-gather; call 2: the size the planner broadcasts.
        c.tamper = [&](std::size_t call, std::vector<std::uint8_t>& bytes) {
          if ((call == 1 && c.rank() == 2) || (call == 2 && c.rank() == 0)) {
            put_int64(bytes, 0, call == 1 ? -3 : -2);
          }
        };
        gather[r] = outcome([&] { t.all_gather_object(Value::integer(c.rank())); });
        broadcast[r] = outcome([&] { t.broadcast_from_planner(Value::integer(5)); });
        if (calls_text(c.calls) !=
            "all_gather 1 8 host\nall_gather 1 8 host\nbroadcast 1 8 host\n") {
          throw Error(Errc::scenario_check, "calls after the refusals:\n" + calls_text(c.calls));
        }
      });
      for (std::size_t r = 0; r < 3; ++r) {
        BOOST_TEST_CONTEXT("rank " << r) {
          BOOST_TEST(describe(errors[r]) == "ok");
          BOOST_TEST(gather[r] ==
                     "transport_size_limit: control value size -3 announced by rank 2 is negative; "
                     "nothing was allocated");
          BOOST_TEST(broadcast[r] ==
                     "transport_size_limit: broadcast value size -2 announced by rank 0 is "
                     "negative; nothing was allocated");
        }
      }
    }
  }
}

// SPEC 4.1, 4.2: a size of 0 is not negative and within any limit, so it is accepted and
// the empty prefix is then refused by the pickle reader (an empty input has no opcode).
// Rank 2 announces 0 for its gathered value: every rank fails decoding it; the planner,
// rank 0, announces 0 for its broadcast value: it returns its own value, the others fail.
BOOST_AUTO_TEST_CASE(zero_control_value_size_reaches_the_decoder_spec_4_1_4_2) {
  std::vector<std::string> gather(3), broadcast(3);
  auto errors = run_loopback(3, [&](Communicator& inner) {
    Tap c(inner);
    auto r = static_cast<std::size_t>(c.rank());
    DataPlaneTransport t(c, plane_groups(c, {0, 1, 2}, 0));
    c.tamper = [&](std::size_t call, std::vector<std::uint8_t>& bytes) {
      if ((call == 1 && c.rank() == 2) || (call == 3 && c.rank() == 0)) put_int64(bytes, 0, 0);
    };
    gather[r] = outcome([&] { t.all_gather_object(Value::integer(c.rank())); });
    broadcast[r] = outcome([&] {
      if (!(t.broadcast_from_planner(Value::integer(5)) == Value::integer(5))) {
        throw Error(Errc::scenario_check, "the planner's value changed");
      }
    });
  });
  const std::string empty =
      "pickle_truncated: metadata pickle: an opcode needs 1 bytes but only 0 are left in the "
      "input (opcode at byte 0)";
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST_CONTEXT("rank " << r) {
      BOOST_TEST(describe(errors[r]) == "ok");
      BOOST_TEST(gather[r] == empty);
      BOOST_TEST(broadcast[r] == (r == 0 ? "ok" : empty));
    }
  }
}

// SPEC 5.2 (ours): a negative payload segment size announced to a rank is refused by that
// rank in the agreed vote: it raises transport_size_limit naming sender, receiver and
// size, every other data-plane rank raises exchange_refused naming it, and no rank
// launches the byte exchange (the next exchange on the same groups works). The plane is
// world ranks 1..3 of 4; rank 3 announces -7 bytes to rank 2 (its second int64).
BOOST_AUTO_TEST_CASE(negative_announced_segment_size_refused_by_vote_spec_5_2) {
  std::vector<std::string> first(4), calls(4);
  std::vector<std::vector<Item>> second(4);
  auto errors = run_loopback(4, [&](Communicator& inner) {
    Tap c(inner);
    auto r = static_cast<std::size_t>(c.rank());
    DataPlaneTransport t(c, plane_groups(c, {1, 2, 3}, 1));
    if (!t.is_member()) return;
    c.tamper = [&](std::size_t call, std::vector<std::uint8_t>& bytes) {
      if (call == 1 && c.rank() == 3) put_int64(bytes, 8, -7);
    };
    auto outgoing = [&] {
      std::map<int, std::vector<Item>> out;
      for (int to : {1, 2, 3}) {
        out[to].emplace_back(Value::integer(10 * c.rank() + to),
                             Value::bytes(std::to_string(c.rank()) + "->" + std::to_string(to)));
      }
      return out;
    };
    first[r] = outcome([&] { t.exchange(t.prepare_exchange(outgoing())); });
    second[r] = t.exchange(t.prepare_exchange(outgoing()));
    for (const auto& call : c.calls) calls[r] += call.op + " ";
  });
  const std::string refused =
      "exchange_refused: the payload exchange was refused by data-plane ranks [2] (a segment "
      "over max_message_bytes 1073741824, a negative size or sizes summing past 2^64); no rank "
      "allocated or launched the byte exchange";
  BOOST_TEST(first[1] == refused);
  BOOST_TEST(first[2] ==
             "transport_size_limit: payload segment size -7 announced by rank 3 for rank 2 is "
             "negative; no rank allocated or launched the byte exchange");
  BOOST_TEST(first[3] == refused);
  for (int r = 1; r <= 3; ++r) {
    auto i = static_cast<std::size_t>(r);
    BOOST_TEST_CONTEXT("rank " << r) {
      BOOST_TEST(describe(errors[i]) == "ok");
      // limits; sizes and vote (refused); sizes, vote and bytes.
      BOOST_TEST(calls[i] ==
                 "all_gather all_to_all_v all_gather all_to_all_v all_gather all_to_all_v ");
      std::vector<Item> want;
      for (int from : {1, 2, 3}) {
        want.emplace_back(Value::integer(10 * from + r),
                          Value::bytes(std::to_string(from) + "->" + std::to_string(r)));
      }
      BOOST_TEST((second[i] == want));
    }
  }
  BOOST_TEST(describe(errors[0]) == "ok");
}

// SPEC 4, 5.2 (ours): sizes each within max_message_bytes (here the largest, 2^64 - 1) whose
// sum for one receiver does not fit 64 bits are refused in the same vote: ranks 2 and 3
// announce int64's maximum to rank 1 (a faulty peer), rank 1 refuses naming where the sum
// overflowed, the others raise exchange_refused naming rank 1, and no byte exchange starts.
BOOST_AUTO_TEST_CASE(announced_sizes_summing_past_2_64_refused_by_vote_spec_5_2) {
  std::vector<std::string> got(4), calls(4);
  auto errors = run_loopback(4, [&](Communicator& inner) {
    Tap c(inner);
    auto r = static_cast<std::size_t>(c.rank());
    TransportOptions o;
    o.max_message_bytes = ~std::uint64_t{0};
    DataPlaneTransport t(c, plane_groups(c, {1, 2, 3}, 1), o);
    if (!t.is_member()) return;
    c.tamper = [&](std::size_t call, std::vector<std::uint8_t>& bytes) {
      if (call == 1 && c.rank() != 1) put_int64(bytes, 0, std::numeric_limits<std::int64_t>::max());
    };
    std::map<int, std::vector<Item>> out;
    out[1].emplace_back(Value::integer(c.rank()), Value::bytes("b"));
    got[r] = outcome([&] { t.exchange(t.prepare_exchange(out)); });
    for (const auto& call : c.calls) calls[r] += call.op + " ";
  });
  const std::string tail = "; no rank allocated or launched the byte exchange";
  BOOST_TEST(got[1] ==
             "transport_size_limit: payload segments announced for rank 1 sum past 2^64 "
             "bytes at rank 3" +
                 tail);
  const std::string refused =
      "exchange_refused: the payload exchange was refused by data-plane ranks [1] (a segment "
      "over max_message_bytes 18446744073709551615, a negative size or sizes summing past "
      "2^64)" +
      tail;
  BOOST_TEST(got[2] == refused);
  BOOST_TEST(got[3] == refused);
  for (std::size_t r = 0; r < 4; ++r) BOOST_TEST(describe(errors[r]) == "ok");
  for (std::size_t r = 1; r < 4; ++r) BOOST_TEST(calls[r] == "all_gather all_to_all_v all_gather ");
}

// SPEC 5.2 (ours): a segment over max_message_bytes to the first data-plane rank: the
// sender refuses its own outgoing segment (the cause), the receiver refuses the announced
// size, and the third rank raises exchange_refused naming both; a segment of exactly the
// limit goes through. The plane is world ranks 1..3 of 4; rank 3 sends rank 1 the item
// (7, "x" * 200): a legacy segment (a str is no binary leaf, SPEC 2.1), the golden pickle
// of ((7, "x" * 200),) (SPEC 2.3): PROTO 5 (2), BININT1 7 (2), SHORT_BINUNICODE (2 + 200),
// TUPLE2, TUPLE1, STOP = 209 bytes.
BOOST_AUTO_TEST_CASE(oversized_segment_to_the_first_plane_rank_spec_5_2) {
  const Item item{Value::integer(7), Value::string(std::string(200, 'x'))};
  for (std::uint64_t limit : {209, 208}) {
    BOOST_TEST_CONTEXT("max_message_bytes " << limit) {
      std::vector<std::string> got(4);
      auto errors = run_loopback(4, [&](Communicator& c) {
        TransportOptions o;
        o.max_message_bytes = limit;
        DataPlaneTransport t(c, plane_groups(c, {1, 2, 3}, 1), o);
        if (!t.is_member()) return;
        std::map<int, std::vector<Item>> out;
        if (c.rank() == 3) out[1].push_back(item);
        got[static_cast<std::size_t>(c.rank())] = outcome([&] {
          auto items = t.exchange(t.prepare_exchange(out));
          if (!(items == (c.rank() == 1 ? std::vector<Item>{item} : std::vector<Item>{}))) {
            throw Error(Errc::scenario_check, "received items differ");
          }
        });
      });
      const std::string tail = "; no rank allocated or launched the byte exchange";
      std::vector<std::string> want = {"", "ok", "ok", "ok"};
      if (limit == 208) {
        want[1] =
            "transport_size_limit: payload segment of 209 bytes announced by rank 3 for rank 1 "
            "exceeds max_message_bytes 208" +
            tail;
        want[2] =
            "exchange_refused: the payload exchange was refused by data-plane ranks [1, 3] (a "
            "segment over max_message_bytes 208, a negative size or sizes summing past 2^64)" +
            tail;
        want[3] =
            "transport_size_limit: outgoing payload segment of 209 bytes from rank 3 to rank 1 "
            "exceeds max_message_bytes 208" +
            tail;
      }
      for (std::size_t r = 0; r < 4; ++r) BOOST_TEST(describe(errors[r]) == "ok");
      BOOST_TEST(got == want, boost::test_tools::per_element());
    }
  }
}

// SPEC 5.1, 2.1: one segment per data-plane rank in rank order in one contiguous buffer
// (the local one included, empty here), its offset kept; a target outside the plane is
// transport_targets listing the bad targets sorted; an item that cannot be encoded is the
// codec's error. Both refusals are local: the exchange that follows on the same groups
// works. Rank 2 of the plane [1, 2, 3] sends (7, None) to rank 1 and (8, None) to rank 3:
// legacy segments, the golden pickle of ((k, None),) (SPEC 2.3): PROTO 5, BININT1 k, NONE,
// TUPLE2, TUPLE1, STOP = 80 05 4b k 4e 86 85 2e.
BOOST_AUTO_TEST_CASE(prepare_exchange_layout_and_refusals_spec_5_1) {
  std::vector<std::string> layout(4), targets(4), unencodable(4);
  std::vector<std::vector<Item>> received(4);
  auto errors = run_loopback(4, [&](Communicator& c) {
    DataPlaneTransport t(c, plane_groups(c, {1, 2, 3}, 1));
    if (!t.is_member()) return;
    auto r = static_cast<std::size_t>(c.rank());
    std::map<int, std::vector<Item>> out;
    if (c.rank() == 2) {
      out[1].emplace_back(Value::integer(7), Value::none());
      out[3].emplace_back(Value::integer(8), Value::none());
    }
    DataPlaneTransport::Prepared p = t.prepare_exchange(out);
    for (auto split : p.input_splits) layout[r] += std::to_string(split) + " ";
    layout[r] += "at " + std::to_string(p.local_offset) + ": " + hpref::test::hex(*p.send);
    std::map<int, std::vector<Item>> outside = {{5, {}}, {2, {}}, {-1, {}}};
    targets[r] = outcome([&] { t.prepare_exchange(outside); });
    std::map<int, std::vector<Item>> bad;
    bad[2].emplace_back(Value::list({}), Value::none());
    unencodable[r] = outcome([&] { t.prepare_exchange(bad); });
    received[r] = t.exchange(std::move(p));
  });
  const std::vector<std::string> want_layout = {
      "", "0 0 0 at 0: ", "8 0 8 at 8: 80054b074e86852e80054b084e86852e", "0 0 0 at 0: "};
  for (std::size_t r = 1; r < 4; ++r) {
    BOOST_TEST_CONTEXT("rank " << r) {
      BOOST_TEST(describe(errors[r]) == "ok");
      BOOST_TEST(layout[r] == want_layout[r]);
      BOOST_TEST(targets[r] ==
                 "transport_targets: payload routes target ranks outside the data plane [1, 2, 3]: "
                 "[-1, 5]");
      BOOST_TEST(unencodable[r] ==
                 "unhashable_key: cannot encode segment: items[0].key [] is not hashable");
    }
  }
  BOOST_TEST((received[1] == std::vector<Item>{{Value::integer(7), Value::none()}}));
  BOOST_TEST(received[2].empty());
  BOOST_TEST((received[3] == std::vector<Item>{{Value::integer(8), Value::none()}}));
}

// SPEC 6: a model-parallel group of more than one rank needs its host group; without one
// every rank is refused at construction, naming the group's ranks and itself.
BOOST_AUTO_TEST_CASE(model_parallel_without_host_group_refused_spec_6) {
  auto errors = run_loopback(2, [&](Communicator& c) {
    ModelParallelTransport mp(c, one_model_parallel_group(2, c.rank()), DataGroups{}, two_fields());
  });
  for (int r = 0; r < 2; ++r) {
    BOOST_TEST(describe(errors[static_cast<std::size_t>(r)]) ==
               "transport_not_member: model-parallel broadcast over ranks [0, 1] needs a host "
               "model-parallel group; rank " +
                   std::to_string(r) + " has none");
  }
}

// SPEC 6.4: a one-rank model-parallel group needs no groups and communicates nothing: the
// batch comes back as given, end of data as end of data, and an error is rethrown.
BOOST_AUTO_TEST_CASE(model_parallel_one_rank_group_spec_6_4) {
  std::string result;
  auto errors = run_loopback(1, [&](Communicator& inner) {
    Tap c(inner);
    ModelParallelTransport mp(c, one_model_parallel_group(1, 0), DataGroups{}, two_fields());
    auto got = mp.broadcast(two_field_batch(2, 3));
    result += got && *got == two_field_batch(2, 3) ? "batch " : "wrong batch ";
    result += mp.broadcast(std::nullopt) ? "batch " : "end ";
    result += outcome([&] {
      mp.broadcast(std::nullopt, std::make_exception_ptr(Error(Errc::scenario_check, "lost")));
    });
    result += " calls " + std::to_string(c.calls.size());
  });
  BOOST_TEST(describe(errors[0]) == "ok");
  BOOST_TEST(result == "batch end scenario_check: lost calls 0");
}

// SPEC 6.3: the header over the host group, then field by field, skipping zero-element
// fields: cpu fields over the host group (staged through the communication device when
// that group is accelerator-backed), accelerator fields over the accelerator group, or the
// host group when there is none. Every rank returns the constructor's batch; accelerator
// fields land on options.device, else on the communication device, when that is a cuda
// device (a Device names cpu or cuda only: an npu device leaves them on cpu); cpu fields
// stay on cpu.
BOOST_AUTO_TEST_CASE(model_parallel_fields_choose_group_space_and_device_spec_6_3) {
  struct Case {
    const char* name;
    std::string world_backend;
    bool tensor_group;
    std::optional<std::string> communication_device, device;
    int tokens_group;          // of the tokens broadcasts (the host group is 0)
    std::string tokens_space;  // of the tokens broadcasts
    std::string host_space;    // of the host group's calls
    Device tokens_device;
  };
  const Device cpu{};
  const std::vector<Case> cases = {
      {"nccl tensor group", "loopback", true, "cuda:0", "cuda:1", 1, "accelerator", "host",
       Device{DeviceType::cuda, 1}},
      {"no tensor group, device only", "loopback", false, std::nullopt, "cuda:2", 0, "host", "host",
       Device{DeviceType::cuda, 2}},
      {"communication device only", "loopback", false, "cuda:3", std::nullopt, 0, "host", "host",
       Device{DeviceType::cuda, 3}},
      {"npu communication device", "loopback", false, "npu:0", std::nullopt, 0, "host", "host",
       cpu},
      {"no device at all", "loopback", false, std::nullopt, std::nullopt, 0, "host", "host", cpu},
      {"accelerator host group", "nccl", false, "cuda:0", std::nullopt, 0, "accelerator",
       "accelerator", Device{DeviceType::cuda, 0}},
      // A bare "cuda" (torch's current device, accepted by the original): the communication
      // device's index when it names one, else cuda:0.
      {"bare cuda device", "loopback", false, "cuda:5", "cuda", 0, "host", "host",
       Device{DeviceType::cuda, 5}},
      {"bare cuda communication device", "loopback", false, "cuda", std::nullopt, 0, "host", "host",
       Device{DeviceType::cuda, 0}},
      {"bare cuda device, no communication device", "loopback", false, std::nullopt, "cuda", 0,
       "host", "host", Device{DeviceType::cuda, 0}},
      {"bare cuda device, npu communication device", "loopback", false, "npu:1", "cuda", 0, "host",
       "host", Device{DeviceType::cuda, 0}},
  };
  for (const Case& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      std::vector<std::string> calls(2), devices(2);
      std::vector<std::optional<Value>> got(2), got_empty(2);
      auto errors = run_loopback(
          2,
          [&](Communicator& inner) {
            Tap c(inner);
            DataGroups g;
            g.model_parallel = c.world();
            std::vector<int> both = {0, 1};
            if (k.tensor_group) g.model_parallel_tensor = c.new_group(both, "nccl");
            TransportOptions o;
            o.communication_device = k.communication_device;
            o.device = k.device;
            auto r = static_cast<std::size_t>(c.rank());
            ModelParallelTransport mp(c, one_model_parallel_group(2, c.rank()), g, two_fields(), o);
            bool constructor = mp.is_constructor();
            auto batch = [&](std::int64_t b, std::int64_t n) {
              return constructor ? std::optional(two_field_batch(b, n)) : std::nullopt;
            };
            got[r] = mp.broadcast(batch(3, 4));
            got_empty[r] = mp.broadcast(batch(1, 0));
            calls[r] = calls_text(c.calls);
            devices[r] = field_of(*got[r], "tokens").device().str() + " " +
                         field_of(*got[r], "image").device().str() + " " +
                         field_of(*got_empty[r], "tokens").device().str();
          },
          k.world_backend);
      auto host = [&](int bytes) {
        return "0 " + std::to_string(bytes) + " " + k.host_space + "\n";
      };
      auto tokens = [&](int bytes) {
        return std::to_string(k.tokens_group) + " " + std::to_string(bytes) + " " + k.tokens_space +
               "\n";
      };
      std::string want = "all_gather " +
                         host(73) +  // fingerprint (64 hex), limit (8), device ok (1)
                         "broadcast " + host(24) +    // header [1, 3, 4]
                         "broadcast " + tokens(48) +  // 3 x 2 int64
                         "broadcast " + host(4) +     // image
                         "broadcast " + host(24) +    // header [1, 1, 0]
                         "broadcast " + tokens(16);   // 1 x 2 int64; the empty image skipped
      for (std::size_t r = 0; r < 2; ++r) {
        BOOST_TEST_CONTEXT("rank " << r) {
          BOOST_TEST(describe(errors[r]) == "ok");
          BOOST_TEST(calls[r] == want);
          BOOST_TEST((got[r] == two_field_batch(3, 4)));
          BOOST_TEST((got_empty[r] == two_field_batch(1, 0)));
          std::string d = k.tokens_device.str();
          BOOST_TEST(devices[r] == d + " cpu " + d);
        }
      }
    }
  }
}

// SPEC 6.3 (ours, agreed refusal as in 5.2): a result device that does not parse is
// refused at construction, on every rank together, before any field moves: the rank with
// the bad device raises invalid_argument naming it, the others transport_device naming
// that rank (it once threw only at the first accelerator field, on that rank alone, and
// left its peers waiting in the next broadcast: a deadlock).
BOOST_AUTO_TEST_CASE(model_parallel_bad_result_device_refused_together_spec_6_3) {
  std::vector<std::string> got(3);
  std::vector<std::size_t> calls(3);
  auto errors = run_loopback(3, [&](Communicator& inner) {
    Tap c(inner);
    DataGroups g;
    g.model_parallel = c.world();
    TransportOptions o;
    if (c.rank() == 2) o.device = "cuda:zz";
    auto r = static_cast<std::size_t>(c.rank());
    got[r] = outcome([&] {
      ModelParallelTransport mp(c, one_model_parallel_group(3, c.rank()), g, two_fields(), o);
    });
    calls[r] = c.calls.size();
  });
  for (std::size_t r = 0; r < 3; ++r) {
    BOOST_TEST_CONTEXT("rank " << r) {
      BOOST_TEST(describe(errors[r]) == "ok");
      BOOST_TEST(calls[r] == 1u);  // the one all-gather of the construction
      BOOST_TEST(got[r] == (r == 2 ? "invalid_argument: model-parallel result device 'cuda:zz' is "
                                     "not 'cpu' or 'cuda:<index>'; no field was broadcast"
                                   : "transport_device: model-parallel ranks [2] refused their "
                                     "result device (invalid_argument there); no field was "
                                     "broadcast"));
    }
  }
  // A one-rank group communicates nothing and refuses the device by itself.
  auto alone = run_loopback(1, [&](Communicator& c) {
    TransportOptions o;
    o.communication_device = "cuda:-1";
    ModelParallelTransport mp(c, one_model_parallel_group(1, 0), DataGroups{}, two_fields(), o);
  });
  BOOST_TEST(describe(alone[0]) ==
             "invalid_argument: device 'cuda:-1' is not 'cpu' or 'cuda:<index>'");
}

BOOST_AUTO_TEST_SUITE_END()
