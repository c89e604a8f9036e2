// The hpref command: frame, route, sim, demo, verify.
// Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input, 3-6 simulator failure classes.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <span>

#include "cluster_demo.hpp"
#include "hpref/cli/batch.hpp"
#include "hpref/cli/demo.hpp"
#include "hpref/cli/frame.hpp"
#include "hpref/cli/integer_option.hpp"
#include "hpref/cli/route.hpp"
#include "hpref/cli/text_option.hpp"
#include "hpref/cli/verify.hpp"
#include "hpref/error.hpp"
#include "hpref/version.hpp"
#include "sim_command.hpp"

namespace {

using hpref::Errc;
using hpref::Error;
namespace cli = hpref::cli;
using hpref::cli::integer_of;
using hpref::cli::non_empty;

constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;

// After a failed parse: the first word that names no subcommand where one was expected, or
// the first option that no command on the way knows (`hpref --bogus`, which CLI11 reports
// as a missing subcommand); empty when neither.
std::string unknown_word(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "hpref";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") return {};
    auto subs = cur->get_subcommands([](CLI::App*) { return true; });
    if (arg.size() > 1 && arg[0] == '-') {
      std::string name = arg.substr(0, arg.find('='));
      if (name.size() > 2 && name[1] != '-') name.resize(2);  // -ofile
      const CLI::Option* opt = cur->get_option_no_throw(name);
      bool number = std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.';  // -5
      if (opt == nullptr && !number) return path + ": unknown option '" + arg + "'";
      if (opt != nullptr && opt->get_expected_min() > 0 && name.size() == arg.size()) ++i;
      continue;
    }
    if (subs.empty()) continue;  // a positional argument
    CLI::App* next = nullptr;
    for (CLI::App* sub : subs) {
      if (sub->check_name(arg)) next = sub;
    }
    if (next == nullptr) {
      auto positional = cur->get_options([](const CLI::Option* o) { return o->get_positional(); });
      if (!positional.empty()) continue;
      std::string known;
      for (CLI::App* sub : subs) known += (known.empty() ? "" : ", ") + sub->get_name();
      return path + ": unknown command '" + arg + "' (commands: " + known + ")";
    }
    cur = next;
    path += " " + next->get_name();
  }
  return {};
}

// Whether a failed command line asked for --json from a command that promises JSON
// whatever happens (`json_commands`): its usage error is then a JSON object too. The last
// --json or --json=V decides, V read as CLI11 reads a flag's value (true, false, 1, 0, yes,
// no, on, off...), as the parsed flag would be; a V CLI11 refuses asks for nothing.
bool json_requested(std::initializer_list<const CLI::App*> json_commands, int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json") {
      asked = true;
    } else if (arg.starts_with("--json=")) {
      bool value = false;
      asked = CLI::detail::lexical_cast(std::string(arg.substr(7)), value) && value;
    }
  }
  if (!asked) return false;
  for (const CLI::App* command : json_commands) {
    if (command->parsed()) return true;
  }
  return false;
}

// The one line of an error that ended a command: "hpref: error [kind]: message"; returns
// its exit code (an exception other than hpref::Error is an internal one, exit 1).
// The line is written at once (one write): under mpirun every rank may report, and lines
// written in pieces interleaved ("hpref: error [hpref: error [...").
int report_error(const std::exception& e, std::string_view after = {}) {
  const auto* error = dynamic_cast<const Error*>(&e);
  std::string text = "hpref: error [";
  text += error != nullptr ? error->kind() : "internal";
  text = text + "]: " + e.what() + "\n";
  text += after;
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  return cli::exit_code_for(e);
}

// Everything `f` holds; Error io naming `name` when it cannot be read (a directory, a
// closed stdin): never an empty input instead.
std::string read_all(std::FILE* f, const std::string& name) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    std::size_t n = std::fread(buf, 1, sizeof buf, f);
    text.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f) != 0)
    throw Error(Errc::io, "cannot read " + name + ": " + std::strerror(errno));
  return text;
}

std::string read_input(const std::string& path) {
  if (path == "-") return read_all(stdin, "stdin");
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    throw Error(Errc::io, "cannot open input file '" + path + "': " + std::strerror(errno));
  }
  return read_all(f.get(), "input file '" + path + "'");
}

// Every command's stdout ends here (and frame's binary output before it returns): Error
// io when anything written to stdout was lost (a full disk, /dev/full, a closed pipe).
void flush_stdout() {
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
    throw Error(Errc::io, "cannot write to stdout");
}

// Error io: "cannot open output file 'PATH': REASON" (`what` open or write), the reason
// errno's when the stream's failure set one.
Error output_error(const char* what, const std::string& path) {
  int saved = errno;
  return Error(Errc::io, std::string("cannot ") + what + " output file '" + path + "'" +
                             (saved != 0 ? std::string(": ") + std::strerror(saved) : ""));
}

void write_output(const std::string& path, std::string_view data, bool binary) {
  if (path == "-") {
    if (binary && isatty(STDOUT_FILENO)) {
      throw Error(Errc::invalid_argument,
                  "refusing to write binary segment bytes to a terminal; use -o FILE or --hex");
    }
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    flush_stdout();
    return;
  }
  errno = 0;
  std::ofstream out(path, std::ios::binary);
  if (!out) throw output_error("open", path);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) throw output_error("write", path);
}

std::vector<std::uint8_t> segment_bytes(const std::string& text, bool hex) {
  if (!hex) return {text.begin(), text.end()};
  // Whitespace is skipped; a bad character is named where it is in the input, not in the
  // digits left once the whitespace is gone.
  std::string digits;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) continue;
    if (!std::isxdigit(c)) {
      char shown[16];
      std::snprintf(shown, sizeof shown, std::isprint(c) ? "'%c'" : "byte 0x%02x", c);
      throw Error(Errc::json_value, std::string("--hex input has ") + shown + " at offset " +
                                        std::to_string(i) + " (hex digits and whitespace only)");
    }
    digits.push_back(static_cast<char>(c));
  }
  if (digits.size() % 2 != 0) {
    throw Error(Errc::json_value, "--hex input has an odd number of hex digits (" +
                                      std::to_string(digits.size()) + "): the last byte is half");
  }
  return cli::from_hex(digits);
}

// A batch answers every line; it exits 2 when any line was refused (saying how many on
// stderr), or 0 with --keep-going.
int run_batch_command(const cli::RequestHandler& handle, bool keep_going) {
  cli::BatchCounts counts = cli::run_batch(std::cin, std::cout, handle);
  // std::cin reads stdin through stdio: a read error ends its lines like the end of input.
  if (std::ferror(stdin) != 0)
    throw Error(Errc::io, std::string("cannot read stdin: ") + std::strerror(errno));
  if (counts.refused == 0) return 0;
  std::cerr << "hpref: " << counts.refused << " of " << counts.answered
            << " batch lines were refused (ok:false)"
            << (keep_going ? "; --keep-going: exit 0" : "; exit 2 (--keep-going exits 0)") << "\n";
  return keep_going ? 0 : kExitBadInput;
}

struct FrameArgs {
  std::string input = "-";
  std::string output = "-";
  bool hex = false;
  bool strict = false;
  std::string key_class;
  std::string key_fields;  // "a,b,c"; empty: sample_id,position
  std::string key_state;   // "dict" or "values"; empty: dict
  bool batch = false;
  bool keep_going = false;
  std::uint64_t max_output_bytes = cli::kDefaultMaxOutputBytes;
};

// SPEC 1.4: --key-class NAME --key-fields a,b,c --key-state dict|values over `base` (the
// reader's default class when decoding, none when encoding).
hpref::KeyClass frame_key_class(const FrameArgs& a, hpref::KeyClass base) {
  if (!a.key_class.empty()) base.name = a.key_class;
  if (!a.key_fields.empty()) {
    base.fields.clear();
    for (std::size_t start = 0;;) {
      std::size_t comma = a.key_fields.find(',', start);
      base.fields.push_back(a.key_fields.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (!a.key_state.empty()) base.state = hpref::parse_key_state(a.key_state);
  base.validate();
  return base;
}

// "hpref sim: a subcommand (run, explore, list) is required", `alternative` (" or --batch")
// before "is required": the usage error of `command` run without one of its subcommands.
std::string subcommand_required(CLI::App& command, const std::string& alternative) {
  std::string path = command.get_name();
  for (const CLI::App* up = command.get_parent(); up != nullptr; up = up->get_parent())
    path = (up->get_parent() == nullptr ? std::string("hpref") : up->get_name()) + " " + path;
  if (command.get_parent() == nullptr) path = "hpref";
  std::string names;
  for (const CLI::App* sub : command.get_subcommands([](CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return path + ": a subcommand (" + names + ")" + alternative + " is required";
}

// `hpref frame` or `hpref route` alone: the usage error, then the command's help (exit 2).
int missing_subcommand(CLI::App& command, const std::string& alternative) {
  int code = report_error(Error(Errc::invalid_argument, subcommand_required(command, alternative)));
  // Its usage line as --help writes it ("Usage: hpref route", not "Usage: route").
  const CLI::App* parent = command.get_parent();
  std::cerr << command.help(parent != nullptr ? parent->get_name() : std::string());
  return code;
}

// --batch reads its requests from stdin: a subcommand beside it (`frame --batch decode
// FILE`) is refused, not ignored; so is --keep-going without --batch (it sets a batch's
// exit code and would do nothing).
void check_batch_alone(bool batch, bool keep_going, CLI::App& command) {
  if (keep_going && !batch) {
    throw Error(Errc::invalid_argument, "hpref " + command.get_name() +
                                            " --keep-going goes with --batch (it sets the exit "
                                            "code of a batch with refused lines)");
  }
  if (!batch) return;
  for (CLI::App* sub : command.get_subcommands()) {
    throw Error(Errc::invalid_argument, "hpref " + command.get_name() + " --batch reads " +
                                            "JSON requests from stdin and takes no subcommand, "
                                            "got '" +
                                            sub->get_name() + "'");
  }
}

// `frame decode`'s output, {"items": [...]}\n, refused (output_limit) when longer than `cap`.
void check_decode_output(std::span<const hpref::Item> items, std::uint64_t cap) {
  constexpr std::uint64_t kFraming = sizeof("{\"items\": }\n") - 1;
  if (cap >= kFraming) {
    try {
      cli::items_json_size(items, cap - kFraming);
      return;
    } catch (const Error& e) {
      if (e.code() != Errc::output_limit) throw;
    }
  }
  throw Error(Errc::output_limit,
              "the decoded output would be more than " + std::to_string(cap) +
                  " bytes (memo references and overlapping ranges are written out in full); "
                  "raise --max-output-bytes to allow it");
}

int run_frame(CLI::App& frame, CLI::App& encode, CLI::App& decode, CLI::App& inspect,
              const FrameArgs& a) {
  check_batch_alone(a.batch, a.keep_going, frame);
  if (a.batch)
    return run_batch_command(cli::frame_request_handler(a.max_output_bytes), a.keep_going);
  hpref::DecodeOptions dopts;
  dopts.strict = a.strict;
  if (encode.parsed()) {
    hpref::EncodeOptions eopts;
    eopts.key_class = frame_key_class(a, hpref::KeyClass{});  // refused before reading input
    cli::Json j = cli::parse_json(read_input(a.input));
    if (j.is_object() && j.contains("items")) j = j["items"];
    auto bytes = hpref::encode_segment(cli::items_from_json(j), eopts);
    if (a.hex) {
      write_output(a.output, cli::to_hex(bytes) + "\n", false);
    } else {
      write_output(a.output,
                   std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                   true);
    }
    return 0;
  }
  dopts.pickle.key_class = frame_key_class(a, dopts.pickle.key_class);
  if (decode.parsed()) {
    auto bytes = segment_bytes(read_input(a.input), a.hex);
    auto items = hpref::decode_segment(hpref::SharedBytes::adopt(std::move(bytes)), dopts);
    check_decode_output(items, a.max_output_bytes);  // Error output_limit before writing
    if (a.output == "-") {
      std::cout << "{\"items\": ";
      cli::write_items_json(std::cout, items);
      std::cout << "}\n";
      flush_stdout();
      return 0;
    }
    errno = 0;
    std::ofstream out(a.output, std::ios::binary);
    if (!out) throw output_error("open", a.output);
    out << "{\"items\": ";
    cli::write_items_json(out, items);
    out << "}\n";
    out.close();
    if (!out) throw output_error("write", a.output);
    return 0;
  }
  if (inspect.parsed()) {
    auto bytes = segment_bytes(read_input(a.input), a.hex);
    std::cout << cli::inspect_segment(bytes, dopts, a.max_output_bytes);
    flush_stdout();
    return 0;
  }
  return missing_subcommand(frame, " or --batch");
}

struct RouteArgs {
  std::int64_t local_length = 0, rank = 0, size = 0, window = 0, ratio = 0;
  std::string boundaries, intervals, owner_offsets;
  bool json = false;
  bool batch = false;
  bool keep_going = false;
};

struct RouteCommands {
  CLI::App* route;
  CLI::App* interval;
  CLI::App* window;
  CLI::App* prefix;
  CLI::App* plan_all;
  CLI::App* all_interval;
  CLI::App* all_window;
  CLI::App* all_prefix;
};

// A required option has no default: --help would show the variable's initial value
// ("--rank INT=0 REQUIRED"), which is never used. Cleared in every command.
void hide_required_defaults(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_required()) option->default_str("");
  }
  for (CLI::App* sub : app.get_subcommands({})) hide_required_defaults(*sub);
}

RouteCommands add_route_commands(CLI::App& app, RouteArgs& ra) {
  RouteCommands c{};
  c.route = app.add_subcommand("route",
                               "Sequence dispatch routes (SPEC 7): one rank's route, "
                               "the send matrix of all ranks, or JSON-lines batch");
  c.route->add_flag("--batch", ra.batch,
                    "Read JSON requests from stdin, one per line (ops interval_route, "
                    "sliding_window_route, document_prefix_route), answer one JSON line each");
  c.route->add_flag("--keep-going", ra.keep_going,
                    "With --batch: exit 0 even when some lines were refused (default: exit 2)");
  c.route->require_subcommand(0, 1);
  auto common = [&ra](CLI::App* sub, bool rank) {
    // Only plan-all interval can do without it, when it has --owner-offsets (run_route).
    bool optional = !rank && sub->get_name() == "interval";
    CLI::Option* length = sub->add_option("--local-length", ra.local_length,
                                          optional ? "Rows each rank owns (L); with "
                                                     "--owner-offsets it is not read (each "
                                                     "rank's is its owner shard's length) and "
                                                     "not needed"
                                                   : "Rows each rank owns (L)")
                              ->check(integer_of(ra.local_length));
    if (!optional)
      length->required();
    else
      length->default_str("");  // not "=0": no length is assumed
    if (rank) {
      sub->add_option("--rank", ra.rank, "This rank, 0 <= rank < P")
          ->required()
          ->check(integer_of(ra.rank));
    }
    sub->add_flag("--json", ra.json, "Print JSON (the batch answer's route) instead of a table");
  };
  auto docs = [&ra](CLI::App* sub, const char* last, std::int64_t& value, const char* help) {
    sub->add_option("--boundaries", ra.boundaries,
                    "Document boundaries, comma-separated, from 0 to L * size, e.g. 0,5,12,16")
        ->required();
    sub->add_option("--size", ra.size, "Number of context-parallel ranks (P)")
        ->required()
        ->check(integer_of(ra.size));
    sub->add_option(last, value, help)->required()->check(integer_of(value));
  };
  c.interval = c.route->add_subcommand("interval", "SPEC 7.1: a route from explicit intervals");
  c.window =
      c.route->add_subcommand("sliding-window", "SPEC 7.2: document-local sliding-window halos");
  c.prefix =
      c.route->add_subcommand("document-prefix", "SPEC 7.4: document-prefix (main KV) routes");
  c.plan_all = c.route->add_subcommand(
      "plan-all", "Every rank's route of one configuration: the P x P send matrix");
  c.plan_all->require_subcommand(1);
  c.all_interval = c.plan_all->add_subcommand("interval", "All ranks, explicit intervals");
  c.all_window = c.plan_all->add_subcommand("sliding-window", "All ranks, sliding-window halos");
  c.all_prefix = c.plan_all->add_subcommand("document-prefix", "All ranks, document prefixes");
  for (CLI::App* sub : {c.interval, c.all_interval}) {
    common(sub, sub == c.interval);
    sub->add_option("--intervals", ra.intervals,
                    "One interval per rank, start:end comma-separated, e.g. 0:7,5:10")
        ->required();
    sub->add_option("--owner-offsets", ra.owner_offsets,
                    "P+1 owner offsets, comma-separated (default p * local_length)")
        ->check(non_empty("offset list"));
  }
  // Checked as the command line is parsed, so the refusal is a usage error like the others.
  c.all_interval->final_callback([sub = c.all_interval] {
    if (sub->count("--local-length") == 0 && sub->count("--owner-offsets") == 0)
      throw CLI::RequiredError("--local-length (or --owner-offsets)");
  });
  for (CLI::App* sub : {c.window, c.all_window}) {
    common(sub, sub == c.window);
    docs(sub, "--window", ra.window, "Window length in rows (> 0)");
  }
  for (CLI::App* sub : {c.prefix, c.all_prefix}) {
    common(sub, sub == c.prefix);
    docs(sub, "--ratio", ra.ratio, "Compression ratio, 1 or 2 (SPEC 7.3)");
  }
  return c;
}

int run_route(const RouteCommands& c, const RouteArgs& ra) {
  check_batch_alone(ra.batch, ra.keep_going, *c.route);
  if (ra.batch) return run_batch_command(cli::handle_route_request, ra.keep_going);
  auto boundaries = cli::parse_int_list(ra.boundaries, "--boundaries");
  auto intervals = cli::parse_interval_list(ra.intervals);
  auto owners = cli::parse_int_list(ra.owner_offsets, "--owner-offsets");
  std::optional<std::span<const std::int64_t>> owner_span;
  if (!ra.owner_offsets.empty()) owner_span = owners;
  if (c.plan_all->parsed()) {
    std::vector<hpref::Route> routes;
    if (c.all_interval->parsed())
      routes = hpref::interval_routes(ra.local_length, intervals, owner_span);
    if (c.all_window->parsed())
      routes = hpref::sliding_window_routes(boundaries, ra.local_length, ra.size, ra.window);
    if (c.all_prefix->parsed())
      routes = hpref::document_prefix_routes(boundaries, ra.local_length, ra.size, ra.ratio);
    if (ra.json) {
      cli::Json all = cli::Json::array();
      for (const auto& r : routes) all.push_back(cli::route_to_json(r));
      std::cout << cli::dump_json(all) << "\n";
    } else {
      std::cout << cli::send_matrix_table(routes, c.all_prefix->parsed() ? ra.ratio : 0);
    }
    return 0;
  }
  hpref::Route route;
  if (c.interval->parsed())
    route = hpref::interval_route(ra.local_length, ra.rank, intervals, owner_span);
  else if (c.window->parsed())
    route = hpref::sliding_window_route(boundaries, ra.local_length, ra.size, ra.rank, ra.window);
  else if (c.prefix->parsed())
    route = hpref::document_prefix_route(boundaries, ra.local_length, ra.size, ra.rank, ra.ratio);
  else
    return missing_subcommand(*c.route, " or --batch");
  if (ra.json) {
    std::cout << cli::dump_json(cli::route_to_json(route)) << "\n";
  } else {
    std::cout << cli::route_table(route, ra.rank, c.prefix->parsed() ? ra.ratio : 0);
  }
  return 0;
}

// The command line, parsed and run; main() is its guard.
int run_hpref(int argc, char** argv) {
  CLI::App app{
      "hpref: a verification-focused reference of a distributed data plane and "
      "context-parallel sequence dispatch.\nExit codes: 0 success, 1 a check failed, "
      "2 bad usage or bad input, 3 collective mismatch, 4 deadlock, 5 peer failure, "
      "6 determinism violation (3 to 5 from hpref sim and hpref demo, 6 from hpref sim "
      "--check-determinism)."};
  app.set_version_flag("--version", std::string("hpref ") + hpref::kVersion + " (wire format " +
                                        hpref::kWireFormat + ")");
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();

  FrameArgs fa;
  auto* frame =
      app.add_subcommand("frame", "Encode, decode and inspect HPB1 payload segments (SPEC 2)");
  frame->add_flag("--batch", fa.batch,
                  "Read JSON requests from stdin, one per line (ops encode_segment, "
                  "decode_segment, decode_received, pickle_read, pickle_write), answer one "
                  "JSON line each");
  frame
      ->add_option(
          "--max-output-bytes", fa.max_output_bytes,
          "decode, inspect and --batch: refuse (exit 2, kind output_limit) output (in a batch "
          "answer, its decoded items) whose text would be longer; memo references and "
          "overlapping ranges are written out in full")
      ->check(integer_of(fa.max_output_bytes));
  frame->add_flag("--keep-going", fa.keep_going,
                  "With --batch: exit 0 even when some lines were refused (default: exit 2)");
  frame->require_subcommand(0, 1);
  auto* encode = frame->add_subcommand("encode", "JSON items [[key, value], ...] -> segment bytes");
  encode->add_option("input", fa.input, "JSON items file ('-' for stdin)");
  encode->add_option("-o,--output", fa.output, "Segment output file ('-' for stdout)");
  encode->add_flag("--hex", fa.hex, "Write the segment as lowercase hex text");
  auto* encode_key_class =
      encode
          ->add_option("--key-class", fa.key_class,
                       "Write item keys as objects of this Python class (SPEC 1.4), e.g. "
                       "hyper_parallel.distributed_data.schema.SampleKey: with the default "
                       "fields, keys that are valid SampleKeys; with --key-fields, tuples of "
                       "one value per field")
          ->check(non_empty("class name"));
  encode
      ->add_option("--key-fields", fa.key_fields,
                   "The key class's fields in order, comma-separated (default "
                   "sample_id,position)")
      ->check(non_empty("field list"))
      ->needs(encode_key_class);
  encode
      ->add_option("--key-state", fa.key_state,
                   "How the key class pickles its state: dict (a dataclass) or values (a "
                   "frozen slots=True dataclass: the list of field values); default dict")
      ->check(CLI::IsMember({"dict", "values"}))
      ->needs(encode_key_class);
  auto* decode = frame->add_subcommand("decode", "Segment bytes -> JSON {\"items\": [...]}");
  auto* inspect =
      frame->add_subcommand("inspect", "Print a segment's header, keys and schema tree");
  for (auto* sub : {decode, inspect}) {
    sub->add_option("input", fa.input, "Segment file ('-' for stdin)");
    sub->add_flag("--hex", fa.hex, "Read the segment as hex text (whitespace ignored)");
    sub->add_flag("--strict", fa.strict,
                  "Refuse binary layouts the encoder would not write (SPEC 2.4)");
    sub->add_option("--key-class", fa.key_class,
                    "Python key class whose objects are read as keys, the tuple of their field "
                    "values (SPEC 1.4); default hyper_parallel.distributed_data.schema.SampleKey")
        ->check(non_empty("class name"));
    sub->add_option("--key-fields", fa.key_fields,
                    "The key class's fields in order, comma-separated (default "
                    "sample_id,position)")
        ->check(non_empty("field list"));
    sub->add_option("--key-state", fa.key_state,
                    "How the key class pickles its state: dict (a dataclass) or values (a "
                    "frozen slots=True dataclass: the list of field values); default dict")
        ->check(CLI::IsMember({"dict", "values"}));
    sub->add_option("--max-output-bytes", fa.max_output_bytes,
                    "Refuse (exit 2, kind output_limit) output longer than this; memo references "
                    "and overlapping ranges are written out in full")
        ->check(integer_of(fa.max_output_bytes));
  }
  decode->add_option("-o,--output", fa.output, "JSON output file ('-' for stdout)");

  RouteArgs ra;
  RouteCommands rc = add_route_commands(app, ra);

  cli::SimArgs sa;
  cli::SimCommands sc = cli::add_sim_commands(app, sa);

  cli::DemoArgs da;
  auto* demo = app.add_subcommand(
      "demo",
      "The data step end to end on a simulated cluster (or under mpirun): readers, "
      "planner, payload exchange, model-parallel batch broadcast and "
      "context-parallel dispatch, every step checked against the oracle. Exit "
      "codes as hpref sim: 0 ok, 1 a check failed, 2 bad usage, 3 collective "
      "mismatch, 4 deadlock, 5 peer failure");
  demo->add_option(
          "--ranks", da.ranks,
          "Ranks: simulated (0 = 8), or the mpirun world size it must equal (0 = the world size)")
      ->check(integer_of(da.ranks))
      ->capture_default_str();
  demo->add_option("--dp", da.dp,
                   "Data-parallel replicas; the rest of the mesh is context parallel")
      ->check(integer_of(da.dp))
      ->capture_default_str();
  demo->add_option("--steps", da.steps, "Training-data steps")
      ->check(integer_of(da.steps))
      ->capture_default_str();
  demo->add_option("--seed", da.seed, "Seed of the corpus, the schedule and every choice")
      ->check(integer_of(da.seed))
      ->capture_default_str();
  demo->add_option("--window", da.window, "Sliding-window size in tokens")
      ->check(integer_of(da.window))
      ->capture_default_str();
  demo->add_option("--ratio", da.ratio, "Document-prefix compression ratio, 1 or 2")
      ->check(integer_of(da.ratio))
      ->capture_default_str();
  demo->add_option(
          "--backend", da.backend,
          "Communicator: sim, or under mpirun mpi (OpenMPI) or nccl (one GPU per rank, host "
          "groups over MPI)")
      ->capture_default_str();
  demo->add_option("--timeout-ms", da.timeout_ms, "mpi and nccl: the deadline of every wait in ms")
      ->check(integer_of(da.timeout_ms))
      ->capture_default_str();
  cli::add_demo_sim_options(*demo,
                            da);  // --turn-timeout-ms, --fault, --json, --codec (cluster_demo.cpp)

  cli::VerifyArgs va;
  CLI::App* verify = cli::add_verify_command(app, va);  // verify.cpp

  hide_required_defaults(app);

  // verify, demo, sim run and sim explore print JSON whatever happens under --json.
  auto json_commands = {static_cast<const CLI::App*>(verify), static_cast<const CLI::App*>(demo),
                        static_cast<const CLI::App*>(sc.run),
                        static_cast<const CLI::App*>(sc.explore)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version: their text must reach stdout too
      app.exit(e);
      try {
        flush_stdout();
      } catch (const Error& io) {
        return report_error(io);
      }
      return 0;
    }
    // Every usage error of the command line, CLI11's too, as the errors of a run: one
    // "hpref: error [invalid_argument]: ..." line (a JSON object as well under --json).
    std::string message = unknown_word(app, argc, argv);
    if (message.empty()) message = e.what();
    if (message == "A subcommand is required") {  // CLI11's, naming neither command nor choices
      CLI::App* command = &app;
      while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
      message = subcommand_required(*command, "");
    }
    Error usage(Errc::invalid_argument, message);
    if (json_requested(json_commands, argc, argv)) {
      cli::Json object = cli::Json::object();
      return cli::json_error(object, usage, std::cout);
    }
    report_error(usage, "Run with --help for more information.\n");
    return kExitBadInput;
  }
  // --json commands answer even an unexpected failure with their JSON object.
  bool json = va.json || da.json || ((sc.run->parsed() || sc.explore->parsed()) && sa.json);
  try {
    int code = kExitBadInput;
    if (frame->parsed()) {
      code = run_frame(*frame, *encode, *decode, *inspect, fa);
    } else if (rc.route->parsed()) {
      code = run_route(rc, ra);
    } else if (sc.sim->parsed()) {
      code = cli::run_sim(sc, sa);
    } else if (verify->parsed()) {
      code = cli::run_verify(va, std::cout);
    } else if (demo->parsed()) {
      code = da.codec ? (cli::run_codec_demo(da.seed, std::cout) == 0 ? 0 : kExitCheckFailed)
                      : cli::run_cluster_demo(da, std::cout);  // the failure classes of hpref sim
    }
    flush_stdout();
    return code;
  } catch (const std::exception& e) {
    if (json) {
      cli::Json object = cli::Json::object();
      return cli::json_error(object, e, std::cout);
    }
    return report_error(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Nothing escapes as 'terminate called': what no command caught is reported here.
  try {
    return run_hpref(argc, argv);
  } catch (const std::exception& e) {
    return report_error(e);
  } catch (...) {
    std::cerr << "hpref: error [internal]: an exception of unknown type\n";
    return kExitCheckFailed;
  }
}
