// `hpref demo`: until the simulated cluster demo exists, a codec demonstration: a
// realistic segment is built, inspected, decoded and checked equal to the original.
#pragma once

#include <cstdint>
#include <iosfwd>

namespace hpref::cli {

// Returns the exit status: 0 when the decoded items equal the originals, else 1.
int run_codec_demo(std::uint64_t seed, std::ostream& out);

}  // namespace hpref::cli
