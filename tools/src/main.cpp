// The hpref command: frame, demo (route and sim join in later issues).
// Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <unistd.h>

#include "hpref/cli/batch.hpp"
#include "hpref/cli/demo.hpp"
#include "hpref/cli/frame.hpp"
#include "hpref/error.hpp"
#include "hpref/version.hpp"

namespace {

using hpref::Errc;
using hpref::Error;
namespace cli = hpref::cli;

constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;

std::string read_input(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, "cannot open input file '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_output(const std::string& path, std::string_view data, bool binary) {
  if (path == "-") {
    if (binary && isatty(STDOUT_FILENO)) {
      throw Error(Errc::invalid_argument,
                  "refusing to write binary segment bytes to a terminal; use -o FILE or --hex");
    }
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(Errc::io, "cannot open output file '" + path + "'");
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw Error(Errc::io, "cannot write output file '" + path + "'");
}

std::vector<std::uint8_t> segment_bytes(const std::string& text, bool hex) {
  if (!hex) return {text.begin(), text.end()};
  std::string digits;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) digits.push_back(c);
  }
  return cli::from_hex(digits);
}

struct FrameArgs {
  std::string input = "-";
  std::string output = "-";
  bool hex = false;
  bool strict = false;
  std::string key_class;
  bool batch = false;
};

int run_frame(CLI::App& frame, CLI::App& encode, CLI::App& decode, CLI::App& inspect,
              const FrameArgs& a) {
  if (a.batch) {
    cli::run_batch(std::cin, std::cout, cli::handle_frame_request);
    return 0;
  }
  hpref::DecodeOptions dopts;
  dopts.strict = a.strict;
  if (!a.key_class.empty()) dopts.pickle.key_class = a.key_class;
  if (encode.parsed()) {
    cli::Json j = cli::parse_json(read_input(a.input));
    if (j.is_object() && j.contains("items")) j = j["items"];
    hpref::EncodeOptions eopts;
    eopts.key_class = a.key_class;
    auto bytes = hpref::encode_segment(cli::items_from_json(j), eopts);
    if (a.hex) {
      write_output(a.output, cli::to_hex(bytes) + "\n", false);
    } else {
      write_output(a.output, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), true);
    }
    return 0;
  }
  if (decode.parsed()) {
    auto bytes = segment_bytes(read_input(a.input), a.hex);
    auto items = hpref::decode_segment(hpref::SharedBytes::adopt(std::move(bytes)), dopts);
    write_output(a.output, cli::dump_json(cli::Json{{"items", cli::items_to_json(items)}}) + "\n", false);
    return 0;
  }
  if (inspect.parsed()) {
    auto bytes = segment_bytes(read_input(a.input), a.hex);
    std::cout << cli::inspect_segment(bytes, dopts);
    return 0;
  }
  std::cerr << frame.help();
  return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpref: a verification-focused reference of a distributed data plane and "
               "context-parallel sequence dispatch.\nExit codes: 0 success, 1 a check failed, "
               "2 bad usage or bad input."};
  app.set_version_flag("--version", std::string("hpref ") + hpref::kVersion + " (wire format " +
                                        hpref::kWireFormat + ")");
  app.require_subcommand(1);

  FrameArgs fa;
  auto* frame = app.add_subcommand("frame", "Encode, decode and inspect HPB1 payload segments (SPEC 2)");
  frame->add_flag("--batch", fa.batch,
                  "Read JSON requests from stdin, one per line (ops encode_segment, "
                  "decode_segment, decode_received, pickle_read, pickle_write), answer one "
                  "JSON line each");
  frame->require_subcommand(0, 1);
  auto* encode = frame->add_subcommand("encode", "JSON items [[key, value], ...] -> segment bytes");
  encode->add_option("input", fa.input, "JSON items file ('-' for stdin)");
  encode->add_option("-o,--output", fa.output, "Segment output file ('-' for stdout)");
  encode->add_flag("--hex", fa.hex, "Write the segment as lowercase hex text");
  encode->add_option("--key-class", fa.key_class,
                     "Write SampleKey item keys as this Python class (SPEC 1.4), e.g. "
                     "hyper_parallel.distributed_data.schema.SampleKey");
  auto* decode = frame->add_subcommand("decode", "Segment bytes -> JSON {\"items\": [...]}");
  auto* inspect = frame->add_subcommand("inspect", "Print a segment's header, keys and schema tree");
  for (auto* sub : {decode, inspect}) {
    sub->add_option("input", fa.input, "Segment file ('-' for stdin)");
    sub->add_flag("--hex", fa.hex, "Read the segment as hex text (whitespace ignored)");
    sub->add_flag("--strict", fa.strict, "Refuse binary layouts the encoder would not write (SPEC 2.4)");
    sub->add_option("--key-class", fa.key_class, "Python key class read as a SampleKey (SPEC 1.4)");
  }
  decode->add_option("-o,--output", fa.output, "JSON output file ('-' for stdout)");

  std::uint64_t seed = 1;
  auto* demo = app.add_subcommand("demo", "Codec demonstration: encode, inspect, decode and check a realistic segment");
  demo->add_option("--seed", seed, "Seed of the synthetic samples");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  try {
    if (frame->parsed()) return run_frame(*frame, *encode, *decode, *inspect, fa);
    if (demo->parsed()) return hpref::cli::run_codec_demo(seed, std::cout) == 0 ? 0 : kExitCheckFailed;
  } catch (const Error& e) {
    std::cerr << "hpref: error [" << e.kind() << "]: " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitBadInput;
}
