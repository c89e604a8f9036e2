// Trace events as lines (see trace.hpp).
#include "trace.hpp"

#include <charconv>
#include <cstring>
#include <numeric>
#include <span>

#include "hpref/sim/cluster.hpp"

namespace hpref::sim::detail {
namespace {

// Writes text at p, returning the end: the launch line is built in a buffer of known bound
// (std::string appends were ~60% of its 0.2-0.3 us).
char* put(char* p, std::string_view text) {
  std::memcpy(p, text.data(), text.size());
  return p + text.size();
}

template <typename T>
char* put_number(char* p, T v) {  // std::to_string's digits
  return std::to_chars(p, p + 24, v).ptr;
}

// rank_list_text's "[a, b, c]" of the counts as ints (the line's established form).
char* put_counts(char* p, const std::vector<std::uint64_t>& counts) {
  *p++ = '[';
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i) p = put(p, ", ");
    p = put_number(p, static_cast<int>(counts[i]));
  }
  *p++ = ']';
  return p;
}

}  // namespace

// The trace hash so far, `h`, with one more line (and its '\n').
std::uint64_t fold_trace_line(std::uint64_t h, std::string_view line) noexcept {
  return fnv1a64("\n", 1, fnv1a64(line.data(), line.size(), h));
}

void Trace::count_in(std::string_view line) {
  hash_ = fold_trace_line(hash_, line);
  ++count_;
}

void Trace::add(std::string_view line) {
  count_in(line);
  if (keep_) lines_.emplace_back(line);
}

void Trace::add(std::string&& line) {
  count_in(line);
  if (keep_) lines_.push_back(std::move(line));
}

// One line per launch of every rank, written in place and stored with one allocation (was
// ~20 temporaries from std::to_string and operator+, 0.46 us of the monitor's 0.7 us per
// launch at 8 ranks).
void Trace::launch(int rank, int group, std::int64_t seq, const OpSignature& sig,
                   std::uint64_t sum) {
  std::uint64_t out_bytes =
      std::accumulate(sig.counts_out.begin(), sig.counts_out.end(), std::uint64_t{0});
  // Fixed parts and numbers take under 200 bytes; each count at most 13 (", " and an int).
  scratch_.resize(256 + 13 * (sig.counts_in.size() + sig.counts_out.size()));
  char* p = scratch_.data();
  *p++ = 'r';
  p = put_number(p, rank);
  p = put(p, " g");
  p = put_number(p, group);
  p = put(p, " s");
  p = put_number(p, seq);
  *p++ = ' ';
  p = put(p, op_kind_name(sig.kind));
  p = put(p, " bytes=");
  p = put_number(p, sig.bytes);
  *p++ = '/';
  p = put_number(p, out_bytes);
  if (sig.kind == OpKind::broadcast) {
    p = put(p, " root=");
    p = put_number(p, sig.root);
  }
  if (sig.kind == OpKind::all_reduce) {
    p = put(p, " op=");
    p = put_number(p, static_cast<int>(sig.op));
    p = put(p, " dtype=");
    p = put_number(p, static_cast<int>(sig.dtype));
  }
  if (sig.kind == OpKind::all_to_all_v) {
    p = put(p, " in=");
    p = put_counts(p, sig.counts_in);
    p = put(p, " out=");
    p = put_counts(p, sig.counts_out);
  }
  p = put(p, " sum=");
  for (int i = 15; i >= 0; --i, sum >>= 4) p[i] = "0123456789abcdef"[sum & 15];  // %016x
  p += 16;
  add(std::string_view(scratch_.data(), static_cast<std::size_t>(p - scratch_.data())));
}

void Trace::flip(int rank, int group, std::int64_t seq, std::int64_t byte, bool past,
                 std::uint64_t received) {
  std::string line = "r" + std::to_string(rank) + " flip byte " + std::to_string(byte) + " of g" +
                     std::to_string(group) + " s" + std::to_string(seq);
  if (past) line += " not applied: past the " + std::to_string(received) + " received bytes";
  add(std::move(line));
}

void Trace::new_group(int id, const std::vector<int>& ranks, const std::string& backend) {
  add("new_group " + std::to_string(id) + " ranks=" + rank_list_text(ranks) +
      " backend=" + backend);
}

void Trace::exit(int rank, bool ok, std::string_view kind) {
  std::string how = ok ? " exit ok" : " exit error " + std::string(kind);
  add("r" + std::to_string(rank) + how);
}

void Trace::died(int rank) { add("r" + std::to_string(rank) + " died"); }

void Trace::deadlock(const std::vector<int>& blocked) {
  add("deadlock " + rank_list_text(blocked));
}

void Trace::skipped_new_group(int id, const std::vector<int>& blocked) {
  add("mismatch new_group #" + std::to_string(id) + " " + rank_list_text(blocked));
}

}  // namespace hpref::sim::detail

namespace hpref::sim {

std::uint64_t trace_hash(std::span<const std::string> lines) noexcept {
  std::uint64_t h = detail::kTraceHashStart;
  for (const std::string& line : lines) h = detail::fold_trace_line(h, line);
  return h;
}

}  // namespace hpref::sim
