// SipHash-1-3 (Aumasson and Bernstein), the keyed hash behind key_hash and seeded_hash
// (hpref/value.hpp), which compute it under a key drawn once per process with a domain
// word mixed into v0. Exposed under a caller's key for the known-answer test.
#pragma once

#include <cstdint>
#include <string_view>

namespace hpref {

// SipHash-1-3 of `bytes` under the 128-bit key (k0, k1) (k0 holds key bytes 0-7, little-endian).
std::uint64_t siphash13(std::uint64_t k0, std::uint64_t k1, std::string_view bytes) noexcept;

}  // namespace hpref
