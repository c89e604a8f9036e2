// Trace events as lines (see trace.hpp).
#include "trace.hpp"

#include <charconv>
#include <numeric>
#include <span>

#include "hpref/sim/cluster.hpp"

namespace hpref::sim::detail {
namespace {

// Appends the decimal text of `v` (std::to_string's digits, without its allocation).
template <typename T>
void put(std::string& out, T v) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  out.append(digits, end);
}

// rank_list_text's "[a, b, c]" of the counts as ints (the line's established form).
void put_counts(std::string& out, const std::vector<std::uint64_t>& counts) {
  out += '[';
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i) out += ", ";
    put(out, static_cast<int>(counts[i]));
  }
  out += ']';
}

}  // namespace

// One line per launch of every rank: built in place, one allocation (was ~20 temporaries
// from std::to_string and operator+, a measurable part of the monitor's turn at 8 ranks).
void Trace::launch(int rank, int group, std::int64_t seq, const OpSignature& sig,
                   std::uint64_t sum) {
  std::uint64_t out_bytes =
      std::accumulate(sig.counts_out.begin(), sig.counts_out.end(), std::uint64_t{0});
  std::string line;
  line.reserve(96 + (sig.kind == OpKind::all_to_all_v ? 24 * sig.counts_in.size() : 0));
  line += 'r';
  put(line, rank);
  line += " g";
  put(line, group);
  line += " s";
  put(line, seq);
  line += ' ';
  line += op_kind_name(sig.kind);
  line += " bytes=";
  put(line, sig.bytes);
  line += '/';
  put(line, out_bytes);
  if (sig.kind == OpKind::broadcast) {
    line += " root=";
    put(line, sig.root);
  }
  if (sig.kind == OpKind::all_reduce) {
    line += " op=";
    put(line, static_cast<int>(sig.op));
    line += " dtype=";
    put(line, static_cast<int>(sig.dtype));
  }
  if (sig.kind == OpKind::all_to_all_v) {
    line += " in=";
    put_counts(line, sig.counts_in);
    line += " out=";
    put_counts(line, sig.counts_out);
  }
  line += " sum=";
  char hex[16];  // %016x
  for (int i = 15; i >= 0; --i, sum >>= 4) hex[i] = "0123456789abcdef"[sum & 15];
  line.append(hex, sizeof hex);
  lines_.push_back(std::move(line));
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
