// Trace events as lines (see trace.hpp).
#include "trace.hpp"

#include <cinttypes>
#include <cstdio>
#include <numeric>
#include <span>

#include "hpref/sim/cluster.hpp"

namespace hpref::sim::detail {
namespace {

std::string counts_text(const std::vector<std::uint64_t>& counts) {
  return rank_list_text(std::vector<int>(counts.begin(), counts.end()));
}

}  // namespace

void Trace::launch(int rank, int group, std::int64_t seq, const OpSignature& sig,
                   std::uint64_t sum) {
  std::uint64_t out_bytes =
      std::accumulate(sig.counts_out.begin(), sig.counts_out.end(), std::uint64_t{0});
  std::string line = "r" + std::to_string(rank) + " g" + std::to_string(group) + " s" +
                     std::to_string(seq) + " " + op_kind_name(sig.kind) +
                     " bytes=" + std::to_string(sig.bytes) + "/" + std::to_string(out_bytes);
  if (sig.kind == OpKind::broadcast) line += " root=" + std::to_string(sig.root);
  if (sig.kind == OpKind::all_reduce) {
    line += " op=" + std::to_string(static_cast<int>(sig.op)) +
            " dtype=" + std::to_string(static_cast<int>(sig.dtype));
  }
  if (sig.kind == OpKind::all_to_all_v) {
    line += " in=" + counts_text(sig.counts_in) + " out=" + counts_text(sig.counts_out);
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, sum);
  lines_.push_back(line + " sum=" + hex);
}

void Trace::flip(int rank, int group, std::int64_t seq, std::int64_t byte, bool past,
                 std::uint64_t received) {
  std::string line = "r" + std::to_string(rank) + " flip byte " + std::to_string(byte) + " of g" +
                     std::to_string(group) + " s" + std::to_string(seq);
  if (past) line += " not applied: past the " + std::to_string(received) + " received bytes";
  lines_.push_back(std::move(line));
}

void Trace::new_group(int id, const std::vector<int>& ranks, const std::string& backend) {
  lines_.push_back("new_group " + std::to_string(id) + " ranks=" + rank_list_text(ranks) +
                   " backend=" + backend);
}

void Trace::exit(int rank, bool ok, std::string_view kind) {
  std::string how = ok ? " exit ok" : " exit error " + std::string(kind);
  lines_.push_back("r" + std::to_string(rank) + how);
}

void Trace::died(int rank) { lines_.push_back("r" + std::to_string(rank) + " died"); }

void Trace::deadlock(const std::vector<int>& blocked) {
  lines_.push_back("deadlock " + rank_list_text(blocked));
}

void Trace::skipped_new_group(int id, const std::vector<int>& blocked) {
  lines_.push_back("mismatch new_group #" + std::to_string(id) + " " + rank_list_text(blocked));
}

}  // namespace hpref::sim::detail

namespace hpref::sim {

std::uint64_t trace_hash(std::span<const std::string> lines) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const std::string& line : lines) {
    h = fnv1a64(line.data(), line.size(), h);
    h = fnv1a64("\n", 1, h);
  }
  return h;
}

}  // namespace hpref::sim
