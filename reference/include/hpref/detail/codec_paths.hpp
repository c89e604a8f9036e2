// Internal: the two decoders behind decode_segment (hpref/codec.hpp), exposed so that the
// differential tests and fuzz targets can compare them. Not for users.
#pragma once

#include <optional>
#include <vector>

#include "hpref/codec.hpp"

namespace hpref::detail {

// The general decoder: the metadata pickle read into a Value tree (read_pickle), then the
// schema walked. Every refusal of SPEC 2.4 comes from here, with its kind and message.
std::vector<Item> decode_segment_general(const SharedBytes& segment, const DecodeOptions& options);

// The single-pass fast path for framed segments in the forms our writer produces: the items
// the general decoder would return, or nullopt for anything it does not fully understand
// (any refusal included). It never throws hpref::Error itself.
std::optional<std::vector<Item>> decode_segment_fast(const SharedBytes& segment,
                                                     const DecodeOptions& options);

}  // namespace hpref::detail
