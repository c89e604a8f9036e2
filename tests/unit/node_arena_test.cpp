// The slabs of a large decode's nodes (reference/src/node_arena.cpp, issue 15): a decode's
// slabs are given back when its items are freed, from any thread, and reused by the next
// decode; a kept item keeps its slab, so decodes that reuse the others cannot change it; a
// small decode takes no slab. (SPEC 2.4: decoding allocates a small multiple of the input.)
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hpref/codec.hpp"
#include "hpref/detail/node_arena.hpp"
#include "hpref/sample_key.hpp"

using namespace hpref;
using detail::NodeArena;

namespace {

// `n` items of a few scalars, a str, a tuple and a small tensor each, their contents drawn
// from `salt`, so that two workloads differ in every item.
std::vector<Item> workload(int n, std::int64_t salt) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    std::int64_t x = salt * 1000003 + i;
    std::vector<std::uint8_t> bytes(32);
    for (std::size_t b = 0; b < bytes.size(); ++b) bytes[b] = static_cast<std::uint8_t>(x + b);
    items.emplace_back(
        SampleKey::make(i, salt).to_value(),
        Value::mapping(
            {{Value::string("tokens"), Value::integer(x)},
             {Value::string("score"), Value::floating(static_cast<double>(x) / 7)},
             {Value::string("name"), Value::string("s" + std::to_string(x))},
             {Value::string("pair"), Value::tuple({Value::integer(x), Value::none()})},
             {Value::string("emb"), Value::tensor(Tensor::copy_of(DType::uint8, {32}, bytes))}}));
  }
  return items;
}

SharedBytes encoded(int n, std::int64_t salt) {
  return SharedBytes::copy_of(encode_segment(workload(n, salt)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_arena)

BOOST_AUTO_TEST_CASE(a_large_decode_gives_its_slabs_back_and_the_next_reuses_them) {
  SharedBytes segment = encoded(2000, 1);
  std::size_t before = NodeArena::slabs_in_use();
  {
    std::vector<Item> items = decode_segment(segment);
    BOOST_TEST(items == workload(2000, 1));
    BOOST_TEST(NodeArena::slabs_in_use() > before + 4);  // its nodes are in slabs
  }
  BOOST_TEST(NodeArena::slabs_in_use() == before);  // every one given back
  std::size_t cached = NodeArena::cached_slabs();
  BOOST_TEST(cached > 4);
  for (int round = 0; round < 5; ++round) {
    std::vector<Item> items = decode_segment(segment);
    BOOST_TEST(items.size() == 2000u);
  }
  // The same slabs, taken from the cache and given back: none made, none lost.
  BOOST_TEST(NodeArena::slabs_in_use() == before);
  BOOST_TEST(NodeArena::cached_slabs() == cached);
}

BOOST_AUTO_TEST_CASE(a_kept_item_outlives_decodes_that_reuse_the_other_slabs) {
  Item kept;
  {
    std::vector<Item> items = decode_segment(encoded(2000, 2));
    kept = items[1234];
  }
  std::vector<Item> expected = workload(2000, 2);
  for (std::int64_t salt = 3; salt < 13; ++salt) {
    std::vector<Item> items = decode_segment(encoded(2000, salt));
    BOOST_TEST((items[1234] == workload(2000, salt)[1234]));
  }
  BOOST_TEST(kept.first == expected[1234].first);
  BOOST_TEST(kept.second == expected[1234].second);
}

BOOST_AUTO_TEST_CASE(items_freed_on_another_thread_give_their_slabs_back) {
  SharedBytes segment = encoded(2000, 20);
  std::size_t before = NodeArena::slabs_in_use();
  std::vector<Item> items = decode_segment(segment);
  BOOST_TEST(NodeArena::slabs_in_use() > before);
  std::thread other([moved = std::move(items)]() mutable { moved.clear(); });
  other.join();
  BOOST_TEST(NodeArena::slabs_in_use() == before);
}

BOOST_AUTO_TEST_CASE(a_small_decode_takes_no_slab) {
  SharedBytes segment = encoded(3, 30);
  BOOST_TEST_REQUIRE(segment.size() < detail::kSlabBytes / 4);
  std::size_t before = NodeArena::slabs_in_use();
  std::vector<Item> items = decode_segment(segment);
  BOOST_TEST(NodeArena::slabs_in_use() == before);
  BOOST_TEST(items == workload(3, 30));
}

// A fork() while another thread holds the slab cache's lock (as taking or giving back a slab
// does) gives a child whose decodes take and give back slabs: the fork waits for the lock and
// the child gets it free. The holding thread lets go once the fork's handler has begun to take
// the lock or, were there no handler, once fork() has returned: then the child would inherit
// the lock held and its decode would wait forever, which the bounded wait below reports as a
// failure (killing the child) rather than hanging. No sleep decides the order of events.
BOOST_AUTO_TEST_CASE(a_fork_while_another_thread_holds_the_cache_leaves_the_child_a_free_one) {
  SharedBytes segment = encoded(2000, 40);
  std::vector<Item> expected = workload(2000, 40);
  { std::vector<Item> items = decode_segment(segment); }  // slabs in the cache for the child
  BOOST_TEST_REQUIRE(NodeArena::cached_slabs() > 4u);
  std::uint64_t forks_before = NodeArena::forks_begun_for_tests();
  std::atomic<bool> held{false};
  std::atomic<bool> forked{false};
  bool locked = false;
  std::thread holder([&] {
    locked = NodeArena::try_lock_cache_for_tests();
    held.store(true);
    if (!locked) return;
    while (!forked.load() && NodeArena::forks_begun_for_tests() == forks_before) {
      std::this_thread::yield();
    }
    NodeArena::unlock_cache_for_tests();
  });
  while (!held.load()) std::this_thread::yield();
  std::fflush(nullptr);
  pid_t child = locked ? fork() : -1;
  if (child == 0) {
    int code = 0;
    try {
      std::vector<Item> items = decode_segment(segment);  // its slabs come from the cache
      if (!(items == expected)) code = 2;
      items.clear();  // and go back to it
      if (NodeArena::cached_slabs() == 0) code = 3;
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  forked.store(true);
  holder.join();
  BOOST_TEST_REQUIRE(locked, "another thread held the slab cache's lock before the test took it");
  BOOST_TEST_REQUIRE(child > 0, "fork() failed");
  // A bound, not a timing assertion: the child's decode takes milliseconds; one still running
  // after 10 s waits for a lock that nobody in it will give back.
  int status = 0;
  pid_t waited = 0;
  for (int i = 0; i < 2000 && (waited = waitpid(child, &status, WNOHANG)) == 0; ++i) usleep(5000);
  if (waited == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  BOOST_TEST(waited == child,
             "the child's decode still waited for the slab cache's lock after "
             "10 s: the child inherited it held by a thread it does not have");
  if (waited == child) {
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0),
               "the child's decode failed (status " << status << ")");
  }
  // The parent got its lock back too, and decodes on.
  bool free_in_parent = NodeArena::try_lock_cache_for_tests();
  if (free_in_parent) NodeArena::unlock_cache_for_tests();
  BOOST_TEST_REQUIRE(free_in_parent, "the parent's slab cache stayed locked after fork()");
  BOOST_TEST(decode_segment(segment) == expected);
}

BOOST_AUTO_TEST_SUITE_END()
