// JSON-lines batch mode shared by `hpref frame --batch` and `hpref route --batch`: one
// request per line in, one answer per line out, in order; the "id" is echoed; a
// refusal or a malformed line is an {"ok": false, "kind", "error"} answer and the
// batch goes on.
#pragma once

#include <functional>
#include <iosfwd>
#include <string_view>

#include "hpref/cli/json_value.hpp"

namespace hpref::cli {

using RequestHandler = std::function<Json(const Json& request)>;

// The answer to one request line (never throws for bad input).
Json answer_line(std::string_view line, const RequestHandler& handle);

struct BatchCounts {
  std::size_t answered = 0;  // non-blank lines, each answered
  std::size_t refused = 0;   // of them, ok:false answers
};
// Runs every line of `in`, answering each (out of memory included: the line gets an
// ok:false "internal" answer and the batch goes on). Error io when the output cannot be
// written.
BatchCounts run_batch(std::istream& in, std::ostream& out, const RequestHandler& handle);

// A request's field, or Error invalid_request naming it.
const Json& required_field(const Json& request, const char* name);

}  // namespace hpref::cli
