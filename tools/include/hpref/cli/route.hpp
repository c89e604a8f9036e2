// `hpref route`: one rank's route as a table or JSON, the P x P send matrix of a whole
// configuration, and the JSON-lines batch ops interval_route, sliding_window_route and
// document_prefix_route (ARCHITECTURE.md).
#pragma once

#include <string>
#include <vector>

#include "hpref/cli/json_value.hpp"
#include "hpref/routes.hpp"

namespace hpref::cli {

Json route_to_json(const Route& route);

// One `hpref route --batch` request -> its answer body (throws hpref::Error on refusal).
Json handle_route_request(const Json& request);

// A human-readable table of one rank's route; `ratio` > 0 (here and below): document-prefix
// routes, whose rows are compressed blocks of that many tokens (SPEC 7.3), which the table
// says on its first line.
std::string route_table(const Route& route, std::int64_t rank, std::int64_t ratio = 0);

// The P x P matrix of rows rank r sends to rank p, with row and column totals; Error
// route_overflow when a total is beyond int64 (ranks send overlapping rows).
std::string send_matrix_table(const std::vector<Route>& routes, std::int64_t ratio = 0);

// "0,5,10" -> {0, 5, 10}; "0:7,5:10" -> intervals. Error invalid_argument naming the text.
std::vector<std::int64_t> parse_int_list(const std::string& text, const char* what);
std::vector<Interval> parse_interval_list(const std::string& text);

}  // namespace hpref::cli
