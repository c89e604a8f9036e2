// The decoder's fast path (issue 15): framed segments in the forms our writer produces
// (and CPython's pickler, for plain keys), decoded in one pass over the metadata pickle
// straight into the final items, without the general reader's Value tree.
//
// It is a recursive-descent parser of the schema grammar (SPEC 2.2) over the pickle's
// opcodes that simulates the reader's stack exactly: every production counts the entries
// it has pushed, and a TUPLE1-3 or TUPLE is taken only when it pops exactly that
// production's entries (or its MARK). So whatever it accepts, the reader builds the same
// tree, and the items are read off it by position as the general decoder reads them. Where
// the grammar is ambiguous in postfix (where a key ends and its schema node begins) it
// guesses from the next opcode; a wrong guess cannot produce wrong items, only a bail.
//
// Anything it does not fully understand, every refusal included, makes it give up ("bail")
// and decode_segment runs the general decoder from the start: error kinds, messages and
// their order are the general decoder's by construction. A success here must imply that the
// general decoder succeeds with equal items, so each check of SPEC 2.3-2.4 that could refuse
// an accepted form is repeated here (the reader's limits included).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include "hpref/detail/codec_paths.hpp"
#include "hpref/detail/node_arena.hpp"
#include "hpref/detail/value_access.hpp"
#include "hpref/error.hpp"
#include "hpref/utf8.hpp"
#include "pickle_opcodes.hpp"

namespace hpref::detail {
namespace {

struct Bail {};  // not for the fast path: the general decoder decides

[[noreturn]] void bail() { throw Bail{}; }

// Deeper metadata is left to the general decoder (the parser recurses per level).
constexpr int kMaxFastDepth = 512;

enum class Tag { tensor, bytes, bytearray, mapping, tuple, list, value, none };

bool is_ascii(const std::uint8_t* p, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) return false;
  }
  for (; i < n; ++i) {
    if (p[i] & 0x80) return false;
  }
  return true;
}

// Eight bytes at `p` as one little-endian word (an unaligned load).
constexpr std::uint64_t word_at(const char* p) noexcept {
  std::uint64_t w = 0;
  for (int i = 0; i < 8; ++i) w |= std::uint64_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
  return w;
}

// Whether two strs of the input are equal: strs of 8 to 16 bytes (tags, dtype names) by
// two word compares, others by memcmp.
inline bool same_text(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  std::size_t n = a.size();
  if (n < 8 || n > 16) return a == b;
  std::uint64_t a0, a1, b0, b1;
  std::memcpy(&a0, a.data(), 8);
  std::memcpy(&b0, b.data(), 8);
  std::memcpy(&a1, a.data() + n - 8, 8);
  std::memcpy(&b1, b.data() + n - 8, 8);
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

// A tag (11 to 16 bytes) as its first and last eight bytes, which together cover it.
struct TagWords {
  std::size_t size;
  std::uint64_t head, tail;
  Tag tag;
};

template <std::size_t N>
constexpr TagWords tag_words(const char (&text)[N], Tag tag) noexcept {
  static_assert(N - 1 >= 8 && N - 1 <= 16);
  return {N - 1, word_at(text), word_at(text + N - 1 - 8), tag};
}

constexpr TagWords kTags[] = {
    tag_words("__hp_value__", Tag::value),         tag_words("__hp_mapping__", Tag::mapping),
    tag_words("__hp_tensor__", Tag::tensor),       tag_words("__hp_bytes__", Tag::bytes),
    tag_words("__hp_tuple__", Tag::tuple),         tag_words("__hp_list__", Tag::list),
    tag_words("__hp_bytearray__", Tag::bytearray),
};

// The tag `t` names, or Tag::none: two word compares per candidate, no call, no memcmp (a
// node's tag is read once per node, the commonest string on this path).
inline Tag tag_of(std::string_view t) noexcept {
  if (t.size() < 11 || t.size() > 16) return Tag::none;
  std::uint64_t head, tail;
  std::memcpy(&head, t.data(), 8);
  std::memcpy(&tail, t.data() + t.size() - 8, 8);
  if constexpr (std::endian::native == std::endian::big) {
    head = __builtin_bswap64(head);
    tail = __builtin_bswap64(tail);
  }
  for (const TagWords& w : kTags) {
    if (t.size() == w.size && head == w.head && tail == w.tail) return w.tag;
  }
  return Tag::none;
}

bool is_store_op(std::uint8_t op) noexcept {
  return op == op::MEMOIZE || op == op::BINPUT || op == op::LONG_BINPUT || op == op::FRAME;
}

bool is_integer_op(std::uint8_t op) noexcept {
  return op == op::BININT1 || op == op::BININT2 || op == op::BININT || op == op::LONG1;
}

// A memo entry: a str (its Value and its bytes, so a fetched tag is still recognised), a
// scalar, or a container, which this path never fetches (a shared container may be both a
// schema node and user data: the general decoder's business).
struct Memo {
  enum class Kind : std::uint8_t { empty, text, scalar, container, key_class };
  Kind kind = Kind::empty;
  Value value;
  std::string_view text;
};

// A plain value under construction (keys, __hp_value__ payloads) and its pickle depth.
struct Plain {
  Value value;
  int depth = 0;
};

constexpr std::size_t kSlabTensors = 32;

struct TensorSlab {
  alignas(Tensor) unsigned char storage[kSlabTensors * sizeof(Tensor)];
  std::size_t used = 0;

  TensorSlab() = default;
  TensorSlab(const TensorSlab&) = delete;
  TensorSlab& operator=(const TensorSlab&) = delete;
  ~TensorSlab() {
    for (std::size_t i = 0; i < used; ++i)
      std::launder(reinterpret_cast<Tensor*>(storage) + i)->~Tensor();
  }
  Tensor* add(Tensor t) {
    auto* at = new (storage + used * sizeof(Tensor)) Tensor(std::move(t));
    ++used;
    return at;
  }
};

class FastDecoder {
 public:
  FastDecoder(std::span<const std::uint8_t> metadata, const SharedBytes& binary,
              const DecodeOptions& options, std::uint64_t segment_size)
      : p_(metadata.data()),
        end_(metadata.data() + metadata.size()),
        limits_(options.pickle.limits),
        max_depth_(std::min(options.pickle.limits.max_depth, kMaxFastDepth)),
        strict_(options.strict),
        binary_(binary),
        work_budget_(options.pickle.limits.max_nodes + segment_size),
        reader_budget_(options.pickle.limits.max_nodes + metadata.size()),
        key_class_(options.pickle.key_class) {
    if (!key_class_.empty()) {
      key_module_ = key_class_.module();
      key_name_ = key_class_.class_name();
    }
    plain_.reserve(16);
    plain_marks_.reserve(4);
  }

  std::vector<Item> run() {
    // A large decode's nodes come from slabs (hpref/detail/node_arena.hpp); a small one's from
    // operator new, so that it never takes a whole slab.
    std::optional<NodeArena> arena;
    if (left() >= kSlabBytes / 4) arena.emplace();
    if (left() >= 2 && p_[0] == op::PROTO) {
      if (p_[1] < 2 || p_[1] > 5) bail();
      p_ += 2;
    }
    int depth = 0;
    sequence(
        depth, [this](int& d, bool* absorbed) { d = std::max(d, pair(absorbed) + 1); }, true);
    stores(Memo::Kind::container);
    if (next() != op::STOP || p_ != end_) bail();
    if (nodes_ > limits_.max_nodes) bail();
    if (strict_ && cursor_ != binary_.size()) bail();
    return std::move(items_);
  }

 private:
  // ---- input -----------------------------------------------------------------------
  std::size_t left() const noexcept { return static_cast<std::size_t>(end_ - p_); }

  // The next opcode, past any FRAMEs (their lengths checked as the reader checks them).
  std::uint8_t peek() {
    for (;;) {
      if (p_ == end_) bail();
      if (*p_ != op::FRAME) return *p_;
      ++p_;
      if (take_le(8) > left()) bail();
    }
  }

  std::uint8_t next() {
    std::uint8_t op = peek();
    ++p_;
    return op;
  }

  void expect(std::uint8_t op) {
    if (next() != op) bail();
  }

  std::uint64_t take_le(int nbytes) {
    if (static_cast<std::size_t>(nbytes) > left()) bail();
    std::uint64_t x = 0;
    for (int i = 0; i < nbytes; ++i) x |= std::uint64_t{p_[i]} << (8 * i);
    p_ += nbytes;
    return x;
  }

  std::string_view take_text(std::uint64_t n) {
    if (n > left()) bail();
    std::string_view out(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return out;
  }

  // The bytes of the str opcode `op` (already consumed), or of the memoized str it fetches.
  std::string_view text_of(std::uint8_t op) {
    switch (op) {
      case op::SHORT_BINUNICODE:
        return take_text(take_le(1));
      case op::BINUNICODE:
        return take_text(take_le(4));
      case op::BINUNICODE8:
        return take_text(take_le(8));
      case op::BINGET:
      case op::LONG_BINGET: {
        const Memo& m = fetch(take_le(op == op::BINGET ? 1 : 4));
        if (m.kind != Memo::Kind::text) bail();
        return m.text;
      }
      default:
        bail();
    }
  }

  std::int64_t integer_of(std::uint8_t op) {
    switch (op) {
      case op::BININT1:
        return static_cast<std::int64_t>(take_le(1));
      case op::BININT2:
        return static_cast<std::int64_t>(take_le(2));
      case op::BININT:
        return static_cast<std::int32_t>(take_le(4));
      case op::LONG1: {
        std::uint64_t n = take_le(1);
        if (n > 8) bail();
        std::uint64_t x = take_le(static_cast<int>(n));
        if (n > 0 && n < 8 && (x >> (8 * n - 1)) & 1) x |= ~std::uint64_t{0} << (8 * n);
        return static_cast<std::int64_t>(x);
      }
      default:
        bail();
    }
  }

  // ---- the reader's stack, counted: entries and MARKs --------------------------------
  void pushed() {
    if (height_ >= limits_.max_stack) bail();
    ++height_;
    ++nodes_;
  }

  void marked() {
    if (height_ >= limits_.max_stack) bail();
    ++height_;
  }

  // A tuple of `count` entries (and its MARK) replaces them; `depth` is its own.
  void reduced(std::size_t count, bool mark, int depth) {
    if (depth > max_depth_) bail();
    height_ -= count + (mark ? 1 : 0);
    pushed();
  }

  // ---- memo ----------------------------------------------------------------------------
  const Memo& fetch(std::uint64_t index, bool key_class = false) {
    if (index >= memo_.size()) bail();
    Memo::Kind kind = memo_[index].kind;
    if (kind == Memo::Kind::empty || kind == Memo::Kind::container ||
        (kind == Memo::Kind::key_class) != key_class) {
      bail();
    }
    pushed();
    return memo_[index];
  }

  // The memo stores (MEMOIZE, BINPUT, LONG_BINPUT) that follow a finished value: each stores
  // that value, the top of the reader's stack. `make` builds the entry.
  template <class Make>
  void stores_of(Make&& make) {
    for (;;) {
      if (p_ < end_ && !is_store_op(*p_)) return;  // the usual case: no store, no FRAME
      std::uint8_t op = peek();
      std::uint64_t index;
      if (op == op::MEMOIZE) {
        ++p_;
        index = memo_.size();
      } else if (op == op::BINPUT || op == op::LONG_BINPUT) {
        ++p_;
        index = take_le(op == op::BINPUT ? 1 : 4);
      } else {
        return;
      }
      if (index == memo_.size()) {
        if (memo_.size() >= limits_.max_memo_entries) bail();
        memo_.push_back(make());
      } else if (index < memo_.size()) {
        memo_[index] = make();
      } else {
        bail();  // a sparse memo: the general reader's
      }
    }
  }

  // Whether no memo store (nor FRAME) follows: the usual case, checked inline before the loop.
  bool no_store() const noexcept { return p_ < end_ && !is_store_op(*p_); }

  void stores(Memo::Kind kind) {
    if (no_store()) return;
    stores_of([kind] {
      Memo m;
      m.kind = kind;
      return m;
    });
  }

  // A scalar or bytes (a leaf: fetched as a copy, never frozen).
  void scalar_stores(const Value& value) {
    if (no_store()) return;
    stores_of([&] {
      Memo m;
      m.kind = Memo::Kind::scalar;
      m.value = value;
      return m;
    });
  }

  void text_stores(std::string_view text, const Value* value) {
    if (no_store()) return;
    stores_of([&] {
      Memo m;
      m.kind = Memo::Kind::text;
      m.text = text;
      m.value = value != nullptr ? *value : Value::string(text);
      return m;
    });
  }

  // ---- sequences: EMPTY_TUPLE, or 1-3 elements then TUPLE1-3, or MARK elements TUPLE ----
  // `element(depth)` parses one element (exactly one stack entry), raising `depth` to the
  // element's depth + 1. Returns the tuple's element count; `depth` becomes the tuple's.
  // With `pairs` (elements that start with a key, which may itself start with MARK or be
  // ()): an EMPTY_TUPLE is the empty sequence only before what ends the sequence's parent,
  // and a MARK is the sequence's if the first key leaves it open (see plain()).
  template <class Element>
  std::size_t sequence(int& depth, Element&& element, bool pairs = false) {
    depth = 1;
    std::uint8_t op = peek();
    if (op == op::EMPTY_TUPLE && (!pairs || ends_parent_at(p_ + 1))) {
      ++p_;
      reduced(0, false, 1);
      return 0;
    }
    std::size_t count = 0;
    bool mark = false;
    if (pairs) {
      element(depth, &mark);  // the first key's plain() may take the sequence's MARK
      ++count;
    } else if (op == op::MARK && !opens_tensor()) {
      ++p_;
      marked();
      mark = true;
    }
    if (mark) {
      while (peek() != op::TUPLE) {
        element(depth, nullptr);
        ++count;
      }
      ++p_;
      reduced(count, true, depth);
      return count;
    }
    for (;;) {
      if (count > 0) {
        op = peek();
        if (op == op::TUPLE1 + count - 1) break;
        if (count == 3) bail();
      }
      element(depth, nullptr);
      ++count;
    }
    ++p_;
    reduced(count, false, depth);
    return count;
  }

  // Whether the opcode at `q` ends a sequence's parent: the TUPLE2 of a (tag, children) node,
  // or what follows the metadata tuple.
  bool ends_parent_at(const std::uint8_t* q) const noexcept {
    if (q >= end_) return false;
    return *q == op::TUPLE2 || *q == op::STOP || *q == op::MEMOIZE || *q == op::BINPUT ||
           *q == op::LONG_BINPUT;
  }

  // Whether the MARK at the input's head opens a tensor node (MARK, then its tag) rather than
  // a sequence: no element of a sequence starts with that tag (a guess as any other here).
  bool opens_tensor() const noexcept {
    const std::uint8_t* q = p_ + 1;
    std::size_t n = static_cast<std::size_t>(end_ - q);
    constexpr std::string_view kTag = "__hp_tensor__";
    if (n >= 2 + kTag.size() && q[0] == op::SHORT_BINUNICODE && q[1] == kTag.size()) {
      return std::memcmp(q + 2, kTag.data(), kTag.size()) == 0;
    }
    if (n >= 2 && q[0] == op::BINGET) {
      return q[1] < memo_.size() && memo_[q[1]].kind == Memo::Kind::text &&
             memo_[q[1]].text == kTag;
    }
    return false;
  }

  // ---- plain values: a small bottom-up machine -------------------------------------------
  // One value of scalars, strs, bytes and tuples (every one hashable), ended when exactly
  // one value is built and `ends(op)` says the next opcode is not its own.
  template <class Ends>
  // With `absorbed` (the first key of a pair sequence), it may also end with one value
  // above a MARK it opened first: that MARK is then the sequence's (*absorbed is set), which
  // the reader cannot tell apart either until a TUPLE closes it.
  Plain plain(Ends&& ends, bool* absorbed = nullptr) {
    if (auto quick = quick_plain(ends, absorbed)) return std::move(*quick);
    plain_.clear();
    plain_marks_.clear();
    for (;;) {
      std::uint8_t op = peek();
      if (plain_.size() == 1 && ends(op)) {
        if (plain_marks_.empty()) break;
        if (absorbed != nullptr && plain_marks_.size() == 1 && plain_marks_[0] == 0) {
          *absorbed = true;
          break;
        }
      }
      ++p_;
      plain_step(op);
    }
    Plain out = std::move(plain_[0]);
    plain_.clear();
    return out;
  }

  // A scalar opcode at the input's head: its Value (the input advanced), or none.
  std::optional<Value> scalar() {
    if (p_ == end_) return std::nullopt;
    std::uint8_t op = *p_;
    switch (op) {
      case op::NONE:
        ++p_;
        return Value();
      case op::NEWTRUE:
      case op::NEWFALSE:
        ++p_;
        return Value::boolean(op == op::NEWTRUE);
      case op::BININT1:
      case op::BININT2:
      case op::BININT:
      case op::LONG1:
        ++p_;
        return Value::integer(integer_of(op));
      case op::BINFLOAT: {
        ++p_;
        std::string_view b = take_text(8);
        std::uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<std::uint8_t>(c);
        return Value::floating(std::bit_cast<double>(bits));
      }
      default:
        return std::nullopt;
    }
  }

  // The commonest plain values without the machine: a scalar, a pair of scalars (a
  // SampleKey) and a memoized str or scalar (with `absorbed`, also after the MARK it then
  // absorbs: a mapping's first key), each followed by what ends it and no memo store.
  // Otherwise none, with the input where it was.
  template <class Ends>
  std::optional<Plain> quick_plain(Ends& ends, bool* absorbed) {
    const std::uint8_t* start = p_;
    auto ended = [&] { return p_ < end_ && !is_store_op(*p_) && ends(*p_); };
    bool mark = absorbed != nullptr && left() >= 3 && p_[0] == op::MARK;
    if (left() >= 2 + mark && p_[mark] == op::BINGET) {  // a memoized str or scalar
      std::size_t i = p_[mark + 1];
      if (i < memo_.size() &&
          (memo_[i].kind == Memo::Kind::text || memo_[i].kind == Memo::Kind::scalar)) {
        p_ += 2 + mark;
        if (ended()) {
          if (mark) {
            marked();
            *absorbed = true;
          }
          pushed();
          return Plain{memo_[i].value, 0};
        }
        p_ = start;
      }
      return std::nullopt;
    }
    if (auto a = scalar()) {
      if (ended()) {
        pushed();
        return Plain{std::move(*a), 0};
      }
      if (auto b = scalar()) {
        if (p_ < end_ && *p_ == op::TUPLE2) {
          ++p_;
          if (ended()) {
            pushed();
            pushed();
            reduced(2, false, 1);
            Value two[2] = {std::move(*a), std::move(*b)};
            return Plain{ValueAccess::make_sequence(ValueKind::tuple, two), 1};
          }
        }
      }
    }
    p_ = start;
    return std::nullopt;
  }

  void plain_push(Value v, int depth = 0) {
    pushed();
    plain_.push_back(Plain{std::move(v), depth});
  }

  void plain_step(std::uint8_t op) {
    switch (op) {
      case op::NONE:
        plain_push(Value());
        return scalar_stores(plain_.back().value);
      case op::NEWTRUE:
      case op::NEWFALSE:
        plain_push(Value::boolean(op == op::NEWTRUE));
        return scalar_stores(plain_.back().value);
      case op::BININT1:
      case op::BININT2:
      case op::BININT:
      case op::LONG1:
        plain_push(Value::integer(integer_of(op)));
        return scalar_stores(plain_.back().value);
      case op::BINFLOAT: {
        std::string_view b = take_text(8);
        std::uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<std::uint8_t>(c);
        plain_push(Value::floating(std::bit_cast<double>(bits)));
        return scalar_stores(plain_.back().value);
      }
      case op::SHORT_BINUNICODE:
      case op::BINUNICODE:
      case op::BINUNICODE8: {
        std::string_view t = text_of(op);
        if (!is_ascii(reinterpret_cast<const std::uint8_t*>(t.data()), t.size()) &&
            !is_valid_utf8(t)) {
          bail();
        }
        plain_push(Value::string(t));
        return text_stores(t, &plain_.back().value);
      }
      case op::SHORT_BINBYTES:
      case op::BINBYTES:
      case op::BINBYTES8: {
        std::uint64_t n = take_le(op == op::SHORT_BINBYTES ? 1 : op == op::BINBYTES ? 4 : 8);
        plain_push(Value::bytes(take_text(n)));
        return scalar_stores(plain_.back().value);
      }
      case op::BINGET:
      case op::LONG_BINGET: {
        const Memo& m = fetch(take_le(op == op::BINGET ? 1 : 4));
        plain_.push_back(Plain{m.value, 0});
        return;
      }
      case op::EMPTY_TUPLE:
        pushed();
        plain_.push_back(Plain{Value::tuple({}), 1});
        return stores(Memo::Kind::container);
      case op::TUPLE1:
      case op::TUPLE2:
      case op::TUPLE3:
        return plain_tuple(static_cast<std::size_t>(op - op::TUPLE1 + 1), false);
      case op::MARK:
        marked();
        plain_marks_.push_back(plain_.size());
        return;
      case op::TUPLE:
        if (plain_marks_.empty()) bail();
        return plain_tuple(plain_.size() - plain_marks_.back(), true);
      default:
        bail();  // lists, dicts, globals, POP...: the general reader's
    }
  }

  void plain_tuple(std::size_t count, bool mark) {
    std::size_t fence = plain_marks_.empty() ? 0 : plain_marks_.back();
    if (plain_.size() - fence < count) bail();  // it would take entries not ours
    std::size_t from = plain_.size() - count;
    std::size_t base = kids_.size();
    int depth = 1;
    for (std::size_t i = from; i < plain_.size(); ++i) {
      depth = std::max(depth, plain_[i].depth + 1);
      kids_.push_back(std::move(plain_[i].value));
    }
    plain_.resize(from);
    if (mark) plain_marks_.pop_back();
    reduced(count, mark, depth);
    Value tuple =
        ValueAccess::make_sequence(ValueKind::tuple, std::span<Value>(kids_).subspan(base));
    kids_.resize(base);
    plain_.push_back(Plain{std::move(tuple), depth});
    stores(Memo::Kind::container);
  }

  // Whether `op` (not consumed) starts a schema node: a str "__hp_...", the memoized one,
  // or MARK before either. Only a guess of where a key ends (see the top of the file).
  bool starts_node(std::uint8_t) const noexcept { return starts_node_at(p_); }

  bool starts_node_at(const std::uint8_t* q) const noexcept {
    if (q >= end_) return false;
    std::uint8_t op = *q;
    if (op == op::MARK) {
      ++q;
      if (q == end_) return false;
      op = *q;
    }
    std::size_t n = static_cast<std::size_t>(end_ - q);
    if (op == op::SHORT_BINUNICODE)
      return n >= 7 && q[1] >= 5 && std::memcmp(q + 2, "__hp_", 5) == 0;
    if (op == op::BINUNICODE) return n >= 10 && std::memcmp(q + 5, "__hp_", 5) == 0;
    std::size_t i = memo_.size();
    if (op == op::BINGET && n >= 2) i = q[1];
    if (op == op::LONG_BINGET && n >= 5)
      i = q[1] | q[2] << 8 | q[3] << 16 | std::size_t{q[4]} << 24;
    return i < memo_.size() && memo_[i].kind == Memo::Kind::text &&
           memo_[i].text.substr(0, 5) == "__hp_";
  }

  // ---- the schema (codec_decode.cpp's SchemaDecoder, bailing where it throws) ----------
  // A metadata entry (key, schema node): appended to the items. Returns its depth.
  int pair(bool* absorbed) {
    Plain key;
    if (absorbed != nullptr && peek() == op::MARK && starts_key_object_at(p_ + 1)) {
      ++p_;
      marked();
      *absorbed = true;  // the metadata tuple's MARK, before a key object
      key = key_object();
    } else if (starts_key_object_at(p_)) {
      key = key_object();
    } else {
      key = plain([this](std::uint8_t op) { return starts_node(op); }, absorbed);
    }
    int depth = 0;
    Value value = node(depth);
    expect(op::TUPLE2);
    depth = 1 + std::max(key.depth, depth);
    reduced(2, false, depth);
    stores(Memo::Kind::container);
    items_.emplace_back(std::move(key.value), std::move(value));
    return depth;
  }

  // ---- the SPEC 1.4 key-class object (item keys written for Python peers) --------------
  // Whether one starts at `q`: the memoized class, or two strs (each maybe memoized) and
  // STACK_GLOBAL. A guess; key_object() checks.
  bool starts_key_object_at(const std::uint8_t* q) const noexcept {
    if (key_module_.empty()) return false;
    std::size_t n = static_cast<std::size_t>(end_ - q);
    if (n >= 2 && q[0] == op::BINGET) {
      return q[1] < memo_.size() && memo_[q[1]].kind == Memo::Kind::key_class;
    }
    std::size_t i = 0;
    for (int part = 0; part < 2; ++part) {
      if (i + 2 > n || q[i] != op::SHORT_BINUNICODE) return false;
      i += 2 + q[i + 1];
      if (i < n && q[i] == op::MEMOIZE) ++i;
    }
    return i < n && q[i] == op::STACK_GLOBAL;
  }

  // A str opcode's text (any str form, or a memoized str), pushed, with its memo stores.
  std::string_view text_field() {
    std::uint8_t op = next();
    std::string_view t = text_of(op);
    if (op != op::BINGET && op != op::LONG_BINGET) {
      pushed();
      text_stores(t, nullptr);
    }
    return t;
  }

  // The class (STACK_GLOBAL of exactly the key class, or its memo entry), EMPTY_TUPLE,
  // NEWOBJ, the state (dict or values form, scalar and str field values) and BUILD: the
  // tuple of the field values in field order, as the reader builds it.
  Plain key_object() {
    if (peek() == op::BINGET || peek() == op::LONG_BINGET) {
      std::uint8_t op = next();
      fetch(take_le(op == op::BINGET ? 1 : 4), true);
    } else {
      std::string_view module = text_field();
      std::string_view name = text_field();
      expect(op::STACK_GLOBAL);
      if (module != key_module_ || name != key_name_) bail();
      height_ -= 2;
      pushed();
      stores(Memo::Kind::key_class);
    }
    expect(op::EMPTY_TUPLE);
    pushed();
    stores(Memo::Kind::container);
    expect(op::NEWOBJ);
    height_ -= 2;
    pushed();
    stores(Memo::Kind::container);  // the object: never fetched here
    const auto& fields = key_class_.fields;
    field_values_.assign(fields.size(), Value());
    field_found_.assign(fields.size(), false);
    std::size_t found = 0;
    bool dict = key_class_.state == KeyClass::State::dict;
    expect(dict ? op::EMPTY_DICT : op::EMPTY_LIST);
    pushed();
    if (max_depth_ < 1) bail();
    stores(Memo::Kind::container);
    bool mark = peek() == op::MARK;
    if (mark) {
      ++p_;
      marked();
    }
    std::uint8_t batch = dict ? op::SETITEMS : op::APPENDS;
    std::uint8_t one = dict ? op::SETITEM : op::APPEND;
    std::size_t pending = 0;  // entries above the MARK
    for (;;) {
      std::uint8_t op = peek();
      if (mark && op == batch) {
        ++p_;
        height_ -= pending + 1;
        break;
      }
      if (!mark && op == op::BUILD) break;
      std::size_t index = found;
      if (dict) {
        std::string_view name = text_field();
        auto at = std::find(fields.begin(), fields.end(), name);
        if (at == fields.end()) bail();
        index = static_cast<std::size_t>(at - fields.begin());
        std::uint64_t units = 1 + name.size() / 64;  // the reader hashes dict keys
        if (units > reader_budget_ - reader_work_) bail();
        reader_work_ += units;
        ++pending;
      }
      if (index >= fields.size() || field_found_[index]) bail();
      field_values_[index] = field_value();
      field_found_[index] = true;
      ++found;
      ++pending;
      if (!mark) {
        expect(one);
        height_ -= pending;
        pending = 0;
      }
    }
    if (found != fields.size()) bail();
    expect(op::BUILD);
    height_ -= 1;
    int depth = 1;
    if (depth > max_depth_) bail();
    nodes_ += 1;  // the key tuple the reader builds (its items counted as pushed)
    return Plain{ValueAccess::make_sequence(ValueKind::tuple, field_values_), depth};
  }

  // A field value: a scalar or a str.
  Value field_value() {
    if (auto v = scalar()) {
      pushed();
      scalar_stores(*v);
      return std::move(*v);
    }
    std::uint8_t op = peek();
    if (op == op::BINGET || op == op::LONG_BINGET) {
      ++p_;
      const Memo& m = fetch(take_le(op == op::BINGET ? 1 : 4));
      return m.value;
    }
    std::string_view t = text_field();
    if (!is_ascii(reinterpret_cast<const std::uint8_t*>(t.data()), t.size()) && !is_valid_utf8(t)) {
      bail();
    }
    return Value::string(t);
  }

  // The tag str of a node (consumed, with its memo stores), which must be one of ours.
  Tag tag() {
    std::uint8_t op = next();
    std::string_view t = text_of(op);
    if (op != op::BINGET && op != op::LONG_BINGET) {
      pushed();
      text_stores(t, nullptr);
    }
    Tag found = tag_of(t);
    if (found == Tag::none) bail();
    return found;
  }

  // One schema node; `depth` becomes its pickle depth.
  Value node(int& depth) {
    if (peek() == op::MARK) {
      ++p_;
      marked();
      if (tag() != Tag::tensor) bail();  // a node of more than 3 fields: not the writer's
      Value out = tensor(depth);
      expect(op::TUPLE);
      reduced(5, true, depth);
      stores(Memo::Kind::container);
      return out;
    }
    Tag t = tag();
    Value out;
    std::size_t fields = 2;
    switch (t) {
      case Tag::value: {
        Plain v = plain([](std::uint8_t op) { return op == op::TUPLE2; });
        depth = 1 + v.depth;
        out = std::move(v.value);
        break;
      }
      case Tag::bytes:
      case Tag::bytearray: {
        SharedBytes b = range();
        out = t == Tag::bytes ? Value::bytes(std::move(b)) : Value::bytearray(std::move(b));
        fields = 3;
        depth = 1;
        break;
      }
      case Tag::mapping:
        out = mapping(depth);
        break;
      case Tag::tuple:
      case Tag::list:
        out = sequence_node(t == Tag::tuple, depth);
        break;
      case Tag::tensor:
      case Tag::none:
        bail();
    }
    expect(static_cast<std::uint8_t>(op::TUPLE1 + fields - 1));
    reduced(fields, false, depth);
    stores(Memo::Kind::container);
    return out;
  }

  std::int64_t count_field() {
    std::uint8_t op = next();
    if (!is_integer_op(op)) bail();
    std::int64_t x = integer_of(op);
    if (x < 0) bail();
    pushed();
    if (p_ < end_ && is_store_op(*p_)) scalar_stores(Value::integer(x));
    return x;
  }

  // offset and size fields: the leaf's bytes (SPEC 2.4 checks; strict: the next in order).
  SharedBytes range() {
    auto off = static_cast<std::uint64_t>(count_field());
    auto len = static_cast<std::uint64_t>(count_field());
    if (off > binary_.size() || len > binary_.size() - off) bail();
    if (strict_) {
      if (off != cursor_) bail();
      cursor_ += len;
    }
    return binary_.slice(static_cast<std::size_t>(off), static_cast<std::size_t>(len));
  }

  // After MARK and the tag: dtype, shape, offset, size.
  Value tensor(int& depth) {
    std::uint8_t op = next();
    std::string_view name = text_of(op);
    if (op != op::BINGET && op != op::LONG_BINGET) {
      pushed();
      text_stores(name, nullptr);
    }
    if (!same_text(name, last_dtype_name_)) {  // consecutive tensors mostly share their dtype
      if (name.substr(0, 6) != "torch.") bail();
      auto dtype = dtype_from_bare_name(name.substr(6));
      if (!dtype) bail();
      last_dtype_ = *dtype;
      last_dtype_name_ = name;
    }
    dims_.clear();
    int shape_depth = 0;
    sequence(shape_depth, [this](int&, bool*) { dims_.push_back(count_field()); });
    stores(Memo::Kind::container);
    depth = 1 + shape_depth;
    if (!last_dims_ || !same_dims(*last_dims_, dims_)) {  // and their shape
      auto numel = checked_numel(dims_);
      if (!numel) bail();
      last_dims_ = std::make_shared<const std::vector<std::int64_t>>(dims_);
      last_numel_ = *numel;
    }
    SharedBytes bytes = range();
    std::int64_t expected = 0;
    if (__builtin_mul_overflow(last_numel_, static_cast<std::int64_t>(element_size(last_dtype_)),
                               &expected)) {
      bail();
    }
    if (static_cast<std::uint64_t>(expected) != bytes.size()) bail();
    return make_tensor(Tensor(last_dtype_, last_dims_, std::move(bytes)));
  }

  // Tensors are placed in shared slabs of kSlabTensors, one allocation for many: each Value
  // shares its slab's ownership (a view keeps its slab's few headers alive, as it keeps the
  // whole segment alive already).
  Value make_tensor(Tensor t) {
    if (!slab_ || slab_->used == kSlabTensors) {
      slab_ = std::allocate_shared<TensorSlab>(ArenaAllocator<TensorSlab>(0, sizeof(TensorSlab)));
    }
    Tensor* at = slab_->add(std::move(t));
    return ValueAccess::adopt_tensor(std::shared_ptr<const Tensor>(slab_, at));
  }

  // Children and entries collect on member stacks (nested nodes above their parent's) and
  // move into their container's one allocation when it is complete.
  Value sequence_node(bool tuple, int& depth) {
    std::size_t base = kids_.size();
    int kids_depth = 0;
    sequence(kids_depth, [&](int& d, bool*) {
      int child_depth = 0;
      Value child = node(child_depth);
      kids_.push_back(std::move(child));
      d = std::max(d, child_depth + 1);
    });
    stores(Memo::Kind::container);
    depth = 1 + kids_depth;
    Value out = ValueAccess::make_sequence(tuple ? ValueKind::tuple : ValueKind::list,
                                           std::span<Value>(kids_).subspan(base));
    kids_.resize(base);
    return out;
  }

  Value mapping(int& depth) {
    std::size_t base = entries_.size();
    MappingKeys keys;
    int entries_depth = 0;
    std::size_t count = sequence(
        entries_depth,
        [&](int& d, bool* absorbed) {
          Plain key = plain([this](std::uint8_t op) { return starts_node(op); }, absorbed);
          int child_depth = 0;
          Value child = node(child_depth);
          expect(op::TUPLE2);
          int pair_depth = 1 + std::max(key.depth, child_depth);
          reduced(2, false, pair_depth);
          stores(Memo::Kind::container);
          d = std::max(d, pair_depth + 1);
          std::uint64_t units = key.value.is(ValueKind::string) ? 1 + key.value.as_str().size() / 64
                                                                : key_work_units(key.value);
          if (units > work_budget_ - work_) bail();
          work_ += units;
          if (keys.repeats(std::span<const Value::Entry>(entries_).subspan(base), key.value)) {
            bail();
          }
          entries_.emplace_back(std::move(key.value), std::move(child));
        },
        true);
    (void)count;
    stores(Memo::Kind::container);
    depth = 1 + entries_depth;
    Value out = ValueAccess::make_mapping(std::span<Value::Entry>(entries_).subspan(base));
    entries_.resize(base);
    return out;
  }

  // A loop, not std::equal: that calls memcmp, for shapes of a dim or two.
  static bool same_dims(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
  const PickleLimits& limits_;
  int max_depth_;
  bool strict_;
  const SharedBytes& binary_;
  std::uint64_t work_budget_;
  std::uint64_t work_ = 0;
  std::uint64_t cursor_ = 0;  // strict: where the next leaf must start
  std::uint64_t nodes_ = 0;   // Values the reader would build (its node count of the result)
  std::uint64_t height_ = 0;  // the reader's stack: entries and MARKs
  std::vector<Memo> memo_;
  std::vector<Plain> plain_;
  std::vector<Value> kids_;            // children of the sequences being built
  std::vector<Value::Entry> entries_;  // entries of the mappings being built
  std::vector<std::size_t> plain_marks_;
  std::vector<std::int64_t> dims_;
  std::shared_ptr<const std::vector<std::int64_t>> last_dims_;
  std::int64_t last_numel_ = 0;  // of *last_dims_
  // A dtype name checked before (bytes of the input) and its dtype. It starts as a valid
  // pair, never as an empty name: an empty dtype name must not be a cache hit (the general
  // decoder refuses it, invalid_dtype).
  std::string_view last_dtype_name_ = "torch.float32";
  DType last_dtype_ = DType::float32;
  std::uint64_t reader_budget_;  // the reader's own work limit (dict keys it hashes)
  std::uint64_t reader_work_ = 0;
  const KeyClass& key_class_;
  std::string_view key_module_, key_name_;
  std::vector<Value> field_values_;
  std::vector<bool> field_found_;
  std::shared_ptr<TensorSlab> slab_;
  std::vector<Item> items_;
};

}  // namespace

std::optional<std::vector<Item>> decode_segment_fast(const SharedBytes& segment,
                                                     const DecodeOptions& options) {
  try {
    options.pickle.key_class.validate();  // the general reader refuses an invalid one
    SegmentHeader h = read_segment_header(segment.span());
    if (h.kind != SegmentHeader::Kind::framed) return std::nullopt;
    auto meta_size = static_cast<std::size_t>(h.metadata_size);
    SharedBytes binary =
        segment.slice(kFrameHeaderSize + meta_size, static_cast<std::size_t>(h.binary_size));
    FastDecoder decoder(segment.span().subspan(kFrameHeaderSize, meta_size), binary, options,
                        segment.size());
    return decoder.run();
  } catch (const Bail&) {
    return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace hpref::detail
