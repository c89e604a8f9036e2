// `hpref frame`: encode, decode and inspect HPB1 segments; the JSON-lines batch ops
// encode_segment, decode_segment and decode_received.
#pragma once

#include <span>
#include <string>

#include "hpref/cli/batch.hpp"
#include "hpref/cli/json_value.hpp"
#include "hpref/codec.hpp"
#include "hpref/inspect.hpp"

namespace hpref::cli {

// One `hpref frame --batch` request -> its answer body (throws hpref::Error on refusal).
// Decoding answers (decode_segment, decode_received, pickle_read) are refused with
// output_limit when their JSON text would pass the request's "max_output_bytes", or
// `max_output_bytes` (default kDefaultMaxOutputBytes) when it has none.
Json handle_frame_request(const Json& request);
Json handle_frame_request_capped(const Json& request, std::uint64_t max_output_bytes);
// handle_frame_request with that default cap (hpref frame --batch --max-output-bytes).
RequestHandler frame_request_handler(std::uint64_t max_output_bytes);

// The inspect view (hpref/inspect.hpp) under the CLI's default output cap.
using hpref::inspect_segment;

}  // namespace hpref::cli
