// The CLI interchange format (ARCHITECTURE.md) and the frame batch answers, plus the
// cases the original implementation answered (tests/data/frames.jsonl, from
// shared/examples): our decoder must accept or refuse as it did, with equal items.
#include <cmath>
#include <fstream>
#include <sstream>

#include "hpref/cli/batch.hpp"
#include "hpref/cli/frame.hpp"
#include "hpref/cli/json_value.hpp"
#include "test_util.hpp"

using namespace hpref;
using namespace hpref::cli;
using namespace std::literals;

namespace {

Value from(std::string_view text) { return value_from_json(parse_json(text)); }
std::string to(const Value& v) { return dump_json(value_to_json(v)); }

std::string data_path(const char* name) { return std::string(HPREF_TEST_DATA_DIR) + "/" + name; }

}  // namespace

BOOST_AUTO_TEST_SUITE(json)

BOOST_AUTO_TEST_CASE(every_value_form_round_trips) {
  const char* texts[] = {
      "null", "true", "false", "0", "-9223372036854775808", "9223372036854775807", "\"h\\u00e9\"",
      "{\"float\": 1.5}", "{\"float\": \"nan\"}", "{\"float\": \"-inf\"}", "{\"float\": -0.0}",
      "{\"bytes\": \"00ff\"}", "{\"bytearray\": \"\"}", "{\"tuple\": [1, {\"list\": []}]}",
      "{\"dict\": [[\"a\", 1], [{\"tuple\": [1, 2]}, null]]}",
      "{\"tensor\": {\"dtype\": \"torch.int16\", \"shape\": [2, 1], \"hex\": \"01000200\"}}",
  };
  for (const char* text : texts) {
    BOOST_TEST_CONTEXT(text) {
      Value v = from(text);
      BOOST_TEST((from(to(v)) == v));
    }
  }
  BOOST_TEST(std::signbit(from("{\"float\": -0.0}").as_float()));
  BOOST_TEST(to(Value::floating(-0.0)) == "{\"float\": -0.0}");
}

BOOST_AUTO_TEST_CASE(floats_written_shortest) {
  BOOST_TEST(to(Value::floating(0.1)) == "{\"float\": 0.1}");
  BOOST_TEST(to(Value::floating(1.0)) == "{\"float\": 1.0}");
  BOOST_TEST(to(Value::floating(1e300)) == "{\"float\": 1e+300}");
  BOOST_TEST(to(Value::floating(5e-324)) == "{\"float\": 5e-324}");
  BOOST_TEST(to(Value::floating(std::nan(""))) == "{\"float\": \"nan\"}");
  double third = 1.0 / 3.0;
  BOOST_TEST(from(to(Value::floating(third))).as_float() == third);
}

BOOST_AUTO_TEST_CASE(tensor_dtype_written_canonical) {
  Value t = from("{\"tensor\": {\"dtype\": \"torch.long\", \"shape\": [], \"hex\": \"0100000000000000\"}}");
  BOOST_TEST(to(t).find("torch.int64") != std::string::npos);
  BOOST_TEST(from("{\"bytes\": \"ABcd\"}").as_bytes().size() == 2u);  // hex read in either case
  BOOST_TEST(to(from("{\"bytes\": \"ABcd\"}")) == "{\"bytes\": \"abcd\"}");
}

BOOST_AUTO_TEST_CASE(malformed_values_refused) {
  HPREF_CHECK_ERROR(from("1.5"), Errc::json_value, "1.5");
  HPREF_CHECK_ERROR(from("1e3"), Errc::json_value, "int64");
  HPREF_CHECK_ERROR(from("9223372036854775808"), Errc::json_value, "9223372036854775808");
  HPREF_CHECK_ERROR(from("[1]"), Errc::json_value, "[1]");
  HPREF_CHECK_ERROR(from("{\"float\": \"NaN\"}"), Errc::json_value, "NaN");
  HPREF_CHECK_ERROR(from("{\"bytes\": \"abc\"}"), Errc::json_value, "odd length");
  HPREF_CHECK_ERROR(from("{\"bytes\": \"zz\"}"), Errc::json_value, "non-hex");
  HPREF_CHECK_ERROR(from("{\"list\": [], \"tuple\": []}"), Errc::json_value, "exactly one member");
  HPREF_CHECK_ERROR(from("{\"set\": []}"), Errc::json_value, "\"set\"");
  HPREF_CHECK_ERROR(from("{\"dict\": [[1, 2], [true, 3]]}"), Errc::duplicate_key, "True");
  HPREF_CHECK_ERROR(from("{\"dict\": [[{\"list\": []}, 3]]}"), Errc::unhashable_key, "[]");
  HPREF_CHECK_ERROR(
      from("{\"tensor\": {\"dtype\": \"torch.int16\", \"shape\": [3], \"hex\": \"0100\"}}"),
      Errc::invalid_tensor, "needs 6 bytes, got 2");
  HPREF_CHECK_ERROR(
      from("{\"tensor\": {\"dtype\": \"float32\", \"shape\": [], \"hex\": \"\"}}"),
      Errc::invalid_dtype, "float32");
}

BOOST_AUTO_TEST_CASE(syntax_and_depth) {
  HPREF_CHECK_ERROR(parse_json("{\"a\": "), Errc::json_syntax, "malformed JSON");
  std::string deep(kMaxJsonDepth + 1, '[');
  HPREF_CHECK_ERROR(parse_json(deep), Errc::json_syntax, "deeper than 1024");
}

BOOST_AUTO_TEST_CASE(item_keys_both_forms) {
  auto items = items_from_json(parse_json(
      "[[{\"key\": [7, 0]}, 1], [{\"tuple\": [\"doc\", 1]}, 2], [\"plain\", 3], [{\"tuple\": [-1, 0]}, 4]]"));
  BOOST_REQUIRE_EQUAL(items.size(), 4u);
  BOOST_TEST((items[0].first == Value::tuple({Value::integer(7), Value::integer(0)})));
  std::string out = dump_json(items_to_json(items));
  BOOST_TEST(out == "[[{\"key\": [7, 0]}, 1], [{\"key\": [\"doc\", 1]}, 2], [\"plain\", 3], "
                    "[{\"tuple\": [-1, 0]}, 4]]");
  HPREF_CHECK_ERROR(items_from_json(parse_json("[[{\"key\": [-1, 0]}, 1]]")),
                    Errc::invalid_sample_key, "-1");
  HPREF_CHECK_ERROR(items_from_json(parse_json("[[{\"list\": [1]}, 1]]")), Errc::unhashable_key,
                    "[1]");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(frame_batch)

// The answer as written on the wire (decoded items are written as raw JSON text).
Json answer(std::string_view line) {
  return parse_json(dump_json(answer_line(line, handle_frame_request)));
}

BOOST_AUTO_TEST_CASE(answers_in_the_architecture_format) {
  Json enc = answer(R"({"op":"encode_segment","items":[[{"key":[1,0]},{"bytes":"ab"}]],"id":7})");
  BOOST_TEST(enc["ok"].get<bool>());
  BOOST_TEST(enc["id"].get<int>() == 7);
  std::string hex = enc["frame_hex"].get<std::string>();
  BOOST_TEST(hex.substr(0, 8) == "48504231");
  Json dec = answer(R"({"op":"decode_segment","frame_hex":")" + hex + R"(","id":"x","extra":1})");
  BOOST_TEST(dump_json(dec) == R"({"ok": true, "items": [[{"key": [1, 0]}, {"bytes": "ab"}]], "id": "x"})");
  Json merged = answer(R"({"op":"decode_received","received_hex":")" + hex + hex +
                       R"(","splits":[)" + std::to_string(hex.size() / 2) + "," +
                       std::to_string(hex.size() / 2) + "]}");
  BOOST_TEST(!merged["ok"].get<bool>());
  BOOST_TEST(merged["kind"].get<std::string>() == "duplicate_payload_key");
}

BOOST_AUTO_TEST_CASE(refusals_carry_kind_and_batch_goes_on) {
  std::istringstream in("not json\n{\"op\":\"nope\",\"id\":1}\n\n{\"op\":\"decode_segment\",\"frame_hex\":\"4850423100\"}\n"
                        "{\"op\":\"decode_segment\",\"frame_hex\":\"\"}\n");
  std::ostringstream out;
  BatchCounts counts = run_batch(in, out, handle_frame_request);
  BOOST_TEST(counts.refused == 3u);
  BOOST_TEST(counts.answered == 4u);
  std::istringstream lines(out.str());
  std::string line;
  std::vector<Json> answers;
  while (std::getline(lines, line)) answers.push_back(parse_json(line));
  BOOST_REQUIRE_EQUAL(answers.size(), 4u);
  BOOST_TEST(answers[0]["kind"].get<std::string>() == "json_syntax");
  BOOST_TEST(answers[1]["kind"].get<std::string>() == "invalid_request");
  BOOST_TEST(answers[1]["id"].get<int>() == 1);
  BOOST_TEST(answers[2]["kind"].get<std::string>() == "truncated_header");
  BOOST_TEST(answers[3]["ok"].get<bool>());
  BOOST_TEST(answers[3]["items"].empty());
}

// Each case of shared/examples/frames.jsonl: our decoder accepts exactly when the original
// did, with equal items (keys compared as Values: {"key": ...} and {"tuple": ...} alike).
BOOST_AUTO_TEST_CASE(original_implementation_examples) {
  std::ifstream in(data_path("data/frames.jsonl"));
  BOOST_REQUIRE(in.good());
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    Json c = parse_json(line);
    ++cases;
    BOOST_TEST_CONTEXT("case " << cases) {
      bool has_items = c.contains("items");
      std::string hex = has_items ? c["original_frame_hex"].get<std::string>()
                                  : c["frame_hex"].get<std::string>();
      Json ours = answer(dump_json(Json{{"op", "decode_segment"}, {"frame_hex", hex}}));
      Json expected = has_items ? Json{{"ok", true}, {"items", c["items"]}} : c["original_answer"];
      BOOST_TEST(ours["ok"].get<bool>() == expected["ok"].get<bool>());
      if (ours["ok"].get<bool>() && expected["ok"].get<bool>()) {
        auto a = items_from_json(ours["items"]);
        auto b = items_from_json(expected["items"]);
        BOOST_TEST(a.size() == b.size());
        for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
          BOOST_TEST((a[i].first == b[i].first));
          BOOST_TEST((a[i].second == b[i].second));
        }
      }
      if (has_items) {
        // Our encoder's bytes may differ (CPython memoizes) but must decode to the items.
        Json enc = answer(dump_json(Json{{"op", "encode_segment"}, {"items", c["items"]}}));
        BOOST_TEST(enc["ok"].get<bool>());
        Json back = answer(dump_json(Json{{"op", "decode_segment"}, {"frame_hex", enc["frame_hex"]}}));
        auto a = items_from_json(back["items"]);
        auto b = items_from_json(c["items"]);
        BOOST_TEST(a.size() == b.size());
        for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
          BOOST_TEST((a[i].second == b[i].second));
        }
      }
    }
  }
  BOOST_TEST(cases == 36);
}

BOOST_AUTO_TEST_SUITE_END()
