// `hpref route`: the batch ops against the 60 cases the original implementation answered
// (tests/data/routes.jsonl, from shared/examples: accept or refuse as it did, identical
// routes), the CLI argument parsers and the tables.
#include <fstream>

#include "hpref/cli/batch.hpp"
#include "hpref/cli/route.hpp"
#include "test_util.hpp"

using namespace hpref;
using namespace hpref::cli;

BOOST_AUTO_TEST_SUITE(route_batch)

BOOST_AUTO_TEST_CASE(original_implementation_examples) {
  std::ifstream in(std::string(HPREF_TEST_DATA_DIR) + "/data/routes.jsonl");
  BOOST_REQUIRE(in.good());
  std::string line;
  int cases = 0, refused = 0;
  while (std::getline(in, line)) {
    Json c = parse_json(line);
    ++cases;
    BOOST_TEST_CONTEXT("case " << cases << ": " << dump_json(c["request"])) {
      Json ours = answer_line(dump_json(c["request"]), handle_route_request);
      const Json& expected = c["original_answer"];
      BOOST_TEST(ours["ok"].get<bool>() == expected["ok"].get<bool>());
      if (ours["ok"].get<bool>() && expected["ok"].get<bool>()) {
        BOOST_TEST(dump_json(ours["route"]) == dump_json(expected["route"]));
      }
      if (!expected["ok"].get<bool>()) ++refused;
    }
  }
  BOOST_TEST(cases == 60);
  BOOST_TEST(refused > 0);
}

BOOST_AUTO_TEST_CASE(requests_are_checked) {
  auto kind = [](const char* line) {
    return answer_line(line, handle_route_request)["kind"].get<std::string>();
  };
  BOOST_TEST(kind(R"({"op":"interval_route","local_length":4,"rank":0})") == "invalid_request");
  BOOST_TEST(kind(R"({"op":"interval_route","local_length":4.5,"rank":0,"intervals":[[0,4]]})") ==
             "invalid_request");
  BOOST_TEST(kind(R"({"op":"interval_route","local_length":4,"rank":true,"intervals":[[0,4]]})") ==
             "invalid_request");
  BOOST_TEST(kind(R"({"op":"interval_route","local_length":4,"rank":0,"intervals":[[0,4,5]]})") ==
             "invalid_request");
  BOOST_TEST(
      kind(
          R"({"op":"sliding_window_route","boundaries":[0,8],"local_length":4,"size":2,"rank":0,"window":0})") ==
      "route_arguments");
  BOOST_TEST(kind(R"({"op":"teleport"})") == "invalid_request");
  Json ok = answer_line(
      R"({"op":"interval_route","local_length":4,"rank":1,"intervals":[[0,4],[2,8]],"owner_offsets":null,"id":[1]})",
      handle_route_request);
  BOOST_TEST(
      dump_json(ok) ==
      R"({"ok": true, "route": {"local_length": 4, "global_start": 2, "global_end": 8, "local_output_start": 2, "send_offsets": [0, 0], "input_splits": [0, 0], "output_splits": [2, 0], "needs_exchange": true}, "id": [1]})");
}

// Issue 10 section 5: sizes whose tables cannot fit are refused before allocating (no
// std::length_error / bad_alloc), in the planners and in a batch answer.
BOOST_AUTO_TEST_CASE(route_too_large_before_allocating) {
  const std::int64_t huge = std::int64_t{1} << 62;
  const std::vector<std::int64_t> b{0, huge};
  HPREF_CHECK_ERROR(sliding_window_route(b, 1, huge, 0, 1), Errc::route_too_large,
                    std::to_string(huge));
  HPREF_CHECK_ERROR(document_prefix_route(b, 1, huge, 0, 1), Errc::route_too_large, "size");
  HPREF_CHECK_ERROR(sliding_window_intervals(b, 1, huge, 1), Errc::route_too_large, "size");
  const std::int64_t over = kMaxRoutePeers + 1;
  HPREF_CHECK_ERROR(sliding_window_route(std::vector<std::int64_t>{0, over}, 1, over, 0, 1),
                    Errc::route_too_large, std::to_string(over));
  // The limit itself plans.
  Route edge =
      sliding_window_route(std::vector<std::int64_t>{0, kMaxRoutePeers}, 1, kMaxRoutePeers, 5, 1);
  BOOST_TEST(edge.send_offsets.size() == static_cast<std::size_t>(kMaxRoutePeers));
  // All ranks: O(P^2), refused past kMaxAllRoutesPeers, complete at it.
  const std::int64_t p = kMaxAllRoutesPeers;
  HPREF_CHECK_ERROR(sliding_window_routes(std::vector<std::int64_t>{0, p + 1}, 1, p + 1, 1),
                    Errc::route_too_large, std::to_string(p + 1) + " ranks");
  HPREF_CHECK_ERROR(document_prefix_routes(std::vector<std::int64_t>{0, 2 * (p + 1)}, 2, p + 1, 2),
                    Errc::route_too_large, "plan one rank's route");
  std::vector<Interval> intervals(static_cast<std::size_t>(p + 1), Interval{0, 1});
  for (std::size_t r = 0; r < intervals.size(); ++r) {
    intervals[r] = {static_cast<std::int64_t>(r), static_cast<std::int64_t>(r) + 1};
  }
  HPREF_CHECK_ERROR(interval_routes(1, intervals), Errc::route_too_large, "all ranks");
  intervals.pop_back();
  BOOST_TEST(interval_routes(1, intervals).size() == static_cast<std::size_t>(p));
  // A batch line: an answer with the kind, not an abort.
  Json a = answer_line(
      R"({"op":"sliding_window_route","boundaries":[0,4611686018427387904],"local_length":1,"size":4611686018427387904,"rank":0,"window":1,"id":9})",
      handle_route_request);
  BOOST_TEST(a["kind"].get<std::string>() == "route_too_large");
  BOOST_TEST(a["id"].get<int>() == 9);
}

BOOST_AUTO_TEST_CASE(argument_lists) {
  BOOST_TEST(parse_int_list("0,5,-3", "--x") == std::vector<std::int64_t>({0, 5, -3}),
             boost::test_tools::per_element());
  HPREF_CHECK_ERROR(parse_int_list("0,x", "--boundaries"), Errc::invalid_argument, "'x'");
  HPREF_CHECK_ERROR(parse_int_list("0,,1", "--boundaries"), Errc::invalid_argument, "''");
  HPREF_CHECK_ERROR(parse_int_list("99999999999999999999", "--b"), Errc::invalid_argument, "int64");
  auto iv = parse_interval_list("0:4,2:8");
  BOOST_TEST(iv.size() == 2u);
  BOOST_TEST(iv[1].end == 8);
  HPREF_CHECK_ERROR(parse_interval_list("0-4"), Errc::invalid_argument, "start:end");
  // An empty item is refused in either list, naming the text.
  HPREF_CHECK_ERROR(parse_int_list("0,6,12,", "--boundaries"), Errc::invalid_argument, "'0,6,12,'");
  HPREF_CHECK_ERROR(parse_interval_list("0:4,"), Errc::invalid_argument, "'' in '0:4,'");
  HPREF_CHECK_ERROR(parse_interval_list(",0:4"), Errc::invalid_argument, "'' in ',0:4'");
  HPREF_CHECK_ERROR(parse_interval_list("0:4,,2:8"), Errc::invalid_argument, "'' in '0:4,,2:8'");
}

BOOST_AUTO_TEST_CASE(tables_have_no_trailing_spaces) {
  auto routes = sliding_window_routes(std::vector<std::int64_t>{0, 6, 12}, 4, 3, 3);
  for (const std::string& table : {route_table(routes[1], 1), send_matrix_table(routes)}) {
    BOOST_TEST(table.find(" \n") == std::string::npos, table);
  }
  BOOST_TEST(route_table(routes[1], 1).find("\n2     2       2               0\n(* = this rank") !=
             std::string::npos);
  BOOST_TEST(route_table(routes[1], 1).rfind("rank 1 of 3: owns 4 rows", 0) == 0);
  // A document-prefix table says first that its rows are compressed blocks ("owns 1 rows"
  // for 4 tokens of ratio 2 read as a mistake).
  auto prefix = document_prefix_routes(std::vector<std::int64_t>{0, 5, 12, 16}, 4, 4, 2);
  for (const std::string& table : {route_table(prefix[1], 1, 2), send_matrix_table(prefix, 2)}) {
    BOOST_TEST(table.rfind("rows are compressed blocks of 2 tokens (SPEC 7.3): every count below "
                           "is in blocks\n",
                           0) == 0,
               table);
  }
}

BOOST_AUTO_TEST_CASE(send_matrix_shows_who_sends_what) {
  auto routes = document_prefix_routes(std::vector<std::int64_t>{0, 5, 12, 16}, 4, 4, 2);
  std::string table = send_matrix_table(routes);
  BOOST_TEST(table.find("0        .     2     0     0     2") != std::string::npos);
  BOOST_TEST(table.find("total    0     2     1     0     3") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
