// Corpus replay without libFuzzer: calls LLVMFuzzerTestOneInput once on every file named
// on the command line (directories recursively, in sorted order), so every target also
// builds with g++ and every checked-in corpus file runs under ctest (label fuzz-replay).
// A failed check aborts inside the target; this driver prints the file first.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_of(const fs::path& arg) {
  std::vector<fs::path> out;
  if (fs::is_directory(arg)) {
    for (const auto& entry : fs::recursive_directory_iterator(arg)) {
      if (entry.is_regular_file()) out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
  } else if (fs::is_regular_file(arg)) {
    out.push_back(arg);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files = inputs_of(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "replay: %s: no such file, or a directory without files\n", argv[i]);
      return 2;
    }
    for (const fs::path& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
        return 2;
      }
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                      std::istreambuf_iterator<char>());
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      // A heap copy of exactly the input's size, as libFuzzer passes it, so a sanitizer
      // build catches reads past the end.
      auto* copy = new std::uint8_t[bytes.size()];
      std::copy(bytes.begin(), bytes.end(), copy);
      LLVMFuzzerTestOneInput(copy, bytes.size());
      delete[] copy;
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::printf("replay: %zu inputs, all passed\n", replayed);
  return 0;
}
