// The scenarios of tests/sim under mpirun, over hpref::mpi (label mpi). Each rank prints
// one line per run in the simulator's form ("<scenario> seed=<S> rank <R>: ok <value>"),
// so that run_scenarios.sh can compare every value with `hpref sim run` of the same seed.
//
//   hpref_mpi_scenarios --normal [--seeds A:B] [--checked] [--max-count N]
//   hpref_mpi_scenarios --broken NAME [--timeout-ms T]     (checked mode, short deadline)
//   hpref_mpi_scenarios --broken NAME --unchecked         (MPI's own error: CommError, no crash)
//   hpref_mpi_scenarios --large                           (counts beyond INT_MAX, 2 ranks)
//   hpref_mpi_scenarios --mutations                       (checked mode: every send buffer)
//   hpref_mpi_scenarios --list-broken
//   hpref_mpi_scenarios --list-normal N [--seeds A:B]      (what --normal runs on N ranks)
//   hpref_mpi_scenarios --twice                           (two MpiCommunicators in turn)
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "hpref/mpi/communicator.hpp"
#include "hpref/scenarios/harness.hpp"

namespace {

namespace sc = hpref::scenarios;
using sc::Expect;
using sc::Scenario;

struct Args {
  bool normal = false, large = false, mutations = false, list_broken = false, checked = false;
  bool unchecked = false;  // --broken without checked mode: MPI's own error must come back
  bool twice = false;
  int list_normal = 0;  // --list-normal N: the runs --normal makes on N ranks (no MPI)
  std::string broken;
  std::string stdout_dir;  // each rank's stdout to DIR/rank.N (not through mpirun)
  std::uint64_t first_seed = 1, last_seed = 3;
  std::int64_t timeout_ms = 120000;
  std::size_t max_count = INT_MAX;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "hpref_mpi_scenarios: %s\n"
               "usage: hpref_mpi_scenarios --normal [--seeds A:B] [--checked] [--max-count N] "
               "[--timeout-ms T]\n"
               "       hpref_mpi_scenarios --broken NAME [--unchecked] [--timeout-ms T]\n"
               "       hpref_mpi_scenarios --large | --mutations | --list-broken | --twice\n"
               "       hpref_mpi_scenarios --list-normal N [--seeds A:B]\n"
               "each also takes --stdout-to DIR: this rank's output to DIR/rank.N\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--normal") {
        a.normal = true;
      } else if (arg == "--large") {
        a.large = true;
      } else if (arg == "--mutations") {
        a.mutations = true;
      } else if (arg == "--list-broken") {
        a.list_broken = true;
      } else if (arg == "--list-normal") {
        std::string v = value();
        a.list_normal = std::stoi(v);
        if (a.list_normal < 1) usage("--list-normal takes a rank count >= 1, got " + v);
      } else if (arg == "--checked") {
        a.checked = true;
      } else if (arg == "--unchecked") {
        a.unchecked = true;
      } else if (arg == "--twice") {
        a.twice = true;
      } else if (arg == "--broken") {
        a.broken = value();
      } else if (arg == "--seeds") {
        std::string v = value();
        auto colon = v.find(':');
        if (colon == std::string::npos) usage("--seeds takes A:B, got " + v);
        a.first_seed = std::stoull(v.substr(0, colon));
        a.last_seed = std::stoull(v.substr(colon + 1));
      } else if (arg == "--timeout-ms") {
        a.timeout_ms = std::stoll(value());
      } else if (arg == "--max-count") {
        a.max_count = std::stoull(value());
      } else if (arg == "--stdout-to") {
        a.stdout_dir = value();
      } else {
        usage("unknown argument " + arg);
      }
    } catch (const std::logic_error&) {
      usage("bad number after " + arg);
    }
  }
  return a;
}

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// Runs one scenario on a fresh MPI world; prints this rank's outcome; returns the error
// kind ("" when it returned). A timed-out communicator ends the job here.
std::string run(const Scenario& s, std::uint64_t seed, const sc::WorldOptions& options) {
  auto world = sc::open_world("mpi", options);
  hpref::Communicator& comm = *world->local()[0];
  sc::RankResult r = sc::run_world(*world, [&](hpref::Communicator& c) {
    sc::ScenarioContext ctx{seed, c.size()};
    if (options.max_count != 0 && options.max_count < 4096)
      ctx.large_bytes = 64 * options.max_count;
    return s.fn(c, ctx);
  })[0];
  std::printf("%s seed=%llu rank %d: %s\n", s.name.c_str(), static_cast<unsigned long long>(seed),
              comm.rank(),
              (r.ok ? "ok " + r.value : "error " + r.kind + ": " + one_line(r.message)).c_str());
  std::fflush(stdout);
  world->end_if_failed(5);
  return r.kind;
}

bool matches(Expect expect, const std::string& kind) {
  if (expect == Expect::mismatch) return kind == "comm_mismatch";
  if (expect == Expect::timeout) return kind == "comm_timeout";
  return !kind.empty() && kind != "comm_timeout";  // check failed: any other refusal
}

// Counts beyond INT_MAX on 2 ranks with the real limit: a broadcast, an all-gather and an
// all-to-all-v block of 2^31 + 7 bytes, each checked at both ends.
int large(int rank, int size) {
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "--large runs on exactly 2 ranks\n");
    return 2;
  }
  hpref::mpi::MpiCommunicator comm;
  const std::size_t big = (std::size_t{1} << 31) + 7;
  auto pattern = [](std::size_t i, int salt) {
    return static_cast<char>((i * 131 + static_cast<std::size_t>(salt)) >> 3);
  };
  int failures = 0;
  auto verify = [&](const char* what, const char* data, std::size_t bytes, int salt) {
    for (std::size_t i = 0; i < bytes; i += 4093) {
      if (data[i] != pattern(i, salt)) {
        std::printf("large rank %d: %s byte %zu differs\n", rank, what, i);
        ++failures;
        return;
      }
    }
    if (bytes && data[bytes - 1] != pattern(bytes - 1, salt)) {
      std::printf("large rank %d: %s last byte differs\n", rank, what);
      ++failures;
    }
  };
  {
    std::vector<char> buffer(big);
    if (rank == 0) {
      for (std::size_t i = 0; i < big; ++i) buffer[i] = pattern(i, 1);
    }
    comm.broadcast(comm.world(), {buffer.data(), big}, 0).wait();
    verify("broadcast", buffer.data(), big, 1);
  }
  {
    std::size_t each = (std::size_t{1} << 30) + 5;  // 2 x each > INT_MAX
    std::vector<char> in(each), out(2 * each);
    for (std::size_t i = 0; i < each; ++i) in[i] = pattern(i, 10 + rank);
    comm.all_gather(comm.world(), {in.data(), each}, {out.data(), out.size()}).wait();
    in.clear();
    in.shrink_to_fit();
    verify("all_gather member 0", out.data(), each, 10);
    verify("all_gather member 1", out.data() + each, each, 11);
  }
  {
    // Rank 0 sends 2^31 + 7 bytes to rank 1 after 3 bytes to itself.
    std::vector<std::size_t> in_counts =
        rank == 0 ? std::vector<std::size_t>{3, big} : std::vector<std::size_t>{0, 0};
    std::vector<std::size_t> out_counts =
        rank == 0 ? std::vector<std::size_t>{3, 0} : std::vector<std::size_t>{big, 0};
    std::vector<char> in(rank == 0 ? 3 + big : 0), out(rank == 0 ? 3 : big);
    if (rank == 0) {
      in[0] = 'a', in[1] = 'b', in[2] = 'c';
      for (std::size_t i = 0; i < big; ++i) in[3 + i] = pattern(i, 20);
    }
    comm.all_to_all_v(comm.world(), {in.data(), in.size()}, in_counts, {out.data(), out.size()},
                      out_counts)
        .wait();
    if (rank == 0 && std::memcmp(out.data(), "abc", 3) != 0) {
      std::printf("large rank 0: all_to_all_v self block differs\n");
      ++failures;
    }
    if (rank == 1) verify("all_to_all_v", out.data(), big, 20);
  }
  std::printf("large rank %d: %s\n", rank, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

// Checked mode checksums every send buffer (the core's, for every backend): each rank
// changes its send buffer between launch and wait, and wait() must raise
// comm_buffer_mutated there, twice (the error is kept); a broadcast's non-roots change
// nothing and get no error. The same calls unchanged must pass and reduce correctly.
int mutations(int rank, int size) {
  hpref::mpi::Options options;
  options.checked = true;
  hpref::mpi::MpiCommunicator comm(options);
  hpref::Group world = comm.world();
  auto n = static_cast<std::size_t>(size);
  int failures = 0;
  auto expect = [&](const std::string& what, bool mutate, std::vector<char>& send, auto launch) {
    hpref::Work work = launch();
    if (mutate) send[0] = static_cast<char>(send[0] ^ 1);
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string got = "no error";
      try {
        work.wait();
      } catch (const hpref::Error& e) {
        got = std::string(e.kind());
      }
      std::string want = mutate ? "comm_buffer_mutated" : "no error";
      if (got != want) {
        std::printf("mutations rank %d: %s wait %d: expected %s, got %s\n", rank, what.c_str(),
                    attempt + 1, want.c_str(), got.c_str());
        ++failures;
      }
    }
  };
  for (bool mutate : {true, false}) {
    std::string tag = mutate ? " (changed)" : " (unchanged)";
    std::vector<char> in(8, 1), out(8 * n);
    expect("all_gather" + tag, mutate, in, [&] {
      return comm.all_gather(world, {in.data(), 8}, {out.data(), out.size()});
    });
    std::vector<char> buffer(8, 2);
    expect("broadcast" + tag, mutate && rank == 0, buffer, [&] {
      return comm.broadcast(world, {buffer.data(), 8}, 0);
    });
    for (hpref::DType dtype : {hpref::DType::int64, hpref::DType::float64}) {
      std::vector<char> values(16, 0);
      values[0] = 3;  // int64 3, float64 3 x 2^-1074: both sum to 3 x size in the low byte
      expect(std::string("all_reduce ") + std::string(hpref::dtype_name(dtype)) + tag, mutate,
             values, [&] {
               return comm.all_reduce(world, {values.data(), values.size()}, dtype,
                                      hpref::ReduceOp::sum);
             });
      if (!mutate && values[0] != 3 * size) {
        std::printf("mutations rank %d: all_reduce %s: the sum of 3s is %d\n", rank,
                    std::string(hpref::dtype_name(dtype)).c_str(), values[0]);
        ++failures;
      }
    }
    std::vector<std::size_t> ones(n, 1);
    std::vector<char> a2a_in(n, 4), a2a_out(n);
    expect("all_to_all_v" + tag, mutate, a2a_in, [&] {
      return comm.all_to_all_v(world, {a2a_in.data(), n}, ones, {a2a_out.data(), n}, ones);
    });
  }
  std::printf("mutations rank %d: %s\n", rank, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

}  // namespace

// A second MpiCommunicator after the first one, which initialized MPI, finalized it: a
// CommError comm_usage saying why (MPI_Comm_rank after MPI_Finalize aborted the job).
int twice() {
  { hpref::mpi::MpiCommunicator first; }
  try {
    hpref::mpi::MpiCommunicator second;
    std::printf("twice: a second communicator opened after MPI_Finalize\n");
    return 1;
  } catch (const hpref::CommError& e) {
    std::printf("twice: %s: %s\n", std::string(hpref::errc_name(e.code())).c_str(), e.what());
    return e.code() == hpref::Errc::comm_usage ? 0 : 1;
  }
}

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.twice) return twice();  // before MPI_Init: the communicator initializes MPI itself
  if (a.list_normal > 0) {      // no MPI: run_scenarios.sh checks that each of these printed
    for (const Scenario* s :
         sc::select({.kind = sc::BackendKind::device, .ranks = a.list_normal})) {
      for (std::uint64_t seed = a.first_seed; seed <= a.last_seed; ++seed)
        std::printf("%s seed=%llu\n", s->name.c_str(), static_cast<unsigned long long>(seed));
    }
    return 0;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Written by the rank itself: mpirun's forwarded stdout can cut one rank's line with
  // another's, and can lose what a rank wrote just before it exited.
  if (!a.stdout_dir.empty()) {
    std::string path = a.stdout_dir + "/rank." + std::to_string(rank);
    if (!std::freopen(path.c_str(), "w", stdout)) usage("cannot write " + path);
  }
  int status = 0;
  sc::WorldOptions options;
  options.timeout_ms = a.timeout_ms;
  if (a.list_broken) {
    for (const Scenario* s : sc::select({.kind = sc::BackendKind::device, .broken = true})) {
      if (rank == 0) {
        std::printf("%s %d %s\n", s->name.c_str(), s->min_ranks,
                    std::string(expect_name(s->on_device)).c_str());
      }
    }
  } else if (a.large) {
    status = large(rank, size);
  } else if (a.mutations) {
    status = mutations(rank, size);
  } else if (a.normal) {
    options.checked = a.checked;
    options.max_count = a.max_count;
    for (const Scenario* s : sc::select({.kind = sc::BackendKind::device, .ranks = size})) {
      for (std::uint64_t seed = a.first_seed; seed <= a.last_seed; ++seed) {
        if (!run(*s, seed, options).empty()) status = 1;
      }
    }
  } else if (!a.broken.empty()) {
    const Scenario* s = sc::find_scenario(a.broken);
    if (!s || s->on_device == Expect::none)
      usage("no broken scenario '" + a.broken + "' runs under MPI (--list-broken)");
    options.checked = !a.unchecked;
    options.max_count = a.max_count;
    std::string kind = run(*s, 1, options);
    // Ranks that are not the broken one may finish: only a wrong refusal fails this rank.
    // Unchecked, what MPI itself finds (a truncated message) is a comm_backend CommError
    // (or a timeout on a rank whose peer went on), never MPI's fatal handler.
    bool ok = kind.empty() || (a.unchecked ? kind == "comm_backend" || kind == "comm_timeout"
                                           : matches(s->on_device, kind));
    std::printf("%s rank %d: expected %s, %s\n", s->name.c_str(), rank,
                a.unchecked ? "an MPI error" : std::string(expect_name(s->on_device)).c_str(),
                kind.empty() ? "returned" : (ok ? "got it" : ("got " + kind + " instead").c_str()));
    status = ok ? 0 : 1;
  } else {
    usage("say --normal, --broken NAME, --large, --mutations or --list-broken");
  }
  std::fflush(stdout);
  MPI_Finalize();
  return status;
}
