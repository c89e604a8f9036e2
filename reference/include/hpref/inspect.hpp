// The inspect view of a payload segment (SPEC 2): what `hpref frame inspect` prints and
// hpref.codec.inspect returns.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hpref/codec.hpp"

namespace hpref {

// Human-readable layout: the header, then each item's key and its schema tree with
// dtype, shape, offset and size. Decodes first, so a bad segment throws its error.
// The view is counted first and refused (Error output_limit) past `max_output_bytes`.
std::string inspect_segment(std::span<const std::uint8_t> segment,
                            const DecodeOptions& options = {},
                            std::uint64_t max_output_bytes = std::uint64_t{1} << 30);

}  // namespace hpref
