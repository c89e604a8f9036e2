// SHA-256 (FIPS 180-4), for the stable fingerprints of topologies and batch specs that
// ranks compare (SPEC 3.1, 6.1). Not for security.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hpref {

std::array<std::uint8_t, 32> sha256(std::string_view data);
// Lowercase hex of sha256(data).
std::string sha256_hex(std::string_view data);

}  // namespace hpref
