// The slabs of a large decode's nodes (reference/src/node_arena.cpp, issue 15): a decode's
// slabs are given back when its items are freed, from any thread, and reused by the next
// decode; a kept item keeps its slab, so decodes that reuse the others cannot change it; a
// small decode takes no slab. (SPEC 2.4: decoding allocates a small multiple of the input.)
#include <boost/test/unit_test.hpp>
#include <cstdint>
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

BOOST_AUTO_TEST_SUITE_END()
