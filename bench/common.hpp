// The harness every C++ benchmark in bench/ shares: flags with --help, the data pattern
// (the scenarios' seeded byte generator), the iteration schedule both sides of a
// comparison run, and nccl-tests' rows and footer, whose exit status is 1 when any
// received byte was wrong.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace hpref {
class Communicator;
}

namespace hpref::bench {

// A flag: a number (digits, optional K, M or G suffix), rank counts ("2,4,8") or a switch.
struct Flag {
  const char* name;  // and what the value looks like: "--max-bytes N"
  const char* help;
  std::variant<std::size_t*, std::vector<int>*, bool*> value;
};
// Sets the flags from argv; --help prints the usage (exit 0), an unknown flag or a bad
// value one line naming it (exit 2). With google_benchmark, its flags are taken out first
// and --help lists them too.
void parse(int* argc, char** argv, const std::string& summary, const std::vector<Flag>& flags,
           bool google_benchmark = false);

// The data every program sends and checks: hpref::scenarios::data_byte with seed 1, so any slice
// is regenerable from (stream, index); the stream is the sending rank or a tensor's index.
std::uint8_t pattern_byte(std::uint64_t stream, std::uint64_t index) noexcept;
void fill_pattern(std::span<std::uint8_t> out, std::uint64_t stream, std::uint64_t first = 0);
// How many bytes of `got` differ from the pattern of `stream` from index `first` on.
long long count_wrong(std::span<const std::uint8_t> got, std::uint64_t stream,
                      std::uint64_t first = 0);

// An all-to-all of `total` bytes per rank in equal blocks: rank r sends bytes
// [p * chunk, (p + 1) * chunk) of its stream r to rank p.
struct AllToAll {
  AllToAll(std::size_t total, int rank, int ranks);
  long long wrong() const;  // this rank's wrong received bytes
  std::size_t rank, chunk;
  std::vector<std::uint8_t> send, recv;
  std::vector<std::size_t> sizes;  // chunk per peer; as MPI's int counts and displacements:
  std::vector<int> counts, displs;
};

// How many operations every side of a comparison times: `warmup` untimed, then
// iterations(bytes), on one clock; both sides take the same --iters.
struct Schedule {
  std::size_t warmup = 3;
  std::array<std::size_t, 3> by_size = {50, 10, 3};  // below 1 MiB, below 16 MiB, from 16 MiB
  std::size_t iters = 0;                             // --iters: all sizes (0: by_size)
  Flag flag();
  std::size_t iterations(std::size_t bytes) const;
  // Warm-up, barrier, the timed operations, barrier: microseconds per operation on the
  // calling rank's steady clock (nccl-tests time inside their ranks the same way).
  double time_us(std::size_t bytes, const std::function<void()>& op,
                 const std::function<void()>& barrier) const;
  // The same on a simulated cluster (every rank calls it): from the first rank to leave the
  // first barrier to the first rank to leave the second, on the clock all processes share.
  // Rank 0's own window also held whatever ranks scheduled before it ran after the second
  // barrier (checking their data, exiting): ~1.8 ms per rank at 4 MiB on 4 ranks.
  double time_us_cluster(std::size_t bytes, const std::function<void()>& op, Communicator& c) const;
};

struct Side {  // one measured side of a row
  double us = 0;
  long long wrong = 0;
};

// Runs `rank_fn` on a fresh simulated cluster of n ranks (seed 1), with a segment of at
// least `segment_bytes`: rank 0's time and every rank's wrong values summed (-1: the run
// failed, why on stderr).
Side simulate(int n, std::size_t segment_bytes, const std::function<Side(Communicator&)>& rank_fn);

// nccl-tests' table: size (B), count, type, then per side time (us), algbw, busbw (GB/s)
// and #wrong, then the program's own columns (its ratio to the peer or limit); and the
// footer "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth : X" per side.
class Report {
 public:
  explicit Report(std::vector<std::string> sides = {}, std::vector<std::string> extra = {});
  void header(const std::string& title) const;
  // busbw = algbw * bus_factor (nccl-tests: (n - 1) / n for all-to-all and all-gather).
  void row(std::size_t bytes, std::size_t count, const char* type, double bus_factor,
           const std::vector<Side>& sides, const std::vector<std::string>& extra = {});
  void add_wrong(long long n) { wrong_ += n; }  // wrong values outside the rows (a peer's)
  int footer() const;                           // prints the footer; returns status()
  int status() const { return wrong_ ? 1 : 0; }

 private:
  std::vector<std::string> sides_, extra_;
  std::vector<double> busbw_sum_;
  long long wrong_ = 0;
  int rows_ = 0;
};

// A Google Benchmark program's main: parse, the runs, then `after` (its ratio table, given
// each run's time per iteration by name, in the benchmark's unit, or by "seconds:" + name
// in seconds, NaN if it did not run; it returns the wrong values it found) and the footer.
// Returns the exit status.
using Times = std::function<double(const std::string&)>;
int run_google_benchmark(int argc, char** argv, const std::string& summary,
                         const std::function<long long(const Times&)>& after);

}  // namespace hpref::bench
