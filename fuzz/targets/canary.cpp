// Fuzz target canary (a negative target, like s2n-tls's *_negative): it hides a planted
// heap-buffer-overflow behind the segment magic "HPB1" and one more byte, which libFuzzer's
// comparison tracing finds within seconds. ctest's fuzz.canary passes only if the fuzzer
// does find it, proving that instrumentation, the sanitizers and the crash reporting work.
// Never replayed on a crashing input; its corpus holds near misses only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "hpref/codec.hpp"
#include "hpref/error.hpp"

namespace {

constexpr std::uint8_t kPlantedByte = 0xC5;

// Keeps the compiler from proving the planted read away.
volatile std::uint8_t g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Pass through the library first, as a real target would.
  try {
    (void)hpref::read_segment_header(std::span<const std::uint8_t>(data, size));
  } catch (const hpref::Error&) {
  }
  if (size >= 5 && std::memcmp(data, "HPB1", 4) == 0 && data[4] == kPlantedByte) {
    // The planted bug: read one byte past the input (ASan: heap-buffer-overflow), then
    // abort for builds without AddressSanitizer.
    g_sink = data[size];
    std::abort();
  }
  return 0;
}
