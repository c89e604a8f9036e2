// Fuzz target pickle_read: arbitrary bytes as a metadata pickle (SPEC 2.3).
// Checks: the reader refuses only with hpref::Error; what it returns respects the limits
// (depth, nodes) and never holds a tensor; the golden writer writes it, the reader reads
// that back equal, and writing again gives the same bytes. A second read with tight
// limits (depth 4, memo 8, nodes 64, stack 16) and the key-class shim off accepts a subset,
// with equal values, and refuses the rest only with a limit or global error. A third read
// with the default key class in the values state (SPEC 1.4) agrees with the default read
// whenever both accept (a key object's BUILD state is a dict or a list, never both). Peak
// RSS stays within a multiple of the input (RssBound, SPEC 2.4).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_check.hpp"
#include "hpref/pickle.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

PickleReadOptions tight_options() {
  PickleReadOptions o;
  o.limits.max_depth = 4;
  o.limits.max_memo_entries = 8;
  o.limits.max_nodes = 64;
  o.limits.max_stack = 16;
  o.key_class = KeyClass{};
  return o;
}

PickleReadOptions values_state_options() {
  PickleReadOptions o;
  o.key_class.state = KeyClass::State::values;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RssBound rss("pickle_read", size);
  std::span<const std::uint8_t> bytes(data, size);
  static const PickleReadOptions kDefault;
  static const PickleReadOptions kTight = tight_options();
  static const PickleReadOptions kValues = values_state_options();

  auto value = attempt("read_pickle", [&] { return read_pickle(bytes, kDefault); });
  auto tight = attempt("read_pickle(tight)", [&] { return read_pickle(bytes, kTight); });

  auto values = attempt("read_pickle(values state)", [&] { return read_pickle(bytes, kValues); });
  if (values && value) {
    HPREF_FUZZ_REQUIRE(*values.value == *value.value, "dict-state and values-state reads disagree");
  }
  if (tight) {
    HPREF_FUZZ_REQUIRE(
        value, "tight limits accepted what default limits refused with " + kind_text(value.error));
    HPREF_FUZZ_REQUIRE(*tight.value == *value.value, "tight and default reads disagree");
    HPREF_FUZZ_REQUIRE(tight.value->depth() <= 4 && tight.value->node_count() <= 64,
                       "a tight read returned a value over its limits");
  } else if (value) {
    Errc e = *tight.error;
    HPREF_FUZZ_REQUIRE(
        e == Errc::pickle_depth_limit || e == Errc::pickle_memo_limit ||
            e == Errc::pickle_node_limit || e == Errc::pickle_stack_limit ||
            e == Errc::pickle_global,
        "a readable pickle was refused under tight limits with " + kind_text(tight.error));
  }
  if (!value) return 0;
  const Value& v = *value.value;
  HPREF_FUZZ_REQUIRE(v.depth() <= kDefault.limits.max_depth, "read a value over the depth limit");
  HPREF_FUZZ_REQUIRE(v.node_count() <= kDefault.limits.max_nodes,
                     "read a value over the node limit");
  HPREF_FUZZ_REQUIRE(!holds_tensor(v), "read_pickle produced a tensor");
  if (!small_enough(v)) return 0;

  auto written = attempt("write_pickle", [&] { return write_pickle(v); });
  HPREF_FUZZ_REQUIRE(written, "write_pickle refused a value read_pickle produced (" +
                                  kind_text(written.error) + "): " + repr(v));
  auto again =
      attempt("read_pickle(written)", [&] { return read_pickle(*written.value, kDefault); });
  HPREF_FUZZ_REQUIRE(again, "read_pickle refused the golden writer's bytes (" +
                                kind_text(again.error) + ") for " + repr(v));
  HPREF_FUZZ_REQUIRE(*again.value == v,
                     "read(write(v)) != v: " + repr(v) + " vs " + repr(*again.value));
  auto rewritten = attempt("write_pickle(again)", [&] { return write_pickle(*again.value); });
  HPREF_FUZZ_REQUIRE(rewritten && *rewritten.value == *written.value,
                     "the golden writer is not deterministic for " + repr(v));
  return 0;
}
