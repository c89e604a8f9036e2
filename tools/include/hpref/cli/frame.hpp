// `hpref frame`: encode, decode and inspect HPB1 segments; the JSON-lines batch ops
// encode_segment, decode_segment and decode_received.
#pragma once

#include <span>
#include <string>

#include "hpref/cli/json_value.hpp"
#include "hpref/codec.hpp"

namespace hpref::cli {

// One `hpref frame --batch` request -> its answer body (throws hpref::Error on refusal).
Json handle_frame_request(const Json& request);

// Human-readable layout: the header, then each item's key and its schema tree with
// dtype, shape, offset and size. Decodes first, so a bad segment throws its error.
std::string inspect_segment(std::span<const std::uint8_t> segment,
                            const DecodeOptions& options = {});

}  // namespace hpref::cli
