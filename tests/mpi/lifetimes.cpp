// MpiCommunicator against MPI's own lifetime and threads, under mpirun -np 2 (label mpi).
// Each mode prints "ok: ..." and exits 0 (ctor_deadline_owned: the job ends with status 5),
// or names what went wrong and exits 1.
//   finalize_first  the program initialized MPI and calls MPI_Finalize before the
//                   communicator ends (Open MPI ended the job: MPI_Comm_free after finalize)
//   owner_first     communicator A initializes MPI, B is made after it, A ends first: B still
//                   works, and MPI is finalized when B ends (A's end finalized MPI under B)
//   outlives        Works still held when their communicator ends give their results at
//                   wait() (an unwaited one crashed the rank; a waited one read freed memory)
//   ctor_deadline   rank 1 never makes its communicator: rank 0's constructor raises
//                   comm_timeout within the deadline (it waited in MPI_Comm_dup for ever)
//   ctor_deadline_owned  MPI initialized by hpref: a second communicator rank 1 never makes
//                   is comm_timeout on rank 0, a third is comm_usage naming the second's
//                   failure, and the job is aborted with status 5 when rank 0 exits (MPI
//                   stayed initialized with the dup pending and nothing aborted the job);
//                   checked by expect_abort.sh. (A rank that never initializes MPI leaves the
//                   others in Open MPI's MPI_Init for ever: outside hpref's deadline.)
//   thread_single   MPI initialized with plain MPI_Init (MPI_THREAD_SINGLE): a launch or a
//                   wait on another thread is refused with comm_usage naming the level, before
//                   it changes anything; the main thread then goes on (it used to call MPI
//                   from any thread)
//   thread_serialized  MPI initialized by hpref (MPI_THREAD_SERIALIZED): a Work launched on
//                   one thread and waited on another works
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hpref/error.hpp"
#include "hpref/mpi/communicator.hpp"

using hpref::mpi::MpiCommunicator;

namespace {

int rank_of_world() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

[[noreturn]] void bad(const std::string& what) {
  std::printf("FAIL rank %d: %s\n", rank_of_world(), what.c_str());
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

int finalize_first(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  auto c = std::make_unique<MpiCommunicator>();
  c->barrier(c->world()).wait();
  MPI_Finalize();
  c.reset();
  std::printf("ok: a communicator ended after the program's MPI_Finalize\n");
  return 0;
}

int owner_first() {
  auto a = std::make_unique<MpiCommunicator>();
  auto b = std::make_unique<MpiCommunicator>();
  b->barrier(b->world()).wait();
  a.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) bad("MPI was finalized while a second communicator was alive");
  std::int64_t x = b->rank() + 1;
  b->all_reduce(b->world(), {&x, sizeof x}, hpref::DType::int64, hpref::ReduceOp::sum).wait();
  if (x != 3) bad("all_reduce after the first communicator ended gave " + std::to_string(x));
  b.reset();
  MPI_Finalized(&finalized);
  if (!finalized) bad("MPI was not finalized when hpref's last communicator ended");
  std::printf("ok: MPI finalized with the last communicator, not the first\n");
  return 0;
}

int outlives(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  std::vector<std::int64_t> ints(1 << 16);
  std::vector<double> floats(1 << 12);
  hpref::Work unwaited_int, unwaited_float, waited;
  {
    MpiCommunicator c;
    for (auto& v : ints) v = c.rank() + 1;
    for (auto& v : floats) v = 0.5 * (c.rank() + 1);
    unwaited_int = c.all_reduce(c.world(), {ints.data(), 8 * ints.size()}, hpref::DType::int64,
                                hpref::ReduceOp::sum);
    unwaited_float = c.all_reduce(c.world(), {floats.data(), 8 * floats.size()},
                                  hpref::DType::float64, hpref::ReduceOp::sum);
    waited = c.barrier(c.world());
    waited.wait();
  }
  unwaited_int.wait();
  unwaited_float.wait();
  for (auto v : ints)
    if (v != 3) bad("an int64 all_reduce waited after its communicator gave " + std::to_string(v));
  for (auto v : floats)
    if (v != 1.5)
      bad("a float64 all_reduce waited after its communicator gave " + std::to_string(v));
  unwaited_int = unwaited_float = waited = hpref::Work();
  MPI_Finalize();
  std::printf("ok: Works held past their communicator's end gave their results\n");
  return 0;
}

int ctor_deadline(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  hpref::mpi::Options options;
  options.timeout_ms = 2000;
  if (rank_of_world() == 1) options.max_count = 0;  // refused before any MPI call
  try {
    MpiCommunicator c(options);
    bad("the communicator was made without every rank");
  } catch (const hpref::Error& e) {
    std::string text = e.what();
    if (rank_of_world() == 1 && e.code() != hpref::Errc::invalid_argument)
      bad("rank 1's options: " + text);
    if (rank_of_world() == 0 &&
        (e.code() != hpref::Errc::comm_timeout || text.find("MPI_Comm_idup") == std::string::npos))
      bad("rank 0 without rank 1: " + text);
  }
  MPI_Finalize();
  std::printf("ok: a communicator some rank never makes is a timeout, not a hang\n");
  return 0;
}

// Both ranks make communicator A (MPI initialized by hpref); rank 0 alone makes a second,
// B, which times out. Rank 0 then returns normally: its exit must abort the job (status 5).
int ctor_deadline_owned() {
  hpref::mpi::Options options;
  options.timeout_ms = 2000;
  MpiCommunicator a(options);
  const int rank = a.rank();
  if (rank != 0) return 0;  // ends A (MPI_Finalize, which waits for rank 0 or is aborted)
  try {
    MpiCommunicator b(options);
    bad("a communicator was made without every rank");
  } catch (const hpref::Error& e) {
    std::string text = e.what();
    if (e.code() != hpref::Errc::comm_timeout || text.find("MPI_Comm_idup") == std::string::npos)
      bad("rank 0's second communicator: " + text);
  }
  try {
    MpiCommunicator again(options);
    bad("a third communicator was made after the second timed out");
  } catch (const hpref::Error& e) {
    std::string text = e.what();
    if (e.code() != hpref::Errc::comm_usage ||
        text.find("could not be made") == std::string::npos ||
        text.find("MPI_Comm_idup") == std::string::npos)
      bad("the third communicator: " + text);
  }
  std::printf("ok: rank 0's second constructor timed out and a third was refused; exiting\n");
  std::fflush(stdout);
  return 0;  // A ends without finalizing MPI (a dup is pending); the exit aborts the job
}

int thread_single(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int level = -1;
  MPI_Query_thread(&level);
  if (level >= MPI_THREAD_SERIALIZED) {
    // An MPI built to give more than asked: nothing to refuse.
    MPI_Finalize();
    std::printf("ok: MPI_Init gave thread level %d here (no refusal to check)\n", level);
    return 0;
  }
  MpiCommunicator c;
  c.barrier(c.world()).wait();  // the main thread: allowed
  auto on_other_thread = [](auto&& call) {
    std::string error;
    hpref::Errc code = hpref::Errc::internal;
    std::thread other([&] {
      try {
        call();
      } catch (const hpref::Error& e) {
        error = e.what();
        code = e.code();
      }
    });
    other.join();
    if (code != hpref::Errc::comm_usage || error.find("MPI_THREAD_") == std::string::npos ||
        error.find("main thread") == std::string::npos)
      bad("off MPI's main thread: " + (error.empty() ? std::string("no error") : error));
    return error;
  };
  // A launch there is refused before it changes anything...
  std::string launched = on_other_thread([&] { c.barrier(c.world()).wait(); });
  // ...and a wait there before it marks the Work: the main thread then completes it.
  std::int64_t x = c.rank() + 1;
  hpref::Work w =
      c.all_reduce(c.world(), {&x, sizeof x}, hpref::DType::int64, hpref::ReduceOp::sum);
  std::string waited = on_other_thread([&] { w.wait(); });
  if (c.failed()) bad("the communicator failed after a refusal");
  w.wait();
  if (x != 3)
    bad("all_reduce waited on the main thread after a refused wait gave " + std::to_string(x));
  c.barrier(c.world()).wait();
  MPI_Finalize();
  std::printf("ok: %s\nok: %s\n", launched.c_str(), waited.c_str());
  return 0;
}

int thread_serialized() {
  MpiCommunicator c;
  std::int64_t x = c.rank() + 1;
  hpref::Work w =
      c.all_reduce(c.world(), {&x, sizeof x}, hpref::DType::int64, hpref::ReduceOp::sum);
  std::thread other([&] { w.wait(); });
  other.join();
  if (x != 3) bad("an all_reduce waited on another thread gave " + std::to_string(x));
  std::printf("ok: a Work waited on another thread under MPI_THREAD_SERIALIZED\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "finalize_first") return finalize_first(argc, argv);
    if (mode == "owner_first") return owner_first();
    if (mode == "outlives") return outlives(argc, argv);
    if (mode == "ctor_deadline") return ctor_deadline(argc, argv);
    if (mode == "ctor_deadline_owned") return ctor_deadline_owned();
    if (mode == "thread_single") return thread_single(argc, argv);
    if (mode == "thread_serialized") return thread_serialized();
  } catch (const std::exception& e) {
    std::printf("FAIL: %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::printf(
      "usage: %s finalize_first|owner_first|outlives|ctor_deadline|ctor_deadline_owned|"
      "thread_single|"
      "thread_serialized\n",
      argv[0]);
  return 2;
}
