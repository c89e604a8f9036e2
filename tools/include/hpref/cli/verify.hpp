// `hpref verify LOGDIR`: the post-mortem of a job run in checked mode with
// HPREF_CHECKED_LOG=LOGDIR (python/hpref/_checked.py writes one JSON line per operation
// per rank to LOGDIR/rank<R>.jsonl). It lines up the ranks' operations per run (the k-th
// default process group of a job that makes it again), group and sequence number and reports the
// first divergence in the words of the checked mode itself (hpref/op_signature.hpp:
// signature_mismatch), or a rank missing an operation the others logged; with --routes it also
// checks every all_to_all_v's per-pair byte counts against the SPEC 7 routes of the given
// boundaries. Exit codes: 0 everything agrees, 1 a divergence or a route difference, 2 bad usage or
// a malformed log (named by file and line).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace hpref::cli {

struct VerifyArgs {
  std::string dir;
  std::string routes;  // "", "window" or "prefix"
  std::string boundaries;
  std::int64_t local_length = 0;
  std::int64_t window = 0;
  std::int64_t ratio = 0;
  std::int64_t row_bytes = 0;
  // Whether each of the four was given at all (0 is a value they can be given, and refused).
  bool has_local_length = false, has_window = false, has_ratio = false, has_row_bytes = false;
  std::vector<std::int64_t> runs;    // --run: only these runs' all_to_all_v (default all)
  std::vector<std::int64_t> groups;  // --group: only these groups' all_to_all_v (default all)
  std::vector<std::int64_t> seqs;    // --seq: only these sequence numbers (default all)
  bool json = false;
  std::uint64_t max_line_bytes = std::uint64_t{1} << 20;
  std::uint64_t max_records = std::uint64_t{1} << 22;
  std::uint64_t max_log_bytes = std::uint64_t{1} << 30;
};

CLI::App* add_verify_command(CLI::App& app, VerifyArgs& args);
// Writes the one-line summary, the divergence or the JSON object to `out`; returns the
// exit code. Usage errors and malformed logs throw hpref::Error (or, with --json, are
// printed as {"ok": false, "failure": "usage", ...} and return 2).
int run_verify(const VerifyArgs& args, std::ostream& out);

}  // namespace hpref::cli
