// The run's trace (SPEC 9.3): typed events, each written as one line in schedule order;
// the lines are RunResult::trace and their FNV-1a 64 is the trace hash (cluster.hpp), hashed
// as each line is made, so a run that keeps no lines (Options::keep_trace) has the same hash.
// chrome_trace.cpp reads these lines back: a new event or field is a change there too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpref/op_signature.hpp"

namespace hpref::sim::detail {

// The trace hash (cluster.hpp's trace_hash) of no lines, and with one more line.
inline constexpr std::uint64_t kTraceHashStart = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset
std::uint64_t fold_trace_line(std::uint64_t h, std::string_view line) noexcept;

class Trace {
 public:
  explicit Trace(bool keep_lines = true) : keep_(keep_lines) {}
  // "r2 g1 s3 all_to_all_v bytes=96/64 in=[..] out=[..] sum=<checksum>"
  void launch(int rank, int group, std::int64_t seq, const OpSignature& sig, std::uint64_t sum);
  // past: the byte is past the `received` bytes and nothing was flipped.
  void flip(int rank, int group, std::int64_t seq, std::int64_t byte, bool past,
            std::uint64_t received);
  void new_group(int id, const std::vector<int>& ranks, const std::string& backend);
  void exit(int rank, bool ok, std::string_view kind);
  void died(int rank);
  void deadlock(const std::vector<int>& blocked);
  // Ranks stuck in new_group #id while others went past it.
  void skipped_new_group(int id, const std::vector<int>& blocked);
  std::vector<std::string> take() { return std::move(lines_); }
  std::uint64_t hash() const noexcept { return hash_; }
  std::uint64_t count() const noexcept { return count_; }

 private:
  void count_in(std::string_view line);  // into hash_ and count_
  void add(std::string_view line);
  void add(std::string&& line);
  bool keep_;
  std::vector<std::string> lines_;        // empty unless keep_
  std::uint64_t hash_ = kTraceHashStart;  // trace_hash of the lines so far
  std::uint64_t count_ = 0;
  std::string scratch_;  // launch() builds its line here
};

}  // namespace hpref::sim::detail
