// The golden pickle writer of SPEC 2.3: PROTO 5, no FRAME, the smallest integer and length
// opcodes, batches of at most 1000 for lists and dicts, the SPEC 1.4 key-class object
// pattern, and a memo for mapping-key strs and the key-class global only (issue 15).
#include <bit>
#include <cstring>
#include <optional>

#include "hpref/error.hpp"
#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"
#include "pickle_opcodes.hpp"

namespace hpref {
namespace {

constexpr std::size_t kBatchSize = 1000;

static_assert(std::endian::native == std::endian::little, "the writer stores words as they lie");

// n <= 32 bytes from `from` to `to` by two overlapping fixed-size copies each (no call, as a
// memcpy of a size known only at run time is).
void copy_small(char* to, const char* from, std::size_t n) noexcept {
  if (n >= 16) {
    std::memcpy(to, from, 16);
    std::memcpy(to + n - 16, from + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(to, from, 8);
    std::memcpy(to + n - 8, from + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + n - 4, from + n - 4, 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) to[i] = from[i];
  }
}

// Bytes in the minimal two's-complement form of x (1..8).
int signed_byte_count(std::int64_t x) {
  for (int n = 1; n < 8; ++n) {
    std::int64_t lo = -(std::int64_t{1} << (8 * n - 1));
    std::int64_t hi = (std::int64_t{1} << (8 * n - 1)) - 1;
    if (x >= lo && x <= hi) return n;
  }
  return 8;
}

}  // namespace

void PickleWriter::begin() {
  opcode(op::PROTO);
  opcode(5);
}

void PickleWriter::end() {
  opcode(op::STOP);
  flush();
}

void PickleWriter::stack_full() const {
  throw Error(Errc::pickle_stack_limit,
              "cannot write pickle: its reader's stack would hold more than " +
                  std::to_string(max_stack_) +
                  " entries (items and MARKs), the SPEC 2.3 limit: a tuple that long cannot "
                  "be decoded");
}

void PickleWriter::none() {
  pushes();
  opcode(op::NONE);
}

void PickleWriter::boolean(bool b) {
  pushes();
  opcode(b ? op::NEWTRUE : op::NEWFALSE);
}

void PickleWriter::flush() {
  out_.append(buf_, len_);
  len_ = 0;
}

void PickleWriter::opcode_le(std::uint8_t op, std::uint64_t x, std::size_t n) {
  char* p = room();
  p[0] = static_cast<char>(op);
  std::memcpy(p + 1, &x, 8);  // little-endian (above): its low n bytes first
  len_ += 1 + n;
}

void PickleWriter::append(std::string_view data) {
  std::size_t n = data.size();
  if (n > kSlackBytes) {
    flush();
    out_.append(data);
    return;
  }
  copy_small(room(), data.data(), n);
  len_ += n;
}

void PickleWriter::integer(std::int64_t i) {
  pushes();
  auto u = static_cast<std::uint64_t>(i);
  if (i >= 0 && i <= 0xff) {
    opcode_le(op::BININT1, u, 1);
  } else if (i >= 0 && i <= 0xffff) {
    opcode_le(op::BININT2, u, 2);
  } else if (i >= INT32_MIN && i <= INT32_MAX) {
    opcode_le(op::BININT, u, 4);
  } else {
    auto n = static_cast<std::size_t>(signed_byte_count(i));
    opcode_le(op::LONG1, n, 1);
    append({reinterpret_cast<const char*>(&u), n});
  }
}

void PickleWriter::floating(double d) {
  pushes();
  // BINFLOAT's 8 bytes are big-endian.
  opcode_le(op::BINFLOAT, __builtin_bswap64(std::bit_cast<std::uint64_t>(d)), 8);
}

void PickleWriter::length_prefixed(std::uint8_t op1, std::uint8_t op4, std::uint8_t op8,
                                   std::string_view data) {
  pushes();
  if (op1 != 0 && data.size() < 256) {
    opcode_le(op1, data.size(), 1);
  } else if (op4 != 0 && data.size() <= 0xffffffffu) {
    opcode_le(op4, data.size(), 4);
  } else {
    opcode_le(op8, data.size(), 8);
  }
  append(data);
}

void PickleWriter::str(std::string_view utf8) {
  length_prefixed(op::SHORT_BINUNICODE, op::BINUNICODE, op::BINUNICODE8, utf8);
}

void PickleWriter::bytes(std::string_view data) {
  length_prefixed(op::SHORT_BINBYTES, op::BINBYTES, op::BINBYTES8, data);
}

void PickleWriter::bytearray(std::string_view data) { length_prefixed(0, 0, op::BYTEARRAY8, data); }

void PickleWriter::get(std::uint64_t index) {
  pushes();
  if (index < 256) {
    opcode_le(op::BINGET, index, 1);
  } else {
    opcode_le(op::LONG_BINGET, index, 4);
  }
}

template <typename Write>
std::optional<std::uint64_t> PickleWriter::memo_or(MemoTable& table, std::string_view name,
                                                   Write&& write) {
  auto it = table.find(name);
  if (it != table.end()) {
    get(it->second);
    return it->second;
  }
  write();
  return memoize(table, name);
}

std::optional<std::uint64_t> PickleWriter::memoize(MemoTable& table, std::string_view name) {
  // The reader refuses a memo of more than max_memo_ entries; LONG_BINGET's index is 4 bytes.
  if (memo_size_ >= max_memo_ || memo_size_ > 0xffffffffu) return std::nullopt;
  opcode(op::MEMOIZE);
  table.emplace(std::string(name), memo_size_);
  return memo_size_++;
}

PickleWriter::ShortKey PickleWriter::ShortKey::of(std::string_view text) noexcept {
  ShortKey k;
  auto* to = reinterpret_cast<char*>(k.bytes);  // the rest stays 0
  copy_small(to, text.data(), text.size());
  k.length = text.size();
  return k;
}

void PickleWriter::mapping_key(const Value& key) {
  if (!key.is(ValueKind::string)) {
    value(key);
    return;
  }
  std::string_view text = key.as_str();
  auto write = [&] { str(text); };
  if (text.size() > sizeof ShortKey::bytes) {
    memo_or(memo_keys_, text, write);
    return;
  }
  // A short key (most are) is looked up in the front slots first: its length and bytes
  // are compared whole, no hash of the text taken.
  ShortKey k = ShortKey::of(text);
  ShortKey& front = short_keys_[k.slot()];
  if (front.same(k)) {
    get(front.index);
    return;
  }
  if (auto index = memo_or(memo_keys_, text, write)) {
    k.index = *index;
    front = k;
  }
}

void PickleWriter::begin_tuple(std::size_t n) {
  if (n > 3) {
    pushes();
    opcode(op::MARK);
  }
}

void PickleWriter::end_tuple(std::size_t n) {
  pops(n > 3 ? n + 1 : n);
  pushes();
  switch (n) {
    case 0:
      opcode(op::EMPTY_TUPLE);
      break;
    case 1:
      opcode(op::TUPLE1);
      break;
    case 2:
      opcode(op::TUPLE2);
      break;
    case 3:
      opcode(op::TUPLE3);
      break;
    default:
      opcode(op::TUPLE);
      break;
  }
}

void PickleWriter::value(const Value& v) {
  switch (v.kind()) {
    case ValueKind::none:
      none();
      return;
    case ValueKind::boolean:
      boolean(v.as_bool());
      return;
    case ValueKind::integer:
      integer(v.as_int());
      return;
    case ValueKind::floating:
      floating(v.as_float());
      return;
    case ValueKind::string:
      str(v.as_str());
      return;
    case ValueKind::bytes:
      bytes(v.as_bytes().view());
      return;
    case ValueKind::bytearray:
      bytearray(v.as_bytes().view());
      return;
    case ValueKind::tensor:
      throw Error(Errc::pickle_unwritable,
                  "a tensor cannot be written into a metadata pickle; segments carry tensors "
                  "in their binary region");
    case ValueKind::tuple: {
      auto items = v.items();
      begin_tuple(items.size());
      for (const Value& item : items) value(item);
      end_tuple(items.size());
      return;
    }
    case ValueKind::list: {
      auto items = v.items();
      batched(op::EMPTY_LIST, op::APPEND, op::APPENDS, items.size(), 1,
              [&](std::size_t i) { value(items[i]); });
      return;
    }
    case ValueKind::mapping: {
      auto entries = v.entries();
      batched(op::EMPTY_DICT, op::SETITEM, op::SETITEMS, entries.size(), 2, [&](std::size_t i) {
        mapping_key(entries[i].first);
        value(entries[i].second);
      });
      return;
    }
  }
}

template <typename WriteItem>
void PickleWriter::batched(std::uint8_t empty_op, std::uint8_t one_op, std::uint8_t many_op,
                           std::size_t n, std::size_t per_item, WriteItem&& item) {
  pushes();
  opcode(empty_op);
  for (std::size_t start = 0; start < n; start += kBatchSize) {
    std::size_t count = std::min(kBatchSize, n - start);
    if (count > 1) {
      pushes();
      opcode(op::MARK);
    }
    for (std::size_t i = start; i < start + count; ++i) item(i);
    pops(count > 1 ? per_item * count + 1 : per_item * count);
    opcode(count > 1 ? many_op : one_op);
  }
}

std::pair<std::string_view, std::string_view> split_key_class(std::string_view key_class) {
  if (key_class.empty()) {
    throw Error(Errc::invalid_argument, "key class '' is not a dotted name <module>.<Name>");
  }
  KeyClass(key_class).validate();
  auto dot = key_class.rfind('.');
  return {key_class.substr(0, dot), key_class.substr(dot + 1)};
}

// SPEC 1.4: what CPython's protocol-5 pickler writes for the key class's instance, less
// its FRAMEs and its memo opcodes but the class's (SPEC 2.3): the class by STACK_GLOBAL
// and MEMOIZE once, by BINGET after, NEWOBJ with no arguments, then BUILD with the
// instance's state (a dataclass's __dict__, or a frozen slots dataclass's __getstate__
// list; its field names are not mapping keys of a Value, so never memoized).
void PickleWriter::key_object(const Value& key, const KeyClass& key_class) {
  if (!(key_class == checked_key_class_)) {  // validated once per class, not per key
    key_class.validate();
    checked_key_class_ = key_class;
  }
  if (key_class.empty()) {
    throw Error(Errc::invalid_argument,
                "a key object needs a key class; the empty name "
                "writes keys as tuples");
  }
  const auto& fields = key_class.fields;
  if (!key.is(ValueKind::tuple) || key.items().size() != fields.size()) {
    throw Error(Errc::invalid_argument, "key " + repr(key, 80) + " is not a tuple of the " +
                                            std::to_string(fields.size()) + " field values of " +
                                            key_class.describe());
  }
  auto values = key.items();
  memo_or(memo_globals_, key_class.name, [&] {
    str(key_class.module());
    str(key_class.class_name());
    pops(2);
    pushes();
    opcode(op::STACK_GLOBAL);
  });
  pushes();
  opcode(op::EMPTY_TUPLE);
  pops(2);
  pushes();
  opcode(op::NEWOBJ);
  if (key_class.state == KeyClass::State::values) {
    batched(op::EMPTY_LIST, op::APPEND, op::APPENDS, values.size(), 1,
            [&](std::size_t i) { value(values[i]); });
  } else {
    batched(op::EMPTY_DICT, op::SETITEM, op::SETITEMS, values.size(), 2, [&](std::size_t i) {
      str(fields[i]);
      value(values[i]);
    });
  }
  pops(1);
  opcode(op::BUILD);
}

std::string write_pickle(const Value& v, const PickleLimits& limits) {
  // SPEC 2.3: whatever encodes decodes. The reader refuses a Value deeper than its limit.
  if (v.depth() > limits.max_depth) {
    throw Error(Errc::depth_limit, "cannot write pickle: the value nests " +
                                       std::to_string(v.depth()) + " levels deep, deeper than " +
                                       "the " + std::to_string(limits.max_depth) +
                                       "-level metadata pickle limit (SPEC 2.3)");
  }
  std::string out;
  PickleWriter w(out, limits);
  w.begin();
  w.value(v);
  w.end();
  return out;
}

}  // namespace hpref
