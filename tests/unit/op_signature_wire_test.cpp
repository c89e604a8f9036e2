// SPEC 9.1: the checked-mode signature's wire form (what MPI and NCCL all-gather before a
// launch) and the mismatch text built from it; the simulator compares signatures without the
// wire form, so these run here rather than only under the mpi label. SPEC 9.2-9.3: what
// members must agree on (kind, root, reduce op and dtype, counts; all-to-all-v send counts
// i->j equal to receive counts j<-i) and the comm_mismatch naming group, sequence and ranks.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpref/communicator.hpp"
#include "hpref/op_signature.hpp"
#include "test_util.hpp"

using namespace hpref;

namespace {

OpSignature gather(std::uint64_t bytes) {
  OpSignature s;
  s.kind = OpKind::all_gather;
  s.bytes = bytes;
  return s;
}

OpSignature bcast(int root, std::uint64_t bytes) {
  OpSignature s;
  s.kind = OpKind::broadcast;
  s.root = root;
  s.bytes = bytes;
  return s;
}

OpSignature reduce(ReduceOp op, DType dtype, std::uint64_t bytes) {
  OpSignature s;
  s.kind = OpKind::all_reduce;
  s.op = op;
  s.dtype = dtype;
  s.bytes = bytes;
  return s;
}

OpSignature barrier() { return OpSignature{}; }

// The signatures of a consistent all_to_all_v: member i sends m[i][j] bytes to member j, so
// its counts_in is row i and its counts_out (bytes from each member) is column i.
std::vector<OpSignature> a2av(const std::vector<std::vector<std::uint64_t>>& m) {
  std::vector<OpSignature> out(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    out[i].kind = OpKind::all_to_all_v;
    out[i].counts_in = m[i];
    for (std::size_t j = 0; j < m.size(); ++j) {
      out[i].counts_out.push_back(m[j][i]);
      out[i].bytes += m[i][j];
    }
  }
  return out;
}

std::vector<std::uint64_t> words_of(const std::vector<std::uint8_t>& wire) {
  std::vector<std::uint64_t> words(wire.size() / 8);
  std::memcpy(words.data(), wire.data(), words.size() * 8);
  return words;
}

std::vector<std::uint8_t> wire_of(const OpSignature& s, int members) {
  std::vector<std::uint8_t> wire(signature_wire_bytes(members));
  write_signature(s, members, wire.data());
  return wire;
}

constexpr std::uint64_t kMagic = 0x4850524546534947ULL;  // "HPREFSIG"
const std::string kNotASignature =
    "a peer's checked-mode signature is not one (is every rank running the same hpref in "
    "checked mode?)";

}  // namespace

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

BOOST_AUTO_TEST_CASE(wire_form_is_six_words_then_the_counts_each_way_zero_padded) {
  BOOST_TEST(signature_wire_bytes(0) == 48u);
  BOOST_TEST(signature_wire_bytes(3) == 96u);
  OpSignature s;
  s.kind = OpKind::all_to_all_v;
  s.bytes = 7;
  s.counts_in = {1, 2};  // shorter than the 3 members: the missing count is 0
  s.counts_out = {4};
  std::vector<std::uint8_t> wire(signature_wire_bytes(3) + 1, 0xAB);
  write_signature(s, 3, wire.data());
  BOOST_TEST(wire.back() == 0xAB);  // nothing written past the wire form
  wire.pop_back();
  // magic, kind (all_to_all_v = 3), root (-1 as two's complement), op (sum = 0),
  // dtype (uint8, index 11 in SPEC 1.3's table), bytes, counts_in x 3, counts_out x 3.
  BOOST_TEST(words_of(wire) ==
             (std::vector<std::uint64_t>{kMagic, 3, ~0ULL, 0, 11, 7, 1, 2, 0, 4, 0, 0}));
  OpSignature r = read_signature(wire.data(), 3);
  BOOST_TEST(r.root == -1);
  BOOST_TEST(r.counts_in == (std::vector<std::uint64_t>{1, 2, 0}));
  BOOST_TEST(r.counts_out == (std::vector<std::uint64_t>{4, 0, 0}));
}

BOOST_AUTO_TEST_CASE(other_kinds_carry_no_counts_after_reading) {
  OpSignature s = bcast(-3, 1ULL << 40);
  s.counts_in = {9, 9};  // not part of a broadcast: written, but not read back
  auto wire = wire_of(s, 2);
  BOOST_TEST(words_of(wire) ==
             (std::vector<std::uint64_t>{kMagic, 1, static_cast<std::uint64_t>(-3), 0, 11,
                                         1ULL << 40, 9, 9, 0, 0}));
  OpSignature r = read_signature(wire.data(), 2);
  BOOST_TEST(static_cast<int>(r.kind) == static_cast<int>(OpKind::broadcast));
  BOOST_TEST(r.root == -3);
  BOOST_TEST(r.bytes == 1ULL << 40);
  BOOST_TEST(r.counts_in.empty());
  BOOST_TEST(r.counts_out.empty());
  OpSignature g = read_signature(wire_of(gather(12), 4).data(), 4);
  BOOST_TEST(g.str() == "all_gather(12 bytes each)");
  BOOST_TEST(g.counts_in.empty());
  OpSignature f = read_signature(wire_of(reduce(ReduceOp::min, DType::float32, 8), 1).data(), 1);
  BOOST_TEST(f.str() == "all_reduce(min, float32, 8 bytes)");
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_a_signature_are_comm_mismatch) {
  std::vector<std::uint8_t> wire(signature_wire_bytes(2), 0);
  try {
    read_signature(wire.data(), 2);
    BOOST_FAIL("read_signature accepted zero bytes");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == "comm_mismatch");
    BOOST_TEST(std::string(e.what()) == kNotASignature);
  }
}

BOOST_AUTO_TEST_CASE(each_field_out_of_range_is_not_a_signature_and_the_last_value_is_one) {
  // Word 0 magic, 1 kind (0..4), 3 reduce op (0..2), 4 dtype (0..27, SPEC 1.3).
  struct Field {
    std::size_t word;
    std::uint64_t last_valid;
    std::uint64_t invalid;
  };
  auto base = wire_of(reduce(ReduceOp::sum, DType::int32, 4), 2);
  for (Field f : {Field{0, kMagic, kMagic + 1}, Field{0, kMagic, kMagic ^ (1ULL << 63)},
                  Field{1, 4, 5}, Field{1, 4, ~0ULL}, Field{3, 2, 3},
                  Field{4, static_cast<std::uint64_t>(kDTypeCount) - 1, kDTypeCount}}) {
    auto wire = base;
    std::memcpy(wire.data() + 8 * f.word, &f.invalid, 8);
    HPREF_CHECK_ERROR(read_signature(wire.data(), 2), Errc::comm_mismatch, kNotASignature);
    std::memcpy(wire.data() + 8 * f.word, &f.last_valid, 8);
    OpSignature r = read_signature(wire.data(), 2);  // accepted
    BOOST_TEST(r.bytes == 4u);
  }
  std::uint64_t max_op = 2, last_dtype = kDTypeCount - 1, barrier_kind = 4;
  auto wire = base;
  std::memcpy(wire.data() + 24, &max_op, 8);
  std::memcpy(wire.data() + 32, &last_dtype, 8);
  OpSignature r = read_signature(wire.data(), 2);
  BOOST_TEST(r.str() == "all_reduce(max, bits16, 4 bytes)");
  std::memcpy(wire.data() + 8, &barrier_kind, 8);
  BOOST_TEST(read_signature(wire.data(), 2).str() == "barrier");
}

// ---- what members must agree on (SPEC 9.3) ------------------------------------------------

BOOST_AUTO_TEST_CASE(kind_names_and_signature_text) {
  BOOST_TEST(std::string(op_kind_name(OpKind::all_gather)) == "all_gather");
  BOOST_TEST(std::string(op_kind_name(OpKind::broadcast)) == "broadcast");
  BOOST_TEST(std::string(op_kind_name(OpKind::all_reduce)) == "all_reduce");
  BOOST_TEST(std::string(op_kind_name(OpKind::all_to_all_v)) == "all_to_all_v");
  BOOST_TEST(std::string(op_kind_name(OpKind::barrier)) == "barrier");
  // OpKind has a fixed underlying type: a value with no kind (a peer's garbage) reads "?".
  BOOST_TEST(std::string(op_kind_name(static_cast<OpKind>(5))) == "?");
  BOOST_TEST(reduce(ReduceOp::sum, DType::int64, 8).str() == "all_reduce(sum, int64, 8 bytes)");
  BOOST_TEST(bcast(3, 16).str() == "broadcast(root 3, 16 bytes)");
  BOOST_TEST(gather(8).str() == "all_gather(8 bytes each)");
  BOOST_TEST(barrier().str() == "barrier");
  BOOST_TEST(a2av({{1, 2}, {3, 4}})[0].str() == "all_to_all_v");
}

BOOST_AUTO_TEST_CASE(same_call_compares_the_fields_of_the_kind) {
  BOOST_TEST(!same_call(gather(8), bcast(-1, 8)));  // kind
  BOOST_TEST(!same_call(barrier(), gather(0)));
  BOOST_TEST(same_call(bcast(2, 8), bcast(2, 8)));
  BOOST_TEST(!same_call(bcast(2, 8), bcast(3, 8)));  // root
  BOOST_TEST(!same_call(bcast(2, 8), bcast(2, 9)));  // bytes
  auto r = reduce(ReduceOp::sum, DType::int32, 8);
  BOOST_TEST(same_call(r, reduce(ReduceOp::sum, DType::int32, 8)));
  BOOST_TEST(!same_call(r, reduce(ReduceOp::max, DType::int32, 8)));    // op
  BOOST_TEST(!same_call(r, reduce(ReduceOp::sum, DType::float32, 8)));  // dtype
  BOOST_TEST(!same_call(r, reduce(ReduceOp::sum, DType::int32, 12)));   // bytes
  BOOST_TEST(same_call(gather(8), gather(8)));
  BOOST_TEST(!same_call(gather(8), gather(16)));
  // Fields a kind does not use do not count.
  auto g = gather(8);
  g.root = 4;
  g.op = ReduceOp::min;
  BOOST_TEST(same_call(gather(8), g));
  auto b = bcast(1, 4);
  b.dtype = DType::float64;
  BOOST_TEST(same_call(bcast(1, 4), b));
  BOOST_TEST(same_call(barrier(), barrier()));
  // all_to_all_v: counts are compared pairwise by a2av_disagreement, not here.
  auto x = a2av({{1, 2}, {3, 4}}), y = a2av({{5, 6}, {7, 8}});
  BOOST_TEST(same_call(x[0], y[1]));
}

BOOST_AUTO_TEST_CASE(a2av_disagreement_finds_the_first_sender_receiver_pair) {
  auto m = a2av({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  BOOST_TEST(!a2av_disagreement(m).has_value());
  BOOST_TEST(!a2av_disagreement(std::span<const OpSignature>{}).has_value());
  m[2].counts_out[1] = 99;  // 2 expects 99 from 1, which sends 5
  m[2].counts_in[0] = 50;   // 2 sends 50 to 0, which expects 6
  auto bad = a2av_disagreement(m);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST(bad->first == 1);  // the pair (sender 1, receiver 2) comes first in member order
  BOOST_TEST(bad->second == 2);
  m[2].counts_out[1] = 5;
  bad = a2av_disagreement(m);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST(bad->first == 2);
  BOOST_TEST(bad->second == 0);
  // A member's count to itself must agree with itself (the diagonal is a pair too).
  auto d = a2av({{4, 1}, {1, 4}});
  d[1].counts_out[1] = 3;
  bad = a2av_disagreement(d);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST((*bad == std::make_pair(1, 1)));
}

BOOST_AUTO_TEST_CASE(a2av_disagreement_reads_missing_counts_as_zero_bytes) {
  // A signature without counts (not from check_all_to_all_v) sends and expects nothing.
  std::vector<OpSignature> m(2);
  for (auto& s : m) s.kind = OpKind::all_to_all_v;
  BOOST_TEST(!a2av_disagreement(m).has_value());
  m[1].counts_in = {0};  // to member 0: 0 bytes, as member 0 (no counts) expects
  BOOST_TEST(!a2av_disagreement(m).has_value());
  m[0].counts_in = {0, 5};  // 0 sends 5 to 1, which expects nothing
  auto bad = a2av_disagreement(m);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST((*bad == std::make_pair(0, 1)));
  m[0].counts_in = {};
  m[1].counts_out = {0, 2};  // 1 expects 2 bytes from itself, and sends none
  bad = a2av_disagreement(m);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST((*bad == std::make_pair(1, 1)));
}

BOOST_AUTO_TEST_CASE(signature_mismatch_names_both_ranks_and_both_calls) {
  Group g(3, {0, 2}, "sim", 0);
  OpSignature a = gather(8), b = gather(16);
  std::vector<OpSignature> same{a, a};
  BOOST_TEST(!signature_mismatch(g, 1, same).has_value());
  std::vector<OpSignature> members{a, b};
  auto err = signature_mismatch(g, 1, members);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(err->kind() == "comm_mismatch");
  BOOST_TEST(std::string(err->what()) ==
             "collective mismatch on group 3 seq 1: rank 0 launched all_gather(8 bytes each) but "
             "rank 2 launched all_gather(16 bytes each)");
  BOOST_TEST(err->group() == 3);
  BOOST_TEST(err->seq() == 1);
  BOOST_TEST(err->ranks() == (std::vector<int>{0, 2}));
}

BOOST_AUTO_TEST_CASE(buffer_mutated_error_names_rank_operation_group_and_seq) {
  CommError err = buffer_mutated_error(2, OpKind::all_reduce, 1, 4);
  BOOST_TEST(err.kind() == "comm_buffer_mutated");
  BOOST_TEST(std::string(err.what()) ==
             "rank 2 changed its send buffer of all_reduce on group 1 seq 4 between launch "
             "and wait");
  BOOST_TEST(err.group() == 1);
  BOOST_TEST(err.seq() == 4);
  BOOST_TEST(err.ranks() == (std::vector<int>{2}));
  BOOST_TEST(std::string(buffer_mutated_error(0, OpKind::broadcast, 0, -1).what()) ==
             "rank 0 changed its send buffer of broadcast on group 0 between launch and wait");
}

BOOST_AUTO_TEST_CASE(signature_mismatch_names_the_first_member_that_differs_from_the_first) {
  Group g(3, {2, 5, 7}, "sim", 5);
  std::vector<OpSignature> members{bcast(5, 16), bcast(5, 16), bcast(7, 16)};
  auto err = signature_mismatch(g, 0, members);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(std::string(err->what()) ==
             "collective mismatch on group 3 seq 0: rank 2 launched broadcast(root 5, 16 bytes) "
             "but rank 7 launched broadcast(root 7, 16 bytes)");
  BOOST_TEST(err->ranks() == (std::vector<int>{2, 7}));
  BOOST_TEST(!signature_mismatch(g, 0, std::span<const OpSignature>{}).has_value());
  std::vector<OpSignature> one{barrier()};
  BOOST_TEST(!signature_mismatch(g, 0, one).has_value());
}

BOOST_AUTO_TEST_CASE(all_to_all_v_counts_that_disagree_are_a_mismatch_naming_sender_and_receiver) {
  Group g(3, {2, 5, 7}, "sim", 2);
  auto m = a2av({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  BOOST_TEST(!signature_mismatch(g, 4, m).has_value());
  m[1].counts_in[2] = 9;  // rank 5 (member 1) sends 9 bytes to rank 7, which expects 5
  auto err = signature_mismatch(g, 4, m);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(err->kind() == "comm_mismatch");
  BOOST_TEST(std::string(err->what()) ==
             "all_to_all_v counts disagree on group 3 seq 4: rank 5 sends 9 bytes to rank 7, "
             "which expects 5");
  BOOST_TEST(err->group() == 3);
  BOOST_TEST(err->seq() == 4);
  BOOST_TEST(err->ranks() == (std::vector<int>{5, 7}));
  // Another kind on any member is the mismatch reported, before the counts.
  m[2] = barrier();
  err = signature_mismatch(g, 4, m);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(std::string(err->what()) ==
             "collective mismatch on group 3 seq 4: rank 2 launched all_to_all_v but rank 7 "
             "launched barrier");
}

BOOST_AUTO_TEST_SUITE_END()
