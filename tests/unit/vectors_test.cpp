// Golden vectors (docs/wire-format.md): the exact segment bytes our writer produces for a
// set of item lists, kept in tests/vectors/golden.jsonl and checked byte for byte, and
// decoded back to the items; and segments the first writer (no memo, before issue 15)
// wrote, kept in tests/vectors/old_writer.jsonl, which must still decode to their items.
#include <cctype>
#include <fstream>

#include "hpref/cli/json_value.hpp"
#include "hpref/codec.hpp"
#include "test_util.hpp"

using namespace hpref;
using namespace hpref::cli;

BOOST_AUTO_TEST_SUITE(golden_vectors)

BOOST_AUTO_TEST_CASE(writer_bytes_are_golden_spec_2_3) {
  std::ifstream in(std::string(HPREF_TEST_DATA_DIR) + "/vectors/golden.jsonl");
  BOOST_REQUIRE(in.good());
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    Json v = parse_json(line);
    ++count;
    BOOST_TEST_CONTEXT(v["name"].get<std::string>()) {
      EncodeOptions options;
      if (v.contains("key_class")) options.key_class = v["key_class"].get<std::string>();
      auto items = items_from_json(v["items"]);
      auto bytes = encode_segment(items, options);
      BOOST_TEST(to_hex(bytes) == v["frame_hex"].get<std::string>());
      DecodeOptions strict;
      strict.strict = true;
      auto decoded = decode_segment(std::span<const std::uint8_t>(bytes), strict);
      BOOST_REQUIRE_EQUAL(decoded.size(), items.size());
      for (std::size_t i = 0; i < items.size(); ++i) {
        BOOST_TEST((decoded[i].first == items[i].first));
        BOOST_TEST((decoded[i].second == items[i].second));
      }
    }
  }
  BOOST_TEST(count >= 12);
}

// docs/wire-format.md shows the vectors: it must show the bytes the writer produces today.
BOOST_AUTO_TEST_CASE(documented_vectors_match) {
  std::ifstream doc(std::string(HPREF_TEST_DATA_DIR) + "/../docs/wire-format.md");
  BOOST_REQUIRE(doc.good());
  std::string text;
  for (char c; doc.get(c);) {
    if (!std::isspace(static_cast<unsigned char>(c))) text.push_back(c);
  }
  std::ifstream in(std::string(HPREF_TEST_DATA_DIR) + "/vectors/golden.jsonl");
  std::string line;
  int shown = 0;
  while (std::getline(in, line)) {
    Json v = parse_json(line);
    std::string hex = v["frame_hex"].get<std::string>();
    if (hex.empty() || hex.size() > 2000) continue;
    ++shown;
    BOOST_TEST_CONTEXT(v["name"].get<std::string>()) {
      BOOST_TEST(text.find(hex) != std::string::npos);
    }
  }
  BOOST_TEST(shown >= 10);
}

// SPEC 2.3 (revised by issue 15): the first writer memoized nothing; what it wrote must
// still decode, strict layout included, to the same items, and today's writer writes those
// items in fewer bytes (every fixture repeats a mapping key or the key class).
BOOST_AUTO_TEST_CASE(old_writer_segments_still_decode) {
  std::ifstream in(std::string(HPREF_TEST_DATA_DIR) + "/vectors/old_writer.jsonl");
  BOOST_REQUIRE(in.good());
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    Json v = parse_json(line);
    ++count;
    BOOST_TEST_CONTEXT(v["name"].get<std::string>()) {
      EncodeOptions options;
      if (v.contains("key_class")) options.key_class = v["key_class"].get<std::string>();
      auto items = items_from_json(v["items"]);
      auto old_bytes = test::unhex(v["frame_hex"].get<std::string>());
      for (bool strict : {false, true}) {
        DecodeOptions d;
        d.strict = strict;
        auto decoded = decode_segment(std::span<const std::uint8_t>(old_bytes), d);
        BOOST_REQUIRE_EQUAL(decoded.size(), items.size());
        for (std::size_t i = 0; i < items.size(); ++i) {
          BOOST_TEST((decoded[i].first == items[i].first));
          BOOST_TEST((decoded[i].second == items[i].second));
        }
      }
      auto now = encode_segment(items, options);
      BOOST_TEST(now.size() < old_bytes.size());
      auto again = decode_segment(std::span<const std::uint8_t>(now));
      BOOST_REQUIRE_EQUAL(again.size(), items.size());
      for (std::size_t i = 0; i < items.size(); ++i) {
        BOOST_TEST((again[i].second == items[i].second));
      }
    }
  }
  BOOST_TEST(count >= 5);
}

BOOST_AUTO_TEST_SUITE_END()
