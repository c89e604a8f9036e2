// SPEC 9.1: the checked-mode signature's wire form (what MPI and NCCL all-gather before a
// launch) and the mismatch text built from it; the simulator compares signatures without the
// wire form, so these run here rather than only under the mpi label.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/op_signature.hpp"

using namespace hpref;

BOOST_AUTO_TEST_SUITE(op_signature_wire)

BOOST_AUTO_TEST_CASE(all_to_all_v_signature_round_trips_through_the_wire_form) {
  OpSignature s;
  s.kind = OpKind::all_to_all_v;
  s.bytes = 7;
  s.counts_in = {1, 2, 3};
  s.counts_out = {4, 5, 6};
  std::vector<std::uint8_t> wire(signature_wire_bytes(3));
  write_signature(s, 3, wire.data());
  OpSignature r = read_signature(wire.data(), 3);
  BOOST_TEST(static_cast<int>(r.kind) == static_cast<int>(OpKind::all_to_all_v));
  BOOST_TEST(r.bytes == 7u);
  BOOST_TEST(r.counts_in == s.counts_in);
  BOOST_TEST(r.counts_out == s.counts_out);
}

BOOST_AUTO_TEST_CASE(all_reduce_and_broadcast_fields_round_trip) {
  OpSignature s;
  s.kind = OpKind::all_reduce;
  s.op = ReduceOp::max;
  s.dtype = DType::int64;
  s.bytes = 64;
  std::vector<std::uint8_t> wire(signature_wire_bytes(2));
  write_signature(s, 2, wire.data());
  OpSignature r = read_signature(wire.data(), 2);
  BOOST_TEST(r.str() == s.str());
  BOOST_TEST(same_call(r, s));
  s.kind = OpKind::broadcast;
  s.root = 5;
  write_signature(s, 2, wire.data());
  r = read_signature(wire.data(), 2);
  BOOST_TEST(r.root == 5);
  BOOST_TEST(same_call(r, s));
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_a_signature_are_comm_mismatch) {
  std::vector<std::uint8_t> wire(signature_wire_bytes(2), 0);
  try {
    read_signature(wire.data(), 2);
    BOOST_FAIL("read_signature accepted zero bytes");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == "comm_mismatch");
  }
}

BOOST_AUTO_TEST_CASE(signature_mismatch_names_both_ranks_and_both_calls) {
  Group g(3, {0, 2}, "sim", 0);
  OpSignature a, b;
  a.kind = OpKind::all_gather;
  a.bytes = 8;
  b.kind = OpKind::all_gather;
  b.bytes = 16;
  std::vector<OpSignature> same{a, a};
  BOOST_TEST(!signature_mismatch(g, 1, same).has_value());
  std::vector<OpSignature> members{a, b};
  auto err = signature_mismatch(g, 1, members);
  BOOST_REQUIRE(err.has_value());
  std::string text = err->what();
  BOOST_TEST(text.find("rank 0 launched " + a.str()) != std::string::npos, text);
  BOOST_TEST(text.find("rank 2 launched " + b.str()) != std::string::npos, text);
}

BOOST_AUTO_TEST_SUITE_END()
