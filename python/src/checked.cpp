// hpref._core: the checked mode of SPEC 9.2 for Python communicators (issue 13). The
// operation signatures, their fixed-size wire form and the mismatch messages are the C++
// backends' own (hpref/op_signature.hpp): hpref.torch's checked process groups all-gather
// the bytes op_signature makes and check_signatures raises the same comm_mismatch the MPI
// and NCCL backends raise. buffer_checksum is the send-buffer checksum of SPEC 9.3;
// copy_pieces and first_different_piece stage hpref._torch_pg's list operands.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/communicator.hpp"
#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"

namespace hpref::py {
namespace {

OpKind kind_of(const std::string& name) {
  for (auto k : {OpKind::all_gather, OpKind::broadcast, OpKind::all_reduce, OpKind::all_to_all_v,
                 OpKind::barrier}) {
    if (name == op_kind_name(k)) return k;
  }
  throw Error(Errc::invalid_argument,
              "op_signature kind '" + name +
                  "' is not all_gather, broadcast, all_reduce, all_to_all_v or barrier");
}

void pieces_agree(const char* what, const std::vector<std::uintptr_t>& a,
                  const std::vector<std::uintptr_t>& b, const std::vector<std::size_t>& counts) {
  if (a.size() != counts.size() || b.size() != counts.size()) {
    throw Error(Errc::invalid_argument, std::string(what) + ": " + std::to_string(a.size()) +
                                            " and " + std::to_string(b.size()) + " addresses for " +
                                            std::to_string(counts.size()) + " counts");
  }
}

ReduceOp op_of(const std::string& name) {
  for (auto o : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
    if (name == reduce_op_name(o)) return o;
  }
  throw Error(Errc::invalid_argument,
              "op_signature reduce op '" + name + "' is not sum, min or max");
}

DType dtype_of(const std::string& name) {
  auto d = dtype_from_bare_name(name);
  if (!d)
    throw Error(Errc::unsupported_dtype,
                "op_signature dtype '" + name + "' is not a SPEC 1.3 dtype");
  return *d;
}

int member_count(std::size_t members) {
  if (members == 0 || members > (1u << 20)) {
    throw Error(Errc::invalid_argument,
                "a checked group has 1 to 2^20 members, got " + std::to_string(members));
  }
  return static_cast<int>(members);
}

nb::bytes signature_bytes(const OpSignature& s, int members) {
  std::string out(signature_wire_bytes(members), '\0');
  write_signature(s, members, reinterpret_cast<std::uint8_t*>(out.data()));
  return nb::bytes(out.data(), out.size());
}

}  // namespace

void bind_checked(nb::module_& m) {
  m.def(
      "op_signature",
      [](const std::string& kind, std::size_t members, int root, const std::string& op,
         const std::string& dtype, std::uint64_t bytes, const std::vector<std::uint64_t>& counts_in,
         const std::vector<std::uint64_t>& counts_out) {
        int n = member_count(members);
        OpSignature s;
        s.kind = kind_of(kind);
        s.root = root;
        s.op = op_of(op);
        s.dtype = dtype_of(dtype);
        s.bytes = bytes;
        if (s.kind == OpKind::all_to_all_v &&
            (counts_in.size() != members || counts_out.size() != members)) {
          throw Error(Errc::invalid_argument,
                      "all_to_all_v's signature takes " + std::to_string(members) +
                          " counts each way, got " + std::to_string(counts_in.size()) + " and " +
                          std::to_string(counts_out.size()));
        }
        s.counts_in = counts_in;
        s.counts_out = counts_out;
        return signature_bytes(s, n);
      },
      nb::arg("kind"), nb::arg("members"), nb::arg("root") = -1, nb::arg("op") = "sum",
      nb::arg("dtype") = "uint8", nb::arg("bytes") = 0,
      nb::arg("counts_in") = std::vector<std::uint64_t>{},
      nb::arg("counts_out") = std::vector<std::uint64_t>{},
      "The SPEC 9.2 signature of one operation on a group of `members` ranks in the fixed-size "
      "wire "
      "form the C++ checked mode all-gathers (hpref::write_signature): kind (all_gather, "
      "broadcast, "
      "all_reduce, all_to_all_v, barrier), root (a world rank, broadcast), reduce op and dtype "
      "(all_reduce), bytes (per member for all_gather; the buffer otherwise; all_to_all_v: bytes "
      "sent), "
      "and for all_to_all_v the bytes to and from each member.");

  m.def(
      "signature_bytes",
      [](std::size_t members) { return signature_wire_bytes(member_count(members)); },
      nb::arg("members"), "The size of one signature on a group of `members` ranks.");

  m.def(
      "signature_text",
      [](nb::bytes sig, std::size_t members) {
        int n = member_count(members);
        if (sig.size() != signature_wire_bytes(n)) {
          throw CommError(Errc::comm_mismatch, "a signature of " + std::to_string(sig.size()) +
                                                   " bytes is not one of a " + std::to_string(n) +
                                                   "-member group");
        }
        return read_signature(reinterpret_cast<const std::uint8_t*>(sig.c_str()), n).str();
      },
      nb::arg("signature"), nb::arg("members"),
      "A signature as the C++ messages print it (\"all_reduce(sum, int64, 8 bytes)\").");

  m.def(
      "check_signatures",
      [](nb::bytes gathered, int group_id, const std::vector<int>& ranks, std::int64_t seq) {
        int n = member_count(ranks.size());
        std::size_t one = signature_wire_bytes(n);
        if (gathered.size() != one * ranks.size()) {
          throw CommError(Errc::comm_mismatch,
                          "checked mode gathered " + std::to_string(gathered.size()) +
                              " signature bytes on group " + std::to_string(group_id) +
                              ", expected " + std::to_string(one * ranks.size()),
                          group_id, seq);
        }
        const auto* p = reinterpret_cast<const std::uint8_t*>(gathered.c_str());
        std::vector<OpSignature> members;
        members.reserve(ranks.size());
        for (std::size_t i = 0; i < ranks.size(); ++i)
          members.push_back(read_signature(p + i * one, n));
        // The message names world ranks: a Group whose ranks are the members' world ranks,
        // seen from its first member (signature_mismatch reads only id and ranks).
        Group group(group_id, ranks, "checked", ranks.front());
        if (auto error = signature_mismatch(group, seq, members)) throw *error;
      },
      nb::arg("gathered"), nb::arg("group_id"), nb::arg("ranks"), nb::arg("seq"),
      "Raises hpref.CommMismatch with the C++ checked mode's message when the members' signatures "
      "(`gathered`: each member's op_signature bytes, in group order) disagree: another call "
      "(\"rank 0 launched barrier but rank 1 launched all_reduce(...)\") or, for all_to_all_v, the "
      "first pair i -> j whose counts differ (\"rank 1 sends 96 bytes to rank 3, which expects "
      "64\"); "
      "`ranks` are the members' world ranks, named in the message with `group_id` and `seq`.");

  m.def(
      "check_new_group",
      [](int group_id, std::int64_t seq, std::size_t members, int rank_a,
         const std::optional<std::vector<int>>& asked_a, const std::string& backend_a,
         nb::bytes sig_a, int rank_b, const std::optional<std::vector<int>>& asked_b,
         const std::string& backend_b, nb::bytes sig_b) {
        int n = member_count(members);
        auto launch = [n](const std::optional<std::vector<int>>& asked, const std::string& backend,
                          nb::bytes sig) {
          Launch l;
          if (asked) {
            l.new_group = true;
            l.members = *asked;
            l.backend = backend;
          } else if (sig.size() == signature_wire_bytes(n)) {
            l.op = read_signature(reinterpret_cast<const std::uint8_t*>(sig.c_str()), n);
          } else {
            throw CommError(Errc::comm_mismatch, "a signature of " + std::to_string(sig.size()) +
                                                     " bytes is not one of a " + std::to_string(n) +
                                                     "-member group");
          }
          return l;
        };
        if (auto error =
                new_group_mismatch(group_id, seq, rank_a, launch(asked_a, backend_a, sig_a), rank_b,
                                   launch(asked_b, backend_b, sig_b))) {
          throw *error;
        }
      },
      nb::arg("group_id"), nb::arg("seq"), nb::arg("members"), nb::arg("rank_a"),
      nb::arg("asked_a").none(), nb::arg("backend_a"), nb::arg("signature_a"), nb::arg("rank_b"),
      nb::arg("asked_b").none(), nb::arg("backend_b"), nb::arg("signature_b"),
      "Raises hpref.CommMismatch with the C++ message (hpref::new_group_mismatch) when two "
      "members' "
      "launches on a group of `members` ranks differ and either is a new_group: each side is a "
      "new_group request (`asked`: the sorted world ranks, `backend`) or, with `asked` None, the "
      "operation whose op_signature bytes are `signature` (\"collective mismatch on group 0 seq 4: "
      "rank 0 launched new_group([0, 1] on gloo) but rank 3 launched all_to_all_v\", \"new_group "
      "mismatch on group 0 seq 1: rank 0 asked for [0, 1] on gloo but rank 3 asked for [2, 3] on "
      "gloo\"). Returns when both ask for the same group, or neither is a new_group.");

  m.def(
      "buffer_checksum",
      [](std::uintptr_t address, std::size_t nbytes) {
        return buffer_checksum(reinterpret_cast<const void*>(address), nbytes);
      },
      nb::arg("address"), nb::arg("nbytes"), nb::call_guard<nb::gil_scoped_release>(),
      "hpref::buffer_checksum (four lanes of sums, sums of sums and products of 64-bit words, "
      "folded with splitmix64's finalizer; ~48 GB/s on one core with AVX2, ~13 without) "
      "of `nbytes` bytes of host memory at `address`: the send-buffer checksum compared at wait() "
      "(SPEC 9.3). The GIL is released while it reads. The caller keeps the memory alive.");

  // hpref._torch_pg's staging of list operands on the host: a list of separate tensors is
  // gathered into, or scattered out of, the one buffer the communicator takes, a memcpy a
  // piece in one call (a torch copy_ a piece costs ~6 us of dispatch for a few bytes).
  m.def(
      "copy_pieces",
      [](const std::vector<std::uintptr_t>& to, const std::vector<std::uintptr_t>& from,
         const std::vector<std::size_t>& counts) {
        pieces_agree("copy_pieces", to, from, counts);
        nb::gil_scoped_release release;
        for (std::size_t i = 0; i < counts.size(); ++i) {
          if (counts[i] != 0) {
            std::memcpy(reinterpret_cast<void*>(to[i]), reinterpret_cast<const void*>(from[i]),
                        counts[i]);
          }
        }
      },
      nb::arg("to"), nb::arg("from_"), nb::arg("counts"),
      "Copies counts[i] bytes of host memory from address from_[i] to address to[i], for each i "
      "(pieces must not overlap). The GIL is released while it copies. The caller keeps the "
      "memory alive.");
  m.def(
      "first_different_piece",
      [](const std::vector<std::uintptr_t>& a, const std::vector<std::uintptr_t>& b,
         const std::vector<std::size_t>& counts) -> std::int64_t {
        pieces_agree("first_different_piece", a, b, counts);
        nb::gil_scoped_release release;
        for (std::size_t i = 0; i < counts.size(); ++i) {
          if (counts[i] != 0 && std::memcmp(reinterpret_cast<const void*>(a[i]),
                                            reinterpret_cast<const void*>(b[i]), counts[i]) != 0) {
            return static_cast<std::int64_t>(i);
          }
        }
        return -1;
      },
      nb::arg("a"), nb::arg("b"), nb::arg("counts"),
      "The first i whose counts[i] bytes of host memory at a[i] and b[i] differ, or -1: the "
      "send-buffer check of staged list pieces at wait() (SPEC 9.3). The GIL is released while "
      "it reads.");
}

}  // namespace hpref::py
