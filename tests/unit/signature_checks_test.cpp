// SPEC 9.1-9.2: the local argument checks every Communicator backend makes before it
// launches an operation (reference/src/op_signature.cpp: checked_group_ranks, check_member,
// check_space, check_all_gather ... check_barrier), new_group's agreement words on the real
// backends (group_request, group_request_mismatch), the helpers every backend shares
// (reference/src/communicator.cpp) and the error kinds' names (reference/src/error.cpp).
// Each refusal is checked for its kind, its whole message (which names the bad value) and
// the group / sequence / ranks the CommError carries.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"
#include "test_util.hpp"

using namespace hpref;

namespace {

// The CommError `f` throws; fails the test case when it throws nothing.
CommError comm_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e;
  }
  BOOST_FAIL("expected a CommError");
  return CommError(Errc::internal, "not thrown");
}

void check_comm_error(const CommError& e, Errc code, const std::string& message, int group,
                      std::int64_t seq, const std::vector<int>& ranks) {
  BOOST_TEST(e.kind() == errc_name(code));
  BOOST_TEST(std::string(e.what()) == message);
  BOOST_TEST(e.group() == group);
  BOOST_TEST(e.seq() == seq);
  BOOST_TEST(e.ranks() == ranks);
}

MutableBuffer host(std::size_t bytes) { return {nullptr, bytes, MemorySpace::host}; }
MutableBuffer device(std::size_t bytes) { return {nullptr, bytes, MemorySpace::accelerator}; }

int kind_of(const OpSignature& s) { return static_cast<int>(s.kind); }

}  // namespace

BOOST_AUTO_TEST_SUITE(signature_checks)

// ---- new_group's arguments (SPEC 3.2, 9.1) ------------------------------------------------

BOOST_AUTO_TEST_CASE(group_ranks_come_back_sorted) {
  std::vector<int> ranks{3, 0, 2};
  BOOST_TEST(checked_group_ranks(ranks, "sim", 4) == (std::vector<int>{0, 2, 3}));
  std::vector<int> all{0, 1, 2, 3};
  BOOST_TEST(checked_group_ranks(all, "nccl", 4) == all);
}

BOOST_AUTO_TEST_CASE(group_ranks_refusals_name_the_ranks_as_given_and_the_backend) {
  auto refusal = [](std::vector<int> ranks, std::string backend, std::string got) {
    auto e = comm_error_of([&] { checked_group_ranks(ranks, backend, 4); });
    check_comm_error(
        e, Errc::comm_usage,
        "new_group needs distinct world ranks in [0, 4) and a backend name, got " + got, -1, -1,
        {});
  };
  refusal({}, "sim", "[] on 'sim'");                // no rank
  refusal({2, 1, 2}, "sim", "[2, 1, 2] on 'sim'");  // a rank twice (unsorted as given)
  refusal({-1, 0}, "sim", "[-1, 0] on 'sim'");      // below 0
  refusal({3, 4}, "sim", "[3, 4] on 'sim'");        // == world size
  refusal({0, 1}, "", "[0, 1] on ''");              // no backend name
}

// ---- new_group's agreement words (SPEC 9.2 checked mode, ARCHITECTURE: real backends) ------

BOOST_AUTO_TEST_CASE(fnv1a64_known_answers) {
  // Published FNV-1a 64 test vectors (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
  BOOST_TEST(fnv1a64("", 0) == 0xcbf29ce484222325ULL);
  BOOST_TEST(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
  BOOST_TEST(fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
  // A seed continues a running hash: "foo" then "bar" is "foobar".
  BOOST_TEST(fnv1a64("bar", 3, fnv1a64("foo", 3)) == 0x85944171f73967e8ULL);
}

BOOST_AUTO_TEST_CASE(group_request_is_the_backend_hash_then_one_flag_per_world_rank) {
  std::vector<int> ranks{0, 2};
  // FNV-1a 64 of "sim", computed independently (Python) from the published algorithm.
  BOOST_TEST(group_request(ranks, "sim", 4) ==
             (std::vector<std::uint64_t>{0x82489e195cecbf94ULL, 1, 0, 1, 0}));
  std::vector<int> last{3};
  BOOST_TEST(group_request(last, "nccl", 4) ==
             (std::vector<std::uint64_t>{0xd6b908ba98c29179ULL, 0, 0, 0, 1}));
}

namespace {

// The world's all-gathered requests: rank p asked for requests[p] on backends[p].
std::vector<std::uint64_t> gathered(const std::vector<std::vector<int>>& requests,
                                    const std::vector<std::string>& backends) {
  std::vector<std::uint64_t> all;
  int world = static_cast<int>(requests.size());
  for (std::size_t p = 0; p < requests.size(); ++p) {
    auto words = group_request(requests[p], backends[p], world);
    all.insert(all.end(), words.begin(), words.end());
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(agreeing_group_requests_are_no_mismatch) {
  std::vector<int> mine{0, 2};
  auto all = gathered({{0, 2}, {0, 2}, {0, 2}}, {"sim", "sim", "sim"});
  for (int rank = 0; rank < 3; ++rank) {
    BOOST_TEST(!group_request_mismatch(rank, mine, "sim", all, 3).has_value());
  }
}

BOOST_AUTO_TEST_CASE(group_request_mismatch_names_the_first_rank_that_asked_for_other_ranks) {
  std::vector<int> mine{0, 1};
  // Rank 1 agrees with rank 0; ranks 2 and 3 differ: the first, rank 2, is named.
  auto all = gathered({{0, 1}, {0, 1}, {0, 2, 3}, {3}}, {"sim", "sim", "sim", "sim"});
  auto e = group_request_mismatch(0, mine, "sim", all, 4);
  BOOST_REQUIRE(e.has_value());
  check_comm_error(*e, Errc::comm_mismatch,
                   "new_group mismatch: rank 0 asked for [0, 1] on sim but rank 2 asked for "
                   "[0, 2, 3] on sim",
                   -1, -1, {0, 2});
}

BOOST_AUTO_TEST_CASE(group_request_mismatch_on_the_backend_alone_says_another_backend) {
  std::vector<int> mine{1, 2};
  auto all = gathered({{1, 2}, {1, 2}, {1, 2}}, {"gloo", "mpi", "mpi"});
  // Rank 1 sees rank 0 first: same ranks, other backend name (only its hash travels).
  auto e = group_request_mismatch(1, mine, "mpi", all, 3);
  BOOST_REQUIRE(e.has_value());
  check_comm_error(*e, Errc::comm_mismatch,
                   "new_group mismatch: rank 1 asked for [1, 2] on mpi but rank 0 asked for [1, 2] "
                   "on another backend",
                   -1, -1, {1, 0});
  // A rank whose own words differ from every other rank's is told about the first of them.
  auto e0 = group_request_mismatch(0, mine, "gloo", all, 3);
  BOOST_REQUIRE(e0.has_value());
  BOOST_TEST(e0->ranks() == (std::vector<int>{0, 1}));
}

// Checked mode's new_group as an operation of the world's sequence (hpref.torch, hpref verify).
BOOST_AUTO_TEST_CASE(new_group_mismatch_names_another_launch_or_another_request) {
  Launch ask{true, {0, 1}, "gloo", {}};
  Launch other_ranks{true, {2, 3}, "gloo", {}};
  Launch other_backend{true, {0, 1}, "nccl", {}};
  OpSignature a2a;
  a2a.kind = OpKind::all_to_all_v;
  Launch op{false, {}, "", a2a};
  BOOST_TEST(ask.str() == "new_group([0, 1] on gloo)");
  BOOST_TEST(!new_group_mismatch(0, 4, 0, ask, 3, ask).has_value());
  BOOST_TEST(!new_group_mismatch(0, 4, 0, op, 3, op).has_value());  // signature_mismatch's job
  auto e = new_group_mismatch(0, 4, 0, ask, 3, op);
  BOOST_REQUIRE(e.has_value());
  check_comm_error(
      *e, Errc::comm_mismatch,
      "collective mismatch on group 0 seq 4: rank 0 launched new_group([0, 1] on gloo) "
      "but rank 3 launched all_to_all_v",
      0, 4, {0, 3});
  e = new_group_mismatch(0, 1, 0, ask, 2, other_ranks);
  BOOST_REQUIRE(e.has_value());
  check_comm_error(
      *e, Errc::comm_mismatch,
      "new_group mismatch on group 0 seq 1: rank 0 asked for [0, 1] on gloo but rank 2 "
      "asked for [2, 3] on gloo",
      0, 1, {0, 2});
  e = new_group_mismatch(0, 1, 1, other_backend, 0, ask);
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->what() ==
             std::string("new_group mismatch on group 0 seq 1: rank 1 asked for [0, 1] "
                         "on nccl but rank 0 asked for [0, 1] on gloo"));
}

// ---- membership and memory space (SPEC 9.1) ------------------------------------------------

BOOST_AUTO_TEST_CASE(every_operation_refuses_a_group_the_rank_is_not_a_member_of) {
  Group outside(5, {1, 2}, "sim", 0);
  BOOST_REQUIRE(!outside.is_member());
  auto expect = [](const std::function<void()>& f, const std::string& op) {
    check_comm_error(comm_error_of(f), Errc::comm_usage,
                     op + " on group 5 by rank 0, which is not a member", 5, -1, {});
  };
  expect([&] { check_all_gather(outside, 0, host(4), host(8)); }, "all_gather");
  expect([&] { check_broadcast(outside, 0, host(4), 1); }, "broadcast");
  expect([&] { check_all_reduce(outside, 0, host(8), DType::int64, ReduceOp::sum); }, "all_reduce");
  std::vector<std::size_t> counts{0, 0};
  expect([&] { check_all_to_all_v(outside, 0, host(0), counts, host(0), counts); }, "all_to_all_v");
  expect([&] { check_barrier(outside, 0); }, "barrier");
  // check_member alone, with the operation name it is given.
  expect([&] { check_member(outside, 0, "custom_op"); }, "custom_op");
  Group inside(5, {1, 2}, "sim", 2);
  check_member(inside, 2, "custom_op");  // no throw
}

BOOST_AUTO_TEST_CASE(an_accelerator_group_refuses_host_buffers_and_a_host_group_device_buffers) {
  Group gpu(2, {0, 1}, "nccl", 1);
  Group cpu(3, {0, 1}, "gloo", 0);
  BOOST_REQUIRE((gpu.memory() == MemorySpace::accelerator));
  BOOST_REQUIRE((cpu.memory() == MemorySpace::host));
  std::string on_gpu =
      " on group 2 (backend nccl) refuses a host buffer: the group moves "
      "accelerator memory";
  std::string on_cpu =
      " on group 3 (backend gloo) refuses a accelerator buffer: the group moves "
      "host memory";
  auto expect = [](const std::function<void()>& f, const std::string& message, int group,
                   int rank) {
    check_comm_error(comm_error_of(f), Errc::comm_memory_space, message, group, -1, {rank});
  };
  // all_gather checks its input and its output.
  expect([&] { check_all_gather(gpu, 1, host(4), device(8)); }, "all_gather" + on_gpu, 2, 1);
  expect([&] { check_all_gather(gpu, 1, device(4), host(8)); }, "all_gather" + on_gpu, 2, 1);
  expect([&] { check_all_gather(cpu, 0, device(4), host(8)); }, "all_gather" + on_cpu, 3, 0);
  expect([&] { check_all_gather(cpu, 0, host(4), device(8)); }, "all_gather" + on_cpu, 3, 0);
  expect([&] { check_broadcast(gpu, 1, host(4), 0); }, "broadcast" + on_gpu, 2, 1);
  expect([&] { check_all_reduce(cpu, 0, device(8), DType::int64, ReduceOp::sum); },
         "all_reduce" + on_cpu, 3, 0);
  std::vector<std::size_t> counts{1, 1};
  expect([&] { check_all_to_all_v(gpu, 1, host(2), counts, device(2), counts); },
         "all_to_all_v" + on_gpu, 2, 1);
  expect([&] { check_all_to_all_v(gpu, 1, device(2), counts, host(2), counts); },
         "all_to_all_v" + on_gpu, 2, 1);
  expect([&] { check_space(cpu, 1, MemorySpace::accelerator, "x"); }, "x" + on_cpu, 3, 1);
  check_space(gpu, 1, MemorySpace::accelerator, "x");  // the matching space passes
  // A barrier moves no buffer: accepted on either.
  BOOST_TEST(kind_of(check_barrier(gpu, 1)) == static_cast<int>(OpKind::barrier));
}

// ---- per-operation checks and the signatures they return (SPEC 9.1, 9.3) -----------------

BOOST_AUTO_TEST_CASE(all_gather_output_must_be_group_size_times_input) {
  Group g(1, {0, 2, 5}, "sim", 2);
  OpSignature s = check_all_gather(g, 2, host(4), host(12));
  BOOST_TEST(kind_of(s) == static_cast<int>(OpKind::all_gather));
  BOOST_TEST(s.bytes == 4u);  // per member, not the output
  BOOST_TEST(s.counts_in.empty());
  for (std::size_t out : {8u, 13u, 4u}) {
    check_comm_error(
        comm_error_of([&] { check_all_gather(g, 2, host(4), host(out)); }), Errc::comm_usage,
        "all_gather output of " + std::to_string(out) + " bytes is not group size 3 x input 4", 1,
        -1, {});
  }
  BOOST_TEST(check_all_gather(g, 2, host(0), host(0)).bytes == 0u);
  // 3 x 2^63 wraps to 2^63 in size_t: refused, not taken for a match.
  const std::size_t half = std::size_t{1} << 63;
  check_comm_error(comm_error_of([&] { check_all_gather(g, 2, host(half), host(half)); }),
                   Errc::comm_usage,
                   "all_gather output of " + std::to_string(half) +
                       " bytes is not group size 3 x input " + std::to_string(half),
                   1, -1, {});
}

BOOST_AUTO_TEST_CASE(broadcast_root_is_a_world_rank_of_the_group) {
  Group g(4, {1, 3, 6}, "sim", 3);
  OpSignature s = check_broadcast(g, 3, host(16), 6);
  BOOST_TEST(kind_of(s) == static_cast<int>(OpKind::broadcast));
  BOOST_TEST(s.root == 6);  // the world rank, not its index 2
  BOOST_TEST(s.bytes == 16u);
  for (int root : {2, 0, -1, 7}) {
    check_comm_error(
        comm_error_of([&] { check_broadcast(g, 3, host(16), root); }), Errc::comm_usage,
        "broadcast root " + std::to_string(root) + " is not a member of group 4", 4, -1, {});
  }
}

BOOST_AUTO_TEST_CASE(all_reduce_takes_four_dtypes_in_whole_elements) {
  Group g(6, {0, 1}, "sim", 0);
  struct Ok {
    DType dtype;
    std::size_t bytes;
  };
  for (Ok ok :
       {Ok{DType::int32, 12}, Ok{DType::int64, 16}, Ok{DType::float32, 4}, Ok{DType::float64, 0}}) {
    OpSignature s = check_all_reduce(g, 0, host(ok.bytes), ok.dtype, ReduceOp::min);
    BOOST_TEST(kind_of(s) == static_cast<int>(OpKind::all_reduce));
    BOOST_TEST(s.dtype == ok.dtype);
    BOOST_TEST((s.op == ReduceOp::min));
    BOOST_TEST(s.bytes == ok.bytes);
  }
  BOOST_TEST((check_all_reduce(g, 0, host(8), DType::float64, ReduceOp::max).op == ReduceOp::max));
  auto refused = [&](DType dtype, std::size_t bytes, const std::string& got) {
    auto call = [&] { check_all_reduce(g, 0, host(bytes), dtype, ReduceOp::sum); };
    check_comm_error(comm_error_of(call), Errc::comm_usage,
                     "all_reduce takes int32, int64, float32 or float64 and a whole number of "
                     "elements, got " +
                         got,
                     6, -1, {});
  };
  refused(DType::uint8, 8, "uint8 over 8 bytes");
  refused(DType::float16, 8, "float16 over 8 bytes");
  refused(DType::boolean, 1, "bool over 1 bytes");
  refused(DType::int32, 6, "int32 over 6 bytes");    // 1.5 elements
  refused(DType::int64, 12, "int64 over 12 bytes");  // 1.5 elements
  refused(DType::float32, 2, "float32 over 2 bytes");
  refused(DType::float64, 4, "float64 over 4 bytes");
}

BOOST_AUTO_TEST_CASE(all_to_all_v_counts_one_per_member_each_way_within_the_buffers) {
  Group g(7, {0, 1, 2}, "sim", 1);
  std::vector<std::size_t> in{1, 0, 3}, out{2, 2, 0};
  OpSignature s = check_all_to_all_v(g, 1, host(4), in, host(5), out);
  BOOST_TEST(kind_of(s) == static_cast<int>(OpKind::all_to_all_v));
  BOOST_TEST(s.bytes == 4u);  // bytes sent
  BOOST_TEST(s.counts_in == (std::vector<std::uint64_t>{1, 0, 3}));
  BOOST_TEST(s.counts_out == (std::vector<std::uint64_t>{2, 2, 0}));
  auto refused = [&](std::vector<std::size_t> ic, std::size_t in_bytes, std::vector<std::size_t> oc,
                     std::size_t out_bytes, const std::string& got) {
    check_comm_error(
        comm_error_of([&] { check_all_to_all_v(g, 1, host(in_bytes), ic, host(out_bytes), oc); }),
        Errc::comm_usage, "all_to_all_v needs 3 counts each way within the buffers, got " + got, 7,
        -1, {});
  };
  refused({1, 3}, 4, out, 4, "2 summing to 4 of 4 and 3 summing to 4 of 4");
  refused(in, 4, {2, 2, 0, 0}, 4, "3 summing to 4 of 4 and 4 summing to 4 of 4");
  refused(in, 3, out, 4, "3 summing to 4 of 3 and 3 summing to 4 of 4");
  refused(in, 4, out, 3, "3 summing to 4 of 4 and 3 summing to 4 of 3");
  // Counts whose sum wraps size_t (a count of -1 converted to size_t) must not pass as the
  // small wrapped total: SIZE_MAX + 2 + 0 is 1 modulo 2^64, within a 4-byte buffer.
  const std::size_t minus_one = std::numeric_limits<std::size_t>::max();
  refused({minus_one, 2, 0}, 4, out, 5,
          "3 summing to at least 2^64 - 1 of 4 and 3 summing to 4 of 5");
  refused(in, 4, {2, minus_one, 3}, 5,
          "3 summing to 4 of 4 and 3 summing to at least 2^64 - 1 of 5");
}

// Send displacements: one per member (or none); each block inside the send buffer, which
// blocks may overlap, so the counts may sum past it.
BOOST_AUTO_TEST_CASE(all_to_all_v_blocks_at_displacements_lie_inside_the_send_buffer) {
  Group g(7, {0, 1, 2}, "sim", 1);
  std::vector<std::size_t> in{3, 0, 3}, out{2, 2, 0};
  std::vector<std::size_t> displs{1, 9, 0};  // overlapping blocks; the empty one anywhere
  OpSignature s = check_all_to_all_v(g, 1, host(4), in, host(5), out, displs);
  BOOST_TEST(s.bytes == 6u);  // bytes sent: more than the buffer
  BOOST_TEST(s.counts_in == (std::vector<std::uint64_t>{3, 0, 3}));
  auto refused = [&](std::vector<std::size_t> d, std::size_t in_bytes, const std::string& text) {
    check_comm_error(
        comm_error_of([&] { check_all_to_all_v(g, 1, host(in_bytes), in, host(5), out, d); }),
        Errc::comm_usage, text, 7, -1, {});
  };
  refused({1, 0}, 4, "all_to_all_v needs 3 send displacements (or none), got 2");
  refused({2, 0, 0}, 4,
          "all_to_all_v's block for member 0 (3 bytes at displacement 2) ends past the send "
          "buffer of 4 bytes");
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 1;  // wraps with the count
  refused({0, 0, huge}, 4,
          "all_to_all_v's block for member 2 (3 bytes at displacement " + std::to_string(huge) +
              ") ends past the send buffer of 4 bytes");
  // Without displacements the counts may not sum past the buffer.
  check_comm_error(comm_error_of([&] { check_all_to_all_v(g, 1, host(5), in, host(5), out); }),
                   Errc::comm_usage,
                   "all_to_all_v needs 3 counts each way within the buffers, got 3 summing to 6 "
                   "of 5 and 3 summing to 4 of 5",
                   7, -1, {});
}

BOOST_AUTO_TEST_CASE(barrier_signature_is_the_bare_kind) {
  Group g(0, {0, 1}, "sim", 1);
  OpSignature s = check_barrier(g, 1);
  BOOST_TEST(kind_of(s) == static_cast<int>(OpKind::barrier));
  BOOST_TEST(s.bytes == 0u);
  BOOST_TEST(s.str() == "barrier");
}

BOOST_AUTO_TEST_SUITE_END()

// ---- reference/src/communicator.cpp ------------------------------------------------------

BOOST_AUTO_TEST_SUITE(communicator_helpers)

BOOST_AUTO_TEST_CASE(reduce_op_names) {
  BOOST_TEST(reduce_op_name(ReduceOp::sum) == "sum");
  BOOST_TEST(reduce_op_name(ReduceOp::min) == "min");
  BOOST_TEST(reduce_op_name(ReduceOp::max) == "max");
  // ReduceOp has a fixed underlying type, so any byte is a value; an unnamed one reads "?".
  BOOST_TEST(reduce_op_name(static_cast<ReduceOp>(3)) == "?");
}

BOOST_AUTO_TEST_CASE(accelerator_backends_by_name_in_any_case) {
  BOOST_TEST(std::string(accelerator_device_type("nccl")) == "cuda");
  BOOST_TEST(std::string(accelerator_device_type("cpu:gloo,cuda:NCCL")) == "cuda");
  BOOST_TEST(std::string(accelerator_device_type("HCCL")) == "npu");
  BOOST_TEST(accelerator_device_type("gloo") == nullptr);
  BOOST_TEST(accelerator_device_type("") == nullptr);
  BOOST_TEST(is_accelerator_backend_name("Nccl"));
  BOOST_TEST(is_accelerator_backend_name("hccl"));
  BOOST_TEST(!is_accelerator_backend_name("mpi"));
}

BOOST_AUTO_TEST_CASE(group_index_and_memory) {
  Group g(3, {1, 4, 6}, "hccl", 4);
  BOOST_TEST(g.is_member());
  BOOST_TEST(g.index() == 1);
  BOOST_TEST(g.size() == 3);
  BOOST_TEST(g.index_of(6) == 2);
  BOOST_TEST(g.index_of(1) == 0);
  BOOST_TEST(g.index_of(5) == -1);
  BOOST_TEST(g.backend() == "hccl");
  BOOST_TEST((g.memory() == MemorySpace::accelerator));
  Group none;
  BOOST_TEST(!none.is_member());
  BOOST_TEST(none.id() == -1);
  BOOST_TEST(none.index_of(0) == -1);
}

BOOST_AUTO_TEST_CASE(work_wait_runs_the_state_each_time) {
  struct Counting : Work::State {
    int* waits;
    explicit Counting(int* w) : waits(w) {}
    void wait() override { ++*waits; }
  };
  int waits = 0;
  Work w(std::make_shared<Counting>(&waits));
  BOOST_TEST(w.valid());
  w.wait();
  w.wait();
  BOOST_TEST(waits == 2);
  Work empty;
  BOOST_TEST(!empty.valid());
  HPREF_CHECK_ERROR(empty.wait(), Errc::comm_usage, "wait() on an empty Work");
}

namespace {

template <class T>
std::vector<T> reduced(DType dtype, ReduceOp op, std::vector<T> dst, const std::vector<T>& src) {
  reduce_into(dtype, op, dst.data(), src.data(), dst.size());
  return dst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reduce_into_each_dtype_and_op) {
  using I32 = std::int32_t;
  using I64 = std::int64_t;
  std::vector<I32> a32{1, -5, 7}, b32{10, -2, 7};
  BOOST_TEST(reduced(DType::int32, ReduceOp::sum, a32, b32) == (std::vector<I32>{11, -7, 14}));
  BOOST_TEST(reduced(DType::int32, ReduceOp::min, a32, b32) == (std::vector<I32>{1, -5, 7}));
  BOOST_TEST(reduced(DType::int32, ReduceOp::max, a32, b32) == (std::vector<I32>{10, -2, 7}));
  // Integer sums wrap modulo 2^bits, as torch's int tensors do.
  auto max32 = std::numeric_limits<I32>::max();
  BOOST_TEST(reduced(DType::int32, ReduceOp::sum, std::vector<I32>{max32}, {1}) ==
             (std::vector<I32>{std::numeric_limits<I32>::min()}));
  std::vector<I64> a64{1LL << 40, -3}, b64{1, -4};
  BOOST_TEST(reduced(DType::int64, ReduceOp::sum, a64, b64) ==
             (std::vector<I64>{(1LL << 40) + 1, -7}));
  BOOST_TEST(reduced(DType::int64, ReduceOp::min, a64, b64) == (std::vector<I64>{1, -4}));
  BOOST_TEST(reduced(DType::int64, ReduceOp::max, a64, b64) == (std::vector<I64>{1LL << 40, -3}));
  std::vector<float> af{0.5f, -1.0f}, bf{0.25f, 2.0f};
  BOOST_TEST(reduced(DType::float32, ReduceOp::sum, af, bf) == (std::vector<float>{0.75f, 1.0f}));
  BOOST_TEST(reduced(DType::float32, ReduceOp::min, af, bf) == (std::vector<float>{0.25f, -1.0f}));
  BOOST_TEST(reduced(DType::float32, ReduceOp::max, af, bf) == (std::vector<float>{0.5f, 2.0f}));
  std::vector<double> ad{1.5, -8.0}, bd{2.25, 8.0};
  BOOST_TEST(reduced(DType::float64, ReduceOp::sum, ad, bd) == (std::vector<double>{3.75, 0.0}));
  BOOST_TEST(reduced(DType::float64, ReduceOp::min, ad, bd) == (std::vector<double>{1.5, -8.0}));
  BOOST_TEST(reduced(DType::float64, ReduceOp::max, ad, bd) == (std::vector<double>{2.25, 8.0}));
  // Only `count` elements are touched.
  std::vector<I32> partial{1, 1, 1}, ones{1, 1, 1};
  reduce_into(DType::int32, ReduceOp::sum, partial.data(), ones.data(), 2);
  BOOST_TEST(partial == (std::vector<I32>{2, 2, 1}));
}

BOOST_AUTO_TEST_CASE(reduce_into_refuses_other_dtypes) {
  std::uint8_t a = 1, b = 2;
  HPREF_CHECK_ERROR(reduce_into(DType::uint8, ReduceOp::sum, &a, &b, 1), Errc::comm_usage,
                    "all_reduce takes int32, int64, float32 or float64, not uint8");
  HPREF_CHECK_ERROR(reduce_into(DType::float16, ReduceOp::max, &a, &b, 0), Errc::comm_usage,
                    "all_reduce takes int32, int64, float32 or float64, not float16");
  BOOST_TEST(a == 1);
}

BOOST_AUTO_TEST_CASE(copy_with_checksum_copies_and_agrees_with_buffer_checksum) {
  // Lengths around the 32-byte blocks the checksum takes at once.
  for (std::size_t n : {0u, 1u, 31u, 32u, 33u, 64u, 100u}) {
    std::vector<std::uint8_t> src(n), dst(n + 1, 0xEE);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::uint8_t>(i * 37 + 11);
    std::uint64_t sum = copy_with_checksum(dst.data(), src.data(), n);
    BOOST_TEST(sum == buffer_checksum(src.data(), n), "n=" << n);
    BOOST_TEST(std::equal(src.begin(), src.end(), dst.begin()), "n=" << n);  // (no memcmp of null)
    BOOST_TEST(dst[n] == 0xEE, "n=" << n);                                   // nothing past the end
  }
}

BOOST_AUTO_TEST_CASE(buffer_checksum_sees_a_changed_byte_a_swap_and_the_length) {
  std::vector<std::uint8_t> base(100);
  for (std::size_t i = 0; i < base.size(); ++i) base[i] = static_cast<std::uint8_t>(i * 7 + 3);
  std::uint64_t h = buffer_checksum(base.data(), base.size());
  // One byte flipped in every position: inside the 32-byte blocks (0..95) and the tail.
  std::set<std::uint64_t> seen{h};
  for (std::size_t i = 0; i < base.size(); ++i) {
    auto changed = base;
    changed[i] ^= 0x01;
    std::uint64_t c = buffer_checksum(changed.data(), changed.size());
    BOOST_TEST(c != h, "byte " << i);
    seen.insert(c);
  }
  BOOST_TEST(seen.size() == base.size() + 1);  // every flip gives its own checksum
  // Two 8-byte words swapped between blocks (same lane, words 0 and 4): order matters.
  auto swapped = base;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 32);
  BOOST_TEST(buffer_checksum(swapped.data(), swapped.size()) != h);
  // A zero byte appended is another buffer.
  std::vector<std::uint8_t> zeros(40, 0);
  BOOST_TEST(buffer_checksum(zeros.data(), 40) != buffer_checksum(zeros.data(), 39));
  BOOST_TEST(buffer_checksum(zeros.data(), 32) != buffer_checksum(zeros.data(), 0));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- reference/src/error.cpp ---------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(error_names)

BOOST_AUTO_TEST_CASE(every_kind_is_named_by_its_own_spelling) {
  // errc_name gives each kind its stable snake_case name (printed in JSON answers): the name
  // of Errc::x is "x" for every kind in HPREF_ERROR_KINDS, and no two kinds share a name.
  std::set<std::string_view> names;
#define HPREF_NAME_CHECK(name)                        \
  BOOST_TEST(errc_name(Errc::name) == #name);         \
  BOOST_TEST(Error(Errc::name, "m").kind() == #name); \
  names.insert(errc_name(Errc::name));
  HPREF_ERROR_KINDS(HPREF_NAME_CHECK)
#undef HPREF_NAME_CHECK
  std::size_t kinds = 0;
#define HPREF_COUNT(name) ++kinds;
  HPREF_ERROR_KINDS(HPREF_COUNT)
#undef HPREF_COUNT
  BOOST_TEST(names.size() == kinds);
  // A few spelled out, independent of the X-macro.
  BOOST_TEST(errc_name(Errc::invalid_dtype) == "invalid_dtype");
  BOOST_TEST(errc_name(Errc::frame_size_mismatch) == "frame_size_mismatch");
  BOOST_TEST(errc_name(Errc::comm_mismatch) == "comm_mismatch");
  BOOST_TEST(errc_name(Errc::internal) == "internal");
}

BOOST_AUTO_TEST_CASE(a_value_outside_the_kinds_is_unknown) {
  // Errc is a scoped enum (underlying int), so any int converts to a value; one past the
  // last kind, and a negative one, have no name.
  std::size_t kinds = 0;
#define HPREF_COUNT(name) ++kinds;
  HPREF_ERROR_KINDS(HPREF_COUNT)
#undef HPREF_COUNT
  BOOST_TEST(errc_name(static_cast<Errc>(kinds)) == "unknown");
  BOOST_TEST(errc_name(static_cast<Errc>(-1)) == "unknown");
  BOOST_TEST(errc_name(static_cast<Errc>(kinds - 1)) == "internal");  // the last kind
}

BOOST_AUTO_TEST_CASE(failed_internal_checks_are_internal_errors_naming_file_line_and_values) {
  // HPREF_CHECK / HPREF_CHECK_EQ (error.hpp) report our own bugs through check_failed.
  int one = 1, two = 2;
  int line = 0;
  try {
    line = __LINE__ + 1;
    HPREF_CHECK(one + one == 3);
    BOOST_FAIL("HPREF_CHECK passed a false condition");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == "internal");
    BOOST_TEST(std::string(e.what()) == std::string("internal check failed at ") + __FILE__ + ":" +
                                            std::to_string(line) + ": CHECK(one + one == 3)");
  }
  try {
    line = __LINE__ + 1;
    HPREF_CHECK_EQ(one, two);
    BOOST_FAIL("HPREF_CHECK_EQ passed unequal values");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == "internal");
    BOOST_TEST(std::string(e.what()) == std::string("internal check failed at ") + __FILE__ + ":" +
                                            std::to_string(line) +
                                            ": CHECK_EQ(one, two) with 1 != 2");
  }
  HPREF_CHECK(one + one == 2);  // true conditions pass
  HPREF_CHECK_EQ(one + 1, two);
  HPREF_CHECK_ERROR(detail::check_failed("f.cpp", 7, "why"), Errc::internal,
                    "internal check failed at f.cpp:7: why");
}

BOOST_AUTO_TEST_SUITE_END()
