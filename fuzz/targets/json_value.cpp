// Fuzz target json_value: arbitrary text as the CLI's JSON interchange (items and Values).
// Checks: parse_json / items_from_json / value_from_json refuse only with hpref::Error;
// what they accept is written by items_to_json / value_to_json + dump_json as text that
// parses back to an equal result (NaN payloads aside: JSON writes "nan") and is a fixed
// point of the writer; and the Values reach the codec: items encode and decode back equal
// (SPEC 2.6), Values without tensors go through the golden pickle writer and reader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "hpref/cli/json_value.hpp"
#include "hpref/pickle.hpp"

using namespace hpref;
using namespace hpref::fuzz;
namespace cli = hpref::cli;

namespace {

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
