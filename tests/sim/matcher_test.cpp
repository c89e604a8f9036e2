// The simulator's operation table (simulator/src/matcher.hpp) on its own, in one process:
// a work's id names the same launch however many works before it the table has forgotten,
// and the table holds the works from the oldest one not yet waited, not every launch of the
// run (a long property run's monitor used to grow by one entry per launch, SPEC 9.3).
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <vector>

#include "groups.hpp"
#include "matcher.hpp"

using namespace hpref;
using namespace hpref::sim::detail;

namespace {

// Rank r (member r of the world) launches a barrier; its work id.
std::uint64_t launch_barrier(Matcher& m, int r) { return m.launch(r, 0, r, OpSignature{}, 0, 0); }

}  // namespace

BOOST_AUTO_TEST_SUITE(matcher)

BOOST_AUTO_TEST_CASE(waited_works_are_forgotten_in_launch_order_ids_stay_valid_spec_9_3) {
  Groups groups(2, "sim");
  Matcher m(groups);
  std::uint64_t first = launch_barrier(m, 0);  // rank 0's first barrier, never waited
  std::vector<std::uint64_t> ids;
  for (int k = 0; k < 1000; ++k) {
    std::uint64_t a = launch_barrier(m, 1), b = launch_barrier(m, 0);
    BOOST_TEST(a == first + 1 + 2 * static_cast<std::uint64_t>(k));  // ids count launches
    BOOST_TEST(b == a + 1);
    ids.push_back(a);
    ids.push_back(b);
  }
  // Rank 0's first work is still held, so nothing after it may be forgotten.
  for (std::uint64_t id : ids) m.waited(id);
  BOOST_TEST(m.works_held() == 2001u);
  const WorkRef* w = m.work(first, 0);
  BOOST_TEST_REQUIRE(w != nullptr);
  BOOST_TEST(w->key.seq == 0);
  BOOST_TEST(m.work(first, 1) == nullptr);   // not rank 1's
  BOOST_TEST(m.work(ids[0], 1) == nullptr);  // waited: unknown from now on
  m.waited(first);
  BOOST_TEST(m.works_held() == 0u);
  BOOST_TEST(m.work(first, 0) == nullptr);

  // Later ids go on from where the run is; an unwaited one in the middle keeps what follows.
  std::uint64_t c = launch_barrier(m, 0), d = launch_barrier(m, 1), e = launch_barrier(m, 0);
  BOOST_TEST(c == first + 2001);
  m.waited(c);
  m.waited(e);
  BOOST_TEST(m.works_held() == 2u);  // d and e: d is not waited
  BOOST_TEST_REQUIRE(m.work(d, 1) != nullptr);
  BOOST_TEST(m.work(d, 1)->key.seq == 1000);  // rank 1's 1001st barrier on the world
  BOOST_TEST(m.work(d, 1)->member == 1);
  BOOST_TEST(m.work(e, 0) == nullptr);
  BOOST_TEST(m.work(e + 1, 0) == nullptr);  // never launched
  BOOST_TEST(m.work(0, 0) == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
