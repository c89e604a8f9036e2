// Fuzz target json_value: arbitrary text as the CLI's JSON interchange (items and Values).
// Checks: parse_json / items_from_json / value_from_json refuse only with hpref::Error;
// what they accept is written by items_to_json / value_to_json + dump_json as text that
// parses back to an equal result (NaN payloads aside: JSON writes "nan") and is a fixed
// point of the writer; and the Values reach the codec: items encode and decode back equal
// (SPEC 2.6), Values without tensors go through the golden pickle writer and reader.
// The CLI's streaming writer and size guard (`frame decode`: items_json_size, then
// write_items_json, tools/src/main.cpp) agree with the tree writer: write_items_json's text
// is dump_json(items_to_json(items)), and items_json_size / value_json_size give its length
// under a cap of exactly that length and refuse (output_limit) one byte less.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "hpref/cli/json_value.hpp"
#include "hpref/pickle.hpp"

using namespace hpref;
using namespace hpref::fuzz;
namespace cli = hpref::cli;

namespace {

// `size` (items_json_size or value_json_size under a cap) against the written text's length.
template <class Size>
void check_json_size(const char* what, const std::string& text, Size&& size) {
  auto exact = attempt(what, [&] { return size(text.size()); });
  HPREF_FUZZ_REQUIRE(exact && *exact.value == text.size(),
                     std::string(what) + " under a cap of the text's length gave " +
                         (exact ? std::to_string(*exact.value) : kind_text(exact.error)) +
                         ", the text has " + std::to_string(text.size()) + " bytes");
  if (text.empty()) return;
  auto under = attempt(what, [&] { return size(text.size() - 1); });
  HPREF_FUZZ_REQUIRE(!under && *under.error == Errc::output_limit,
                     std::string(what) +
                         " did not refuse a cap one byte short with output_limit (" +
                         kind_text(under.error) + ")");
}

void check_items(const cli::Json& j) {
  auto items = attempt("items_from_json", [&] { return cli::items_from_json(j); });
  if (!items) return;
  auto text =
      attempt("items_to_json", [&] { return cli::dump_json(cli::items_to_json(*items.value)); });
  HPREF_FUZZ_REQUIRE(text, "items_to_json refused items it read (" + kind_text(text.error) + ")");
  auto parsed = attempt("parse_json(written items)", [&] { return cli::parse_json(*text.value); });
  HPREF_FUZZ_REQUIRE(parsed, "the JSON writer's text does not parse: " + *text.value);
  auto back =
      attempt("items_from_json(written)", [&] { return cli::items_from_json(*parsed.value); });
  HPREF_FUZZ_REQUIRE(
      back, "written items do not read back (" + kind_text(back.error) + "): " + *text.value);
  HPREF_FUZZ_REQUIRE(items_equal_nan_blind(*back.value, *items.value),
                     "items -> JSON -> items changed them: " + *text.value);
  HPREF_FUZZ_REQUIRE(cli::dump_json(cli::items_to_json(*back.value)) == *text.value,
                     "the JSON writer is not a fixed point for " + *text.value);
  std::ostringstream streamed;
  auto wrote = attempt("write_items_json", [&] {
    cli::write_items_json(streamed, *items.value);
    return true;
  });
  HPREF_FUZZ_REQUIRE(wrote, "write_items_json refused items (" + kind_text(wrote.error) + ")");
  HPREF_FUZZ_REQUIRE(streamed.str() == *text.value,
                     "write_items_json wrote " + streamed.str() + ", items_to_json " + *text.value);
  check_json_size("items_json_size", *text.value,
                  [&](std::uint64_t cap) { return cli::items_json_size(*items.value, cap); });
  if (small_enough(*items.value)) check_encode_round_trip(*items.value, {Errc::depth_limit});
}

void check_value(const cli::Json& j) {
  auto value = attempt("value_from_json", [&] { return cli::value_from_json(j); });
  if (!value) return;
  const Value& v = *value.value;
  auto text = attempt("value_to_json", [&] { return cli::dump_json(cli::value_to_json(v)); });
  HPREF_FUZZ_REQUIRE(text, "value_to_json refused a Value it read (" + kind_text(text.error) + ")");
  auto parsed = attempt("parse_json(written value)", [&] { return cli::parse_json(*text.value); });
  HPREF_FUZZ_REQUIRE(parsed, "the JSON writer's text does not parse: " + *text.value);
  auto back =
      attempt("value_from_json(written)", [&] { return cli::value_from_json(*parsed.value); });
  HPREF_FUZZ_REQUIRE(
      back, "a written Value does not read back (" + kind_text(back.error) + "): " + *text.value);
  HPREF_FUZZ_REQUIRE(equal_nan_blind(*back.value, v),
                     "Value -> JSON -> Value changed it: " + *text.value);
  HPREF_FUZZ_REQUIRE(cli::dump_json(cli::value_to_json(*back.value)) == *text.value,
                     "the JSON writer is not a fixed point for " + *text.value);
  check_json_size("value_json_size", *text.value,
                  [&](std::uint64_t cap) { return cli::value_json_size(v, cap); });

  if (!small_enough(v)) return;
  auto pickled = attempt("write_pickle", [&] { return write_pickle(v); });
  // SPEC 2.3, whatever encodes decodes: the writer refuses a Value deeper than the
  // reader's limit (depth_limit) and one holding a tensor, and nothing else.
  bool too_deep = v.depth() > PickleLimits{}.max_depth;
  if (!pickled) {
    HPREF_FUZZ_REQUIRE(too_deep ? *pickled.error == Errc::depth_limit
                                : *pickled.error == Errc::pickle_unwritable && holds_tensor(v),
                       "write_pickle refused a Value with " + kind_text(pickled.error));
    return;
  }
  HPREF_FUZZ_REQUIRE(!too_deep, "write_pickle wrote a Value its reader refuses for depth");
  HPREF_FUZZ_REQUIRE(!holds_tensor(v), "write_pickle wrote a tensor");
  auto read = attempt("read_pickle(written)", [&] { return read_pickle(*pickled.value); });
  HPREF_FUZZ_REQUIRE(read, "read_pickle refused the golden writer's bytes with " +
                               kind_text(read.error) + " for " + *text.value);
  HPREF_FUZZ_REQUIRE(*read.value == v, "read(write(v)) != v for " + *text.value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RssBound rss("json_value", size);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = attempt("parse_json", [&] { return cli::parse_json(text); });
  if (!json) return 0;
  check_items(*json.value);
  check_value(*json.value);
  return 0;
}
