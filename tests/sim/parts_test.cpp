// The simulator's parts on their own, through their private headers (simulator/src): the
// delivery's buffers and pools, the monitor answering a rank that is only a script, and a
// rank's communicator answered by a monitor that is only a script (SPEC 9.3; the design is
// docs/simulator.md). Each pins what no whole run can show: which staging area a launch gets,
// when an operation's buffers go, how many round trips a launch takes, a request no real
// rank sends in order.
#include <semaphore.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/interprocess/managed_shared_memory.hpp>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "delivery.hpp"
#include "groups.hpp"
#include "hpref/sim/cluster.hpp"
#include "matcher.hpp"
#include "rank_comm.hpp"
#include "scheduler.hpp"
#include "shared.hpp"
#include "support.hpp"

using namespace hpref;
using namespace hpref::sim;
using namespace hpref::sim::detail;
using hpref::sim::testing::describe;

namespace {

namespace bip = boost::interprocess;

// A segment of the simulator's kind; its name is removed once it is mapped (as Cluster::run
// does), so nothing is left in /dev/shm.
struct Segment {
  explicit Segment(std::size_t bytes) : memory(bip::create_only, name().c_str(), bytes) {
    bip::shared_memory_object::remove(name().c_str());
  }
  static std::string name() { return "hpref-parts-test-" + std::to_string(getpid()); }
  bip::managed_shared_memory memory;
};

// The monitor's data parts for a world of two ranks.
struct Parts {
  static constexpr std::size_t kBytes = std::size_t{4} << 20;
  Segment segment{kBytes};
  std::unique_ptr<Control> control = std::make_unique<Control>();
  Groups groups{2, "sim"};
  Matcher matcher{groups};
  Delivery delivery{segment.memory, kBytes, matcher, groups, control.get(), 2};

  // A staging area of `bytes` for rank r, handed to its next launch.
  std::uint64_t staged(int r, std::uint64_t bytes) {
    delivery.stage(r, bytes);
    return delivery.take_stage(r);
  }
  // Ranks 0 and 1 launch the world's next barrier with these staged areas (0: none).
  OpKey launch(std::uint64_t h0, std::uint64_t h1) {
    std::uint64_t id = matcher.launch(0, 0, 0, OpSignature{}, h0, 0);
    matcher.launch(1, 0, 1, OpSignature{}, h1, 0);
    return matcher.work(id).key;
  }
};

constexpr std::uint64_t kArea = 100000;  // over kInlineBytes: a staging area

}  // namespace

BOOST_AUTO_TEST_SUITE(sim_delivery)

// An operation's buffers live until every member has consumed its share, then the operation
// is gone from the table (a long run's monitor does not grow by one per launch) and each area
// goes to its writer's pool. A rank takes, in this order: its own; one it wrote before from
// any pool; a new one while the segment has room; only then another rank's (delivery.hpp).
BOOST_AUTO_TEST_CASE(consumed_operations_are_freed_and_their_areas_pooled_by_writer_spec_9_3) {
  Parts p;
  std::uint64_t h1 = p.staged(1, kArea);
  OpKey k = p.launch(0, h1);
  p.delivery.consume(k, 0);
  BOOST_TEST(p.matcher.ops().count(k) == 1u);  // rank 1 has not copied its share yet
  p.delivery.consume(k, 1);
  BOOST_TEST(p.matcher.ops().empty());
  // Rank 1's area is in its pool; rank 0 never wrote it and the segment has room: a new one.
  std::uint64_t h0 = p.staged(0, kArea);
  BOOST_TEST(h0 != 0u);
  BOOST_TEST(h0 != h1);
  OpKey k2 = p.launch(h0, 0);
  p.delivery.consume(k2, 1);
  p.delivery.consume(k2, 0);
  BOOST_TEST(p.matcher.ops().empty());
  // Each rank's next launch of that size gets back the area it wrote.
  BOOST_TEST(p.staged(0, kArea) == h0);
  BOOST_TEST(p.staged(1, kArea) == h1);
}

// A rank that is gone launches nothing more: its areas are freed, not pooled, once the
// operations holding them are consumed.
BOOST_AUTO_TEST_CASE(a_gone_ranks_areas_are_freed_not_pooled_spec_9_3) {
  Parts p;
  std::size_t free_before = p.segment.memory.get_free_memory();
  std::uint64_t h1 = p.staged(1, kArea);
  OpKey k = p.launch(0, h1);
  BOOST_TEST(p.segment.memory.get_free_memory() < free_before);
  p.delivery.drop_stage(1);   // rank 1 died
  p.delivery.consume_all(1);  // its share of every operation
  BOOST_TEST(p.matcher.ops().count(k) == 1u);
  p.delivery.consume(k, 0);
  BOOST_TEST(p.matcher.ops().empty());
  BOOST_TEST(p.segment.memory.get_free_memory() == free_before);
}

// A rank's pool keeps four areas (delivery.hpp, kPoolAreas); a fifth frees the smallest.
BOOST_AUTO_TEST_CASE(a_ranks_pool_keeps_four_areas_and_a_fifth_frees_the_smallest_spec_9_3) {
  Parts p;
  std::vector<OpKey> keys;
  for (std::uint64_t i = 0; i < 5; ++i) keys.push_back(p.launch(0, p.staged(1, kArea + i * 4096)));
  std::size_t free_before = p.segment.memory.get_free_memory();
  for (std::size_t i = 0; i < 4; ++i) {
    p.delivery.consume(keys[i], 0);
    p.delivery.consume(keys[i], 1);
  }
  BOOST_TEST(p.matcher.ops().size() == 1u);
  BOOST_TEST(p.segment.memory.get_free_memory() == free_before);  // all four pooled
  p.delivery.consume(keys[4], 0);
  p.delivery.consume(keys[4], 1);
  BOOST_TEST(p.matcher.ops().empty());
  std::size_t freed = p.segment.memory.get_free_memory() - free_before;
  BOOST_TEST(freed >= kArea);  // the smallest, and only it
  BOOST_TEST(freed < 2 * kArea);
}

// The spares and pools are only a speed-up: when a launch's data has no room, every rank's
// spare, rank 0's included, and every pool are freed before the launch is refused. Rank 0's
// first launch leaves it a spare of kSpareBytes and a pooled area of as many; its second
// fits the segment only without them.
BOOST_AUTO_TEST_CASE(spares_and_pools_give_way_to_a_launchs_data_spec_9_3) {
  Options o;
  o.segment_bytes = std::size_t{8} << 20;
  std::size_t large = o.segment_bytes - sizeof(Control) - kSpareBytes / 2;
  auto r = Cluster::run(1, o, [large](Communicator& c) {
    std::vector<char> first(kSpareBytes, 'a'), second(large, 'b');
    c.broadcast(c.world(), {first.data(), first.size()}, 0).wait();
    c.broadcast(c.world(), {second.data(), second.size()}, 0).wait();
    return std::string("both launched");
  });
  BOOST_TEST(r.outcomes[0].value == "both launched", describe(r));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sim_monitor_requests)

// The monitor answers a scripted rank 0 (a thread of this process; its pid is a child that
// only waits): a wait on a work it does not know - waited already (a second thread's wait
// racing the first past Work's own check), or never launched - is comm_usage for that rank,
// and the run goes on.
BOOST_AUTO_TEST_CASE(a_wait_on_an_unknown_work_is_comm_usage_spec_9_1) {
  std::fflush(nullptr);
  pid_t parent = getpid();
  pid_t child = fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);  // the parent died before prctl: no signal will come
    for (;;) pause();
  }
  Options o;
  o.segment_bytes = std::size_t{4} << 20;
  Segment segment(o.segment_bytes);
  auto control = std::make_unique<Control>();
  sem_init(&control->wake, 0, 0);
  sem_init(&control->slots[0].go, 0, 0);
  control->nranks = 1;
  Slot& s = control->slots[0];
  std::vector<std::string> answers;
  bool lost = false;  // the monitor stopped answering: the script gives up (a failure, not a hang)
  std::thread rank([&] {
    auto turn = [&] {
      timespec deadline{};
      clock_gettime(CLOCK_REALTIME, &deadline);
      deadline.tv_sec += 30;
      while (!lost && sem_timedwait(&s.go, &deadline) != 0) {
        if (errno != EINTR) lost = true;
      }
    };
    auto request = [&](Req q) {
      if (lost) return;
      s.req = q;
      sem_post(&control->wake);
      turn();
      if (lost) return;
      answers.push_back(s.status == 0 ? std::string("ok")
                                      : std::string(errc_name(static_cast<Errc>(s.status))) + ": " +
                                            s.message);
    };
    turn();
    s.group = 0;
    write_signature(check_barrier(Group(0, {0}, "sim", 0), 0), 1, s.signature);
    s.stage_bytes = 0;
    s.inline_data = 1;
    s.in_spare = 0;
    request(Req::launch_staged);
    std::uint64_t id = s.work_id;
    s.work = id;
    request(Req::wait);
    request(Req::wait);  // the same work again
    s.work = id + 1;
    request(Req::wait);  // never launched
    s.stage_bytes = 0;
    request(Req::finish);
    s.finish = Finish::ok;
    s.finish_code = 0;
    s.req = Req::finish_staged;
    sem_post(&control->wake);
  });
  std::optional<RunResult> run;
  try {
    run = Scheduler(control.get(), segment.memory, 1, o, {child}).run();
  } catch (const std::exception& e) {
    BOOST_ERROR("the monitor threw: " << e.what());
  }
  rank.join();  // within 30 s of the monitor's last answer
  BOOST_REQUIRE(run.has_value());
  RunResult& r = *run;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::string unknown = "comm_usage: rank 0 waited on an unknown work";
  BOOST_TEST(answers == (std::vector<std::string>{"ok", "ok", unknown, unknown, "ok"}),
             boost::test_tools::per_element());
  BOOST_TEST(r.outcomes.at(0).status == RankOutcome::Status::ok, describe(r));
  BOOST_TEST(r.trace_lines == 2u);  // the barrier's launch and the exit
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sim_rank_requests)

// A rank's communicator against a scripted monitor (a thread of this process): a launch whose
// data fits the spare area the monitor keeps for the rank (Slot::spare) is copied there and
// takes one round trip; a larger one asks for a staging area first (docs/simulator.md, Cost
// model).
BOOST_AUTO_TEST_CASE(a_launch_that_fits_the_spare_takes_one_round_trip_spec_9_3) {
  auto control = std::make_unique<Control>();
  sem_init(&control->wake, 0, 0);
  sem_init(&control->slots[0].go, 0, 0);
  control->nranks = 1;
  std::vector<char> segment(std::size_t{1} << 20);  // stands in for the shared segment
  Slot& s = control->slots[0];
  constexpr std::uint64_t kSpare = 4096, kSpareSize = 65536, kStaging = 262144;
  s.spare = kSpare;
  s.spare_bytes = kSpareSize;
  std::vector<int> requests;
  std::atomic<bool> stop{false};
  std::thread monitor([&] {  // answers every request until told to stop: never a hang
    for (std::uint64_t launches = 0;;) {
      while (sem_wait(&control->wake) != 0) {
      }
      if (stop) break;
      requests.push_back(static_cast<int>(s.req));
      s.status = 0;
      if (s.req == Req::launch) s.handle = kStaging;
      if (s.req == Req::launch_staged) s.work_id = ++launches;
      sem_post(&s.go);
    }
  });
  RankComm comm(control.get(), segment.data(), 0, 1, "sim", 0);
  std::vector<char> fits(kSpareSize, 'a'), larger(kSpareSize + 1, 'b');
  Work a = comm.broadcast(comm.world(), {fits.data(), fits.size()}, 0);
  std::vector<int> first = requests;
  Work b = comm.broadcast(comm.world(), {larger.data(), larger.size()}, 0);
  stop = true;  // every request was answered: the monitor waits for the next one
  sem_post(&control->wake);
  monitor.join();
  const int launch = static_cast<int>(Req::launch), staged = static_cast<int>(Req::launch_staged);
  BOOST_TEST(first == (std::vector<int>{staged}), boost::test_tools::per_element());
  BOOST_TEST(requests == (std::vector<int>{staged, launch, staged}),
             boost::test_tools::per_element());
  BOOST_TEST(std::memcmp(segment.data() + kSpare, fits.data(), fits.size()) == 0);
  BOOST_TEST(std::memcmp(segment.data() + kStaging, larger.data(), larger.size()) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
