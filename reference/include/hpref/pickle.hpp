// The metadata pickle (SPEC 2.3): a strict subset of Python's pickle that builds plain
// Values and never runs code. The reader accepts what CPython's pickle.dumps writes at
// protocols 2-5 for Value types; the writer produces fixed "golden" bytes (PROTO 5, no
// FRAME, a memo only for mapping-key strings and the key-class global) that CPython's
// pickle.loads reads back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "hpref/sample_key.hpp"
#include "hpref/value.hpp"

namespace hpref {

// Limits, checked before allocating (SPEC 2.3).
struct PickleLimits {
  int max_depth = 256;                        // container levels of the result
  std::uint64_t max_memo_entries = 1u << 20;  // distinct memo slots
  std::uint64_t max_nodes = 16u << 20;        // nodes as if memo references were copied
  std::uint64_t max_stack = 1u << 20;         // stack entries at once (items and MARKs)
};

struct PickleReadOptions {
  PickleLimits limits;
  // SPEC 1.4 shim: the one key class whose NEWOBJ + BUILD pattern decodes to the tuple of
  // its field values in field order (default: the original's SampleKey, whose pattern
  // decodes to the 2-tuple (sample_id, position)). An empty name turns the shim off.
  // Checked (KeyClass::validate) before any byte is read.
  KeyClass key_class = KeyClass(kDefaultKeyClass);
};

// Splits a key class "<module>.<Name>" (SPEC 1.4) at its last dot into module and name;
// refuses (invalid_argument, naming it) a name that KeyClass::validate refuses.
std::pair<std::string_view, std::string_view> split_key_class(std::string_view key_class);

// Reads one pickle that must span all of `data`. Throws hpref::Error (kinds pickle_*)
// naming the refused opcode, global or value.
Value read_pickle(std::span<const std::uint8_t> data, const PickleReadOptions& options = {});
Value read_pickle(std::string_view data, const PickleReadOptions& options = {});

// A streaming writer of the golden form. Appends to `out` (in pieces: all of it once end()
// returns). It refuses what the reader would refuse under the same `limits` (SPEC 2.3:
// whatever encodes decodes): a stack of more than max_stack entries (Error
// pickle_stack_limit); write_pickle also refuses a Value deeper than max_depth (Error
// depth_limit).
//
// The memo (SPEC 2.3, revised by issue 15): a str used as a mapping key (mapping_key, and
// the keys of every mapping value() writes) and the key-class global (key_object) are
// followed by MEMOIZE at their first occurrence and written as BINGET (index < 256) or
// LONG_BINGET at every later one; strs compare by value, globals by dotted name, indices
// count from 0 in order of first occurrence across both. Nothing else is memoized. At most
// limits.max_memo_entries entries are made (the reader's limit): a new key past that is
// written in full without MEMOIZE (ours; no segment reaches it short of a mapping of 1 Mi
// distinct keys). The memo lives as long as the writer: one writer, one pickle.
class PickleWriter {
 public:
  explicit PickleWriter(std::string& out, const PickleLimits& limits = {})
      : out_(out), max_stack_(limits.max_stack), max_memo_(limits.max_memo_entries) {}

  void begin();  // PROTO 5
  void end();    // STOP; then all the bytes are in `out`

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
  // A mapping key: a str through the memo (above), any other key as value(key). value()
  // writes a mapping's keys with it; the segment encoder also writes the keys of a framed
  // __hp_mapping__ node's (key, child) pairs with it (SPEC 2.2: a user mapping's keys).
  void mapping_key(const Value& key);
  // The SPEC 1.4 key-class object pattern of `key_class` (validated: invalid_argument)
  // for a key whose field values, in field order, are the items of the tuple `key`
  // (invalid_argument unless it has exactly one per field): the class by STACK_GLOBAL
  // then MEMOIZE the first time, by BINGET/LONG_BINGET of that entry later; EMPTY_TUPLE,
  // NEWOBJ, BUILD with a dict {field: value} in field order (dict state) or the list of
  // the values (values state), each container in the batches value() writes, field names
  // never memoized — the bytes CPython's protocol-5 pickler writes for that object in fast
  // mode (no memo), FRAMEs cut, but for the class's memo entry.
  void key_object(const Value& key, const KeyClass& key_class);
  void key_object(const SampleKey& key, const KeyClass& key_class) {
    key_object(key.to_value(), key_class);
  }

  // Memo entries made so far (the next MEMOIZE's index).
  std::uint64_t memo_size() const noexcept { return memo_size_; }

 private:
  // Hashes text with the process's keyed hash (SPEC 2.3 "Hashing"), looked up by view.
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return seeded_hash(s); }
  };
  using MemoTable = std::unordered_map<std::string, std::uint64_t, TextHash, std::equal_to<>>;

  // Bytes are gathered in buf_ and appended to out_ a piece at a time: small appends to a
  // string are each a call, and most of a pickle is opcodes of 1-9 bytes.
  static constexpr std::size_t kBufferBytes = 1024;  // at most this much before a flush
  static constexpr std::size_t kSlackBytes = 32;     // free after room()
  void flush();
  // Where the next bytes go: at least kSlackBytes free there.
  char* room() {
    if (len_ > kBufferBytes) flush();
    return buf_ + len_;
  }
  void append(std::string_view data);
  void opcode(std::uint8_t op) {
    *room() = static_cast<char>(op);
    ++len_;
  }
  // `op` then the low `n` bytes of `x`, least significant first (n <= 8).
  void opcode_le(std::uint8_t op, std::uint64_t x, std::size_t n);
  // The reader's stack, mirrored: an opcode that pushes, one that pops n entries.
  void pushes() {
    if (height_ >= max_stack_) stack_full();
    ++height_;
  }
  [[noreturn]] void stack_full() const;
  void pops(std::size_t n) noexcept { height_ -= n; }
  // BINGET/LONG_BINGET of `name`'s entry in `table` if it has one, else `write()` then
  // MEMOIZE (memoize below); the entry's index either way (none: the memo is full).
  template <typename Write>
  std::optional<std::uint64_t> memo_or(MemoTable& table, std::string_view name, Write&& write);
  // BINGET/LONG_BINGET of memo entry `index`.
  void get(std::uint64_t index);
  // MEMOIZE the object on top of the stack as `name`'s entry in `table` and return its
  // index, unless the memo is full (then nothing is written).
  std::optional<std::uint64_t> memoize(MemoTable& table, std::string_view name);
  // EMPTY_LIST / EMPTY_DICT, then `n` items (`item(i)` writes item i, pushing `per_item`
  // entries) in batches of at most 1000: APPEND/SETITEM for one, MARK ... APPENDS/SETITEMS.
  template <typename WriteItem>
  void batched(std::uint8_t empty_op, std::uint8_t one_op, std::uint8_t many_op, std::size_t n,
               std::size_t per_item, WriteItem&& item);
  void length_prefixed(std::uint8_t op1, std::uint8_t op4, std::uint8_t op8, std::string_view data);
  std::string& out_;
  char buf_[kBufferBytes + kSlackBytes + 1];
  std::size_t len_ = 0;
  std::uint64_t max_stack_;
  std::uint64_t height_ = 0;
  std::uint64_t max_memo_;
  std::uint64_t memo_size_ = 0;
  MemoTable memo_keys_;  // mapping-key strs by value
  // A direct-mapped front of memo_keys_ for keys of at most 16 bytes, each held whole
  // (bytes, zero-padded, and length), so that a repeated short key costs no hash.
  struct ShortKey {
    std::uint64_t bytes[2] = {0, 0};
    std::uint64_t length = ~std::uint64_t{0};            // none
    std::uint64_t index = 0;                             // its memo entry
    static ShortKey of(std::string_view text) noexcept;  // text of at most 16 bytes
    std::size_t slot() const noexcept {
      // Any spread will do: a collision only sends a key to the table (no worst case).
      std::uint64_t mix =
          (bytes[0] ^ ((bytes[1] << 29) | (bytes[1] >> 35)) ^ length) * 0x9e3779b97f4a7c15u;
      return static_cast<std::size_t>(mix >> 58);  // 64 slots
    }
    bool same(const ShortKey& o) const noexcept {
      return length == o.length && bytes[0] == o.bytes[0] && bytes[1] == o.bytes[1];
    }
  };
  std::array<ShortKey, 64> short_keys_{};
  MemoTable memo_globals_;      // key-class globals by dotted name
  KeyClass checked_key_class_;  // the last key class key_object validated
};

// PROTO 5, the value, STOP. Refuses (depth_limit, pickle_stack_limit) a Value that
// read_pickle with these limits would refuse for its depth or stack.
std::string write_pickle(const Value& v, const PickleLimits& limits = {});

// The name of a pickle opcode byte ("BINGET", "REDUCE"), or "" if none has that byte.
std::string_view pickle_opcode_name(std::uint8_t op) noexcept;

}  // namespace hpref
