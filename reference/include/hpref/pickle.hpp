// The metadata pickle (SPEC 2.3): a strict subset of Python's pickle that builds plain
// Values and never runs code. The reader accepts what CPython's pickle.dumps writes at
// protocols 2-5 for Value types; the writer produces fixed "golden" bytes (PROTO 5, no
// FRAME, no memo) that CPython's pickle.loads reads back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "hpref/sample_key.hpp"
#include "hpref/value.hpp"

namespace hpref {

// Limits, checked before allocating (SPEC 2.3).
struct PickleLimits {
  int max_depth = 256;                       // container levels of the result
  std::uint64_t max_memo_entries = 1u << 20;  // distinct memo slots
  std::uint64_t max_nodes = 16u << 20;        // nodes as if memo references were copied
  std::uint64_t max_stack = 1u << 20;         // stack entries at once (items and MARKs)
};

struct PickleReadOptions {
  PickleLimits limits;
  // SPEC 1.4 shim: the one "module.Name" whose NEWOBJ + BUILD pattern decodes to the
  // 2-tuple (sample_id, position). Empty turns the shim off.
  std::string key_class = std::string(kDefaultKeyClass);
};

// Splits a key class "<module>.<Name>" (SPEC 1.4) at its last dot into module and name;
// refuses (invalid_argument, naming it) a name without a dot or with an empty part.
std::pair<std::string_view, std::string_view> split_key_class(std::string_view key_class);

// Reads one pickle that must span all of `data`. Throws hpref::Error (kinds pickle_*)
// naming the refused opcode, global or value.
Value read_pickle(std::span<const std::uint8_t> data, const PickleReadOptions& options = {});
Value read_pickle(std::string_view data, const PickleReadOptions& options = {});

// A streaming writer of the golden form. Appends to `out`. It refuses what the reader
// would refuse under the same `limits` (SPEC 2.3: whatever encodes decodes): a stack of
// more than max_stack entries (Error pickle_stack_limit); write_pickle also refuses a Value
// deeper than max_depth (Error depth_limit).
class PickleWriter {
 public:
  explicit PickleWriter(std::string& out, const PickleLimits& limits = {})
      : out_(out), max_stack_(limits.max_stack) {}

  void begin();  // PROTO 5
  void end();    // STOP

  // A whole Value. Tensors cannot be written (Error pickle_unwritable): segments carry
  // them in the binary region.
  void value(const Value& v);

  void none();
  void boolean(bool b);
  void integer(std::int64_t i);
  void floating(double d);
  void str(std::string_view utf8);
  void bytes(std::string_view data);
  void bytearray(std::string_view data);
  // A tuple of n items is written begin_tuple(n), the n items, end_tuple(n).
  void begin_tuple(std::size_t n);
  void end_tuple(std::size_t n);
  // The SPEC 1.4 key-class object pattern for `key`, under class `key_class`.
  void key_object(const SampleKey& key, std::string_view key_class);

 private:
  void opcode(std::uint8_t op) { out_.push_back(static_cast<char>(op)); }
  // The reader's stack, mirrored: an opcode that pushes, one that pops n entries.
  void pushes();
  void pops(std::size_t n) noexcept { height_ -= n; }
  void length_prefixed(std::uint8_t op1, std::uint8_t op4, std::uint8_t op8,
                       std::string_view data);
  std::string& out_;
  std::uint64_t max_stack_;
  std::uint64_t height_ = 0;
};

// PROTO 5, the value, STOP. Refuses (depth_limit, pickle_stack_limit) a Value that
// read_pickle with these limits would refuse for its depth or stack.
std::string write_pickle(const Value& v, const PickleLimits& limits = {});

// The name of a pickle opcode byte ("BINGET", "REDUCE"), or "" if none has that byte.
std::string_view pickle_opcode_name(std::uint8_t op) noexcept;

}  // namespace hpref
