// The operation core of the real backends (device/src/core/) over a one-rank fake
// Transport whose operations move their bytes at wait(), as a non-blocking library does:
// Works held past their communicator's end (completed by its destructor, while the
// transport lives), refusals on a thread the library forbids (nothing changed: no sequence
// number taken, the Work not marked), and a wait() that failed with an exception that is
// not a CommError (a later wait() must not report success).
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hpref/device/communicator.hpp"
#include "hpref/device/transport.hpp"
#include "hpref/dtype.hpp"
#include "test_util.hpp"

using namespace hpref;

namespace {

struct Shared {
  int pendings_alive = 0;
  int pendings_alive_at_transport_end = -1;
  bool transport_alive = false;
  std::string wrong_thread;           // non-empty: this thread may not call the "library"
  std::vector<std::int64_t> seqs;     // of each launched operation
  bool throw_bad_alloc_once = false;  // the next wait throws std::bad_alloc
};

struct FakePending final : device::Pending {
  Shared& shared;
  std::function<void()> move;
  FakePending(Shared& s, std::function<void()> m) : shared(s), move(std::move(m)) {
    ++shared.pendings_alive;
  }
  ~FakePending() override { --shared.pendings_alive; }
  void wait() override {
    if (!shared.transport_alive) throw std::logic_error("wait() after the transport ended");
    if (std::exchange(shared.throw_bad_alloc_once, false)) throw std::bad_alloc();
    move();
  }
};

class FakeTransport final : public device::Transport {
 public:
  explicit FakeTransport(Shared& s) : Transport("fake", "nothing", 0, 1, 60000), shared_(s) {
    shared_.transport_alive = true;
  }
  ~FakeTransport() override {
    shared_.pendings_alive_at_transport_end = shared_.pendings_alive;
    shared_.transport_alive = false;
  }
  device::PendingPtr all_gather(const device::OpContext& op, const void* in, void* out,
                                std::size_t bytes) override {
    return pending(op, [=] { std::memmove(out, in, bytes); });
  }
  device::PendingPtr broadcast(const device::OpContext& op, void*, std::size_t, int,
                               bool) override {
    return pending(op, [] {});
  }
  device::PendingPtr all_reduce(const device::OpContext& op, const void* in, void* out,
                                std::size_t count, DType dtype, ReduceOp) override {
    std::size_t bytes = count * element_size(dtype);
    return pending(op, [=] { std::memmove(out, in, bytes); });
  }
  device::PendingPtr all_to_all_v(const device::OpContext& op, const void* in,
                                  std::span<const std::size_t> in_counts,
                                  std::span<const std::size_t> in_displs, void* out,
                                  std::span<const std::size_t>) override {
    const char* from = static_cast<const char*>(in) + in_displs[0];
    std::size_t bytes = in_counts[0];
    return pending(op, [=] { std::memmove(out, from, bytes); });
  }
  device::PendingPtr barrier(const device::OpContext& op) override {
    return pending(op, [] {});
  }
  void add_group(const device::OpContext&, int, std::span<const int>, bool) override {}
  std::string wrong_thread() const override { return shared_.wrong_thread; }

 private:
  device::PendingPtr pending(const device::OpContext& op, std::function<void()> move) {
    shared_.seqs.push_back(op.seq);
    return std::make_unique<FakePending>(shared_, std::move(move));
  }
  Shared& shared_;
};

class FakeCommunicator final : public device::CoreCommunicator {
 public:
  explicit FakeCommunicator(Shared& s, bool checked = false)
      : CoreCommunicator(std::make_unique<FakeTransport>(s), "fake", checked) {}
};

MutableBuffer bytes_of(std::vector<std::int64_t>& v) { return {v.data(), 8 * v.size()}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(device_core)

// A Work held past its communicator's end: completed by the communicator's destructor as
// wait() would, its transport operation freed before the transport; the caller's wait()
// then gives the result. (It kept a pointer to the freed transport: MPI crashed.)
BOOST_AUTO_TEST_CASE(works_held_past_the_communicators_end_are_completed_by_it) {
  Shared shared;
  std::vector<std::int64_t> in = {1, 2, 3}, out(3, 0), reduced = {4, 5};
  std::vector<double> floats = {0.5, 1.5};
  Work gather, sum, fsum, waited;
  {
    FakeCommunicator c(shared);
    gather = c.all_gather(c.world(), {in.data(), 24}, bytes_of(out));
    sum = c.all_reduce(c.world(), bytes_of(reduced), DType::int64, ReduceOp::sum);
    fsum = c.all_reduce(c.world(), {floats.data(), 16}, DType::float64, ReduceOp::sum);
    waited = c.barrier(c.world());
    waited.wait();
    BOOST_TEST(out == std::vector<std::int64_t>(3, 0));  // moved at wait() only
  }
  BOOST_TEST(shared.pendings_alive_at_transport_end == 0);
  BOOST_TEST(shared.pendings_alive == 0);
  BOOST_TEST(out == in);  // written by the communicator's end
  gather.wait();
  sum.wait();
  fsum.wait();
  waited.wait();
  BOOST_TEST(reduced == (std::vector<std::int64_t>{4, 5}));
  BOOST_TEST(floats == (std::vector<double>{0.5, 1.5}));
}

// On a thread the library forbids, a launch is refused before it takes a sequence number
// and a wait before it marks its Work: the right thread then goes on as if nothing
// happened (MPI below MPI_THREAD_SERIALIZED, off its main thread).
BOOST_AUTO_TEST_CASE(a_launch_or_wait_on_a_forbidden_thread_changes_nothing) {
  Shared shared;
  FakeCommunicator c(shared);
  shared.wrong_thread = "a thread the fake library forbids";
  auto refused = [&](auto&& call, const std::string& what) {
    try {
      call();
    } catch (const CommError& e) {
      BOOST_TEST((e.code() == Errc::comm_usage));
      BOOST_TEST(std::string(e.what()).find(what + " on a thread the fake library forbids") !=
                 std::string::npos);
      return;
    }
    BOOST_FAIL("not refused: " + what);
  };
  refused([&] { c.barrier(c.world()); }, "barrier on group 0 [0] was launched");
  refused([&] { c.new_group(std::vector<int>{0}, "gloo"); }, "new_group [0] was made");
  BOOST_TEST(shared.seqs.empty());
  shared.wrong_thread.clear();
  std::vector<std::int64_t> in = {7}, out = {0};
  Work w = c.all_gather(c.world(), {in.data(), 8}, bytes_of(out));
  BOOST_TEST(shared.seqs == std::vector<std::int64_t>{0});  // the refused launch took none
  shared.wrong_thread = "a thread the fake library forbids";
  refused([&] { w.wait(); }, "all_gather on group 0 [0] seq 0 on rank 0 was waited");
  shared.wrong_thread.clear();
  w.wait();  // not marked by the refusal: completed now
  BOOST_TEST(out == in);
  BOOST_TEST(!c.failed());
}

// A wait() that failed with something other than a CommError (no memory) fails every later
// wait() of that Work too; it used to mark the Work done and report success next time.
BOOST_AUTO_TEST_CASE(a_wait_that_threw_something_else_is_not_success_the_next_time) {
  Shared shared;
  FakeCommunicator c(shared);
  std::vector<std::int64_t> in = {7}, out = {0};
  Work w = c.all_gather(c.world(), {in.data(), 8}, bytes_of(out));
  shared.throw_bad_alloc_once = true;
  BOOST_CHECK_THROW(w.wait(), std::bad_alloc);
  try {
    w.wait();
    BOOST_FAIL("a second wait() reported success");
  } catch (const CommError& e) {
    BOOST_TEST(std::string(e.what()).find("std::bad_alloc") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
