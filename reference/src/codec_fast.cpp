// The decoder's fast path (issue 15): framed segments in the forms our writer produces,
// decoded in one pass over the metadata pickle without the general reader's Value tree.
// The opcodes are read into compact nodes (a stack and an arena of plain structs, no
// allocation per node); each top-level (key, schema) pair is turned into its final item as
// soon as its TUPLE closes, and the arena is then reused, so it stays the size of one item.
// Anything this path does not fully understand, every refusal included, makes it give up
// ("bail") and decode_segment runs the general decoder from the start: error kinds,
// messages and their order are the general decoder's by construction. So a success here
// must imply that the general decoder succeeds with equal items; every check of SPEC
// 2.3-2.4 that could refuse an accepted form is repeated (limits included).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "hpref/detail/codec_paths.hpp"
#include "hpref/detail/value_access.hpp"
#include "hpref/error.hpp"
#include "hpref/utf8.hpp"
#include "pickle_opcodes.hpp"

namespace hpref::detail {
namespace {

struct Bail {};  // not for the fast path: the general decoder decides

[[noreturn]] void bail() { throw Bail{}; }

// Deeper metadata is left to the general decoder (this path's conversion recurses).
constexpr std::uint32_t kMaxFastDepth = 512;
constexpr std::uint32_t kNoText = std::numeric_limits<std::uint32_t>::max();

// A pickle stack entry: a scalar, a str or bytes (a view of the input), or a tuple whose
// items lie in the arena. Trivially copyable, so tuples move into the arena by copy.
struct Node {
  enum class Kind : std::uint8_t { none, boolean, integer, floating, str, bytes, tuple };
  Kind kind = Kind::none;
  std::uint32_t n = 0;           // str/bytes length, tuple size
  std::uint32_t depth = 0;       // Value::depth of what it builds
  std::uint32_t text = kNoText;  // a memoized str: its Value in FastDecoder::texts_
  union {
    std::int64_t i;
    double f;
    const std::uint8_t* p;  // str, bytes
    std::size_t first;      // tuple: index of its first item in the arena
  } u{.i = 0};
};

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

bool is_tag(const Node& t, std::string_view tag) noexcept {
  return t.n == tag.size() && std::memcmp(t.u.p, tag.data(), tag.size()) == 0;
}

class FastDecoder {
 public:
  FastDecoder(std::span<const std::uint8_t> metadata, const SharedBytes& binary,
              const DecodeOptions& options, std::uint64_t segment_size)
      : begin_(metadata.data()),
        p_(metadata.data()),
        end_(metadata.data() + metadata.size()),
        limits_(options.pickle.limits),
        strict_(options.strict),
        binary_(binary),
        work_budget_(options.pickle.limits.max_nodes + segment_size) {
    max_depth_ = static_cast<std::uint32_t>(
        std::clamp<std::int64_t>(limits_.max_depth, 0, std::int64_t{kMaxFastDepth}));
    stack_.reserve(64);
    marks_.reserve(16);
    arena_.reserve(256);
  }

  std::vector<Item> run() {
    for (;;) {
      if (p_ == end_) bail();
      std::uint8_t op = *p_++;
      if (root_closed_ && op != op::STOP && op != op::MEMOIZE && op != op::BINPUT &&
          op != op::LONG_BINPUT) {
        bail();
      }
      if (op == op::STOP) return finish();
      step(op);
    }
  }

 private:
  // ---- input ---------------------------------------------------------------
  std::size_t left() const noexcept { return static_cast<std::size_t>(end_ - p_); }

  std::uint64_t take_le(int nbytes) {
    if (static_cast<std::size_t>(nbytes) > left()) bail();
    std::uint64_t x = 0;
    for (int i = 0; i < nbytes; ++i) x |= std::uint64_t{p_[i]} << (8 * i);
    p_ += nbytes;
    return x;
  }

  const std::uint8_t* take(std::uint64_t n) {
    if (n > left()) bail();
    const std::uint8_t* at = p_;
    p_ += n;
    return at;
  }

  // ---- stack (mirrors the reader's: entries above the last MARK, height checked) -------
  std::size_t fence() const noexcept { return marks_.empty() ? 0 : marks_.back(); }

  void grow() {
    if (stack_.size() + marks_.size() + converted_ >= limits_.max_stack) bail();
  }

  void push(const Node& x) {
    grow();
    ++nodes_;
    stack_.push_back(x);
  }

  void push_scalar(Node::Kind kind, std::int64_t i) {
    Node x;
    x.kind = kind;
    x.u.i = i;
    push(x);
  }

  void push_text(Node::Kind kind, std::uint64_t n) {
    if (n > std::numeric_limits<std::uint32_t>::max()) bail();
    Node x;
    x.kind = kind;
    x.n = static_cast<std::uint32_t>(n);
    x.u.p = take(n);
    if (kind == Node::Kind::str && !is_ascii(x.u.p, x.n) &&
        !is_valid_utf8({reinterpret_cast<const char*>(x.u.p), x.n})) {
      bail();
    }
    push(x);
  }

  // The top `count` entries become a tuple: they move to the arena, the tuple is pushed.
  void reduce(std::size_t count) {
    if (count > std::numeric_limits<std::uint32_t>::max()) bail();
    std::size_t from = stack_.size() - count;
    Node t;
    t.kind = Node::Kind::tuple;
    t.n = static_cast<std::uint32_t>(count);
    t.depth = 1;
    t.u.first = arena_.size();
    for (std::size_t i = from; i < stack_.size(); ++i)
      t.depth = std::max(t.depth, stack_[i].depth + 1);
    if (t.depth > max_depth_) bail();
    arena_.insert(arena_.end(), stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    push(t);
    // A (key, schema node) pair directly above the outermost MARK, alone on the stack, is
    // taken for an entry of the metadata tuple: it becomes an item now and the arena is free
    // again. A guess, checked: if that MARK is not closed by TUPLE, or a later opcode would
    // take the pair (it was a part of something larger, as a user key (k, ("__hp_value__",
    // v)) would be), we bail: the pair is no longer on our stack.
    if (marks_.size() == 1 && marks_[0] == 0 && stack_.size() == 1 && looks_like_pair(t)) {
      convert_pair(stack_[0]);
      if (converted_ == 0) reserve_items();
      root_depth_ = std::max(root_depth_, stack_[0].depth + 1);
      stack_.clear();
      arena_.clear();
      ++converted_;
    }
  }

  // Room for the items, guessed from the first one's size in the input (at least 32 bytes
  // an item: the guess stays within twice the metadata's size). A wrong guess costs only
  // the vector's usual growth.
  void reserve_items() {
    std::size_t used = static_cast<std::size_t>(p_ - begin_);
    items_.reserve(1 + left() / (std::max<std::size_t>(used, 64) / 2));
  }

  // A 2-tuple whose second item is a tuple headed by a str starting "__hp_".
  bool looks_like_pair(const Node& t) const noexcept {
    if (t.n != 2) return false;
    const Node& schema = arena_[t.u.first + 1];
    if (schema.kind != Node::Kind::tuple || schema.n == 0) return false;
    const Node& tag = arena_[schema.u.first];
    return tag.kind == Node::Kind::str && tag.n >= 5 && std::memcmp(tag.u.p, "__hp_", 5) == 0;
  }

  void tuple_n(std::size_t count) {
    if (stack_.size() - fence() < count) bail();
    reduce(count);
  }

  void tuple_mark() {
    if (marks_.empty()) bail();
    std::size_t mark = marks_.back();
    marks_.pop_back();
    if (mark == 0 && marks_.empty() && (converted_ > 0 || stack_.empty())) {
      // The outermost MARK closes: the metadata tuple is the items converted so far.
      if (!stack_.empty()) bail();
      root_depth_ = std::max<std::uint32_t>(root_depth_, 1);
      if (root_depth_ > max_depth_) bail();
      grow();
      ++nodes_;
      root_closed_ = true;
      return;
    }
    reduce(stack_.size() - mark);
  }

  // ---- memo: strs and scalars may be fetched; a fetched container is left to the general
  // decoder (it is shared, and may be both a schema node and user data) ------------------
  void memo_put(std::uint64_t index) {
    Node entry;
    if (stack_.size() > fence()) {
      Node& top = stack_.back();
      if (top.kind == Node::Kind::str && top.text == kNoText) {
        texts_.push_back(Value::string({reinterpret_cast<const char*>(top.u.p), top.n}));
        top.text = static_cast<std::uint32_t>(texts_.size() - 1);
      }
      entry = top;
    } else if (root_closed_ ||
               (converted_ > 0 && stack_.empty() && marks_.size() == 1 && marks_[0] == 0)) {
      // The top is the metadata tuple or an entry already converted (CPython memoizes
      // every tuple): stored as a container, which is never fetched here.
      entry.kind = Node::Kind::tuple;
    } else {
      bail();
    }
    if (index == memo_.size()) {
      if (memo_.size() >= limits_.max_memo_entries) bail();
      memo_.push_back(entry);
    } else if (index < memo_.size()) {
      memo_[static_cast<std::size_t>(index)] = entry;
    } else {
      bail();  // a sparse memo: the general reader's
    }
  }

  void memo_get(std::uint64_t index) {
    if (index >= memo_.size()) bail();
    const Node& x = memo_[static_cast<std::size_t>(index)];
    if (x.kind == Node::Kind::tuple) bail();
    push(x);
  }

  void step(std::uint8_t op) {
    switch (op) {
      case op::PROTO: {
        std::uint64_t proto = take_le(1);
        if (proto < 2 || proto > 5) bail();
        return;
      }
      case op::FRAME:
        if (take_le(8) > left()) bail();
        return;
      case op::MARK:
        grow();
        marks_.push_back(stack_.size());
        return;
      case op::NONE:
        return push_scalar(Node::Kind::none, 0);
      case op::NEWTRUE:
        return push_scalar(Node::Kind::boolean, 1);
      case op::NEWFALSE:
        return push_scalar(Node::Kind::boolean, 0);
      case op::BININT:
        return push_scalar(Node::Kind::integer, static_cast<std::int32_t>(take_le(4)));
      case op::BININT1:
        return push_scalar(Node::Kind::integer, static_cast<std::int64_t>(take_le(1)));
      case op::BININT2:
        return push_scalar(Node::Kind::integer, static_cast<std::int64_t>(take_le(2)));
      case op::LONG1: {
        std::uint64_t n = take_le(1);
        if (n > 8) bail();
        std::uint64_t x = take_le(static_cast<int>(n));
        if (n > 0 && n < 8 && (x >> (8 * n - 1)) & 1) x |= ~std::uint64_t{0} << (8 * n);
        return push_scalar(Node::Kind::integer, static_cast<std::int64_t>(x));
      }
      case op::BINFLOAT: {
        const std::uint8_t* b = take(8);
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];
        Node x;
        x.kind = Node::Kind::floating;
        x.u.f = std::bit_cast<double>(bits);
        return push(x);
      }
      case op::SHORT_BINUNICODE:
        return push_text(Node::Kind::str, take_le(1));
      case op::BINUNICODE:
        return push_text(Node::Kind::str, take_le(4));
      case op::BINUNICODE8:
        return push_text(Node::Kind::str, take_le(8));
      case op::SHORT_BINBYTES:
        return push_text(Node::Kind::bytes, take_le(1));
      case op::BINBYTES:
        return push_text(Node::Kind::bytes, take_le(4));
      case op::BINBYTES8:
        return push_text(Node::Kind::bytes, take_le(8));
      case op::EMPTY_TUPLE:
        return reduce(0);
      case op::TUPLE1:
      case op::TUPLE2:
      case op::TUPLE3:
        return tuple_n(static_cast<std::size_t>(op - op::TUPLE1 + 1));
      case op::TUPLE:
        return tuple_mark();
      case op::MEMOIZE:
        return memo_put(memo_.size());
      case op::BINPUT:
        return memo_put(take_le(1));
      case op::LONG_BINPUT:
        return memo_put(take_le(4));
      case op::BINGET:
        return memo_get(take_le(1));
      case op::LONG_BINGET:
        return memo_get(take_le(4));
      default:
        bail();  // lists, dicts, globals, POP...: the general reader's
    }
  }

  std::vector<Item> finish() {
    if (p_ != end_ || !marks_.empty()) bail();
    if (!root_closed_) {
      // A metadata tuple written without MARK (EMPTY_TUPLE, TUPLE1-3): convert it now.
      if (stack_.size() != 1 || stack_[0].kind != Node::Kind::tuple) bail();
      Node root = stack_[0];
      for (std::size_t i = 0; i < root.n; ++i) convert_pair(arena_[root.u.first + i]);
    }
    if (nodes_ > limits_.max_nodes) bail();
    if (strict_ && cursor_ != binary_.size()) bail();
    return std::move(items_);
  }

  // ---- the schema (codec_decode.cpp's SchemaDecoder, bailing where it throws) ---------
  void convert_pair(const Node& pair) {
    if (pair.kind != Node::Kind::tuple || pair.n != 2) bail();
    const Node* f = &arena_[pair.u.first];
    Value key = plain(f[0]);  // every Node is hashable: no lists or dicts here
    items_.emplace_back(std::move(key), decode(f[1]));
  }

  Value plain(const Node& x) {
    switch (x.kind) {
      case Node::Kind::none:
        return Value();
      case Node::Kind::boolean:
        return Value::boolean(x.u.i != 0);
      case Node::Kind::integer:
        return Value::integer(x.u.i);
      case Node::Kind::floating:
        return Value::floating(x.u.f);
      case Node::Kind::str:
        if (x.text != kNoText) return texts_[x.text];
        return Value::string({reinterpret_cast<const char*>(x.u.p), x.n});
      case Node::Kind::bytes:
        return Value::bytes(std::span<const std::uint8_t>(x.u.p, x.n));
      case Node::Kind::tuple: {
        std::vector<Value> items;
        items.reserve(x.n);
        for (std::size_t i = 0; i < x.n; ++i) items.push_back(plain(arena_[x.u.first + i]));
        return Value::tuple(std::move(items));
      }
    }
    bail();
  }

  Value decode(const Node& s) {
    if (s.kind != Node::Kind::tuple || s.n == 0) bail();
    const Node* f = &arena_[s.u.first];
    const Node& tag = f[0];
    if (tag.kind != Node::Kind::str) bail();
    if (is_tag(tag, "__hp_tensor__")) return tensor(f, s.n);
    if (is_tag(tag, "__hp_mapping__")) return mapping(f, s.n);
    if (is_tag(tag, "__hp_value__")) {
      if (s.n < 2) bail();
      return plain(f[1]);
    }
    if (is_tag(tag, "__hp_bytes__")) return bytes(f, s.n, false);
    if (is_tag(tag, "__hp_bytearray__")) return bytes(f, s.n, true);
    if (is_tag(tag, "__hp_tuple__")) return sequence(f, s.n, true);
    if (is_tag(tag, "__hp_list__")) return sequence(f, s.n, false);
    bail();
  }

  static bool is_count(const Node& x) noexcept {
    return x.kind == Node::Kind::integer && x.u.i >= 0;
  }

  SharedBytes range(const Node& offset, const Node& size) {
    if (!is_count(offset) || !is_count(size)) bail();
    auto off = static_cast<std::uint64_t>(offset.u.i);
    auto len = static_cast<std::uint64_t>(size.u.i);
    if (off > binary_.size() || len > binary_.size() - off) bail();
    if (strict_) {
      if (off != cursor_) bail();
      cursor_ += len;
    }
    return binary_.slice(static_cast<std::size_t>(off), static_cast<std::size_t>(len));
  }

  Value tensor(const Node* f, std::size_t n) {
    if (n != 5 || f[1].kind != Node::Kind::str) bail();
    std::string_view name(reinterpret_cast<const char*>(f[1].u.p), f[1].n);
    if (name.substr(0, 6) != "torch.") bail();
    auto dtype = dtype_from_bare_name(name.substr(6));
    if (!dtype) bail();
    const Node& shape = f[2];
    if (shape.kind != Node::Kind::tuple) bail();
    const Node* d = &arena_[shape.u.first];
    if (!last_dims_ || last_dims_->size() != shape.n ||
        !std::equal(d, d + shape.n, last_dims_->begin(),
                    [](const Node& x, std::int64_t y) { return is_count(x) && x.u.i == y; })) {
      auto dims = std::make_shared<std::vector<std::int64_t>>();
      dims->reserve(shape.n);
      for (std::size_t i = 0; i < shape.n; ++i) {
        if (!is_count(d[i])) bail();
        dims->push_back(d[i].u.i);
      }
      last_dims_ = std::move(dims);
    }
    SharedBytes bytes = range(f[3], f[4]);
    auto numel = checked_numel(*last_dims_);
    std::int64_t expected = 0;
    if (!numel || __builtin_mul_overflow(*numel, static_cast<std::int64_t>(element_size(*dtype)),
                                         &expected)) {
      bail();
    }
    if (static_cast<std::uint64_t>(expected) != bytes.size()) bail();
    return Value::tensor(Tensor(*dtype, last_dims_, std::move(bytes)));
  }

  Value bytes(const Node* f, std::size_t n, bool bytearray) {
    if (n != 3) bail();
    SharedBytes b = range(f[1], f[2]);
    return bytearray ? Value::bytearray(std::move(b)) : Value::bytes(std::move(b));
  }

  const Node& children(const Node* f, std::size_t n) const {
    if (n < 2 || f[1].kind != Node::Kind::tuple) bail();
    return f[1];
  }

  Value sequence(const Node* f, std::size_t n, bool tuple) {
    const Node& kids = children(f, n);
    std::vector<Value> out;
    out.reserve(kids.n);
    for (std::size_t i = 0; i < kids.n; ++i) out.push_back(decode(arena_[kids.u.first + i]));
    return tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }

  Value mapping(const Node* f, std::size_t n) {
    const Node& entries = children(f, n);
    Value out = Value::mapping({});
    ValueAccess::reserve(out, entries.n);
    std::optional<KeySet> keys;  // past kScannedKeys pairs; a smaller mapping is scanned
    if (entries.n > kScannedKeys) keys.emplace();
    for (std::size_t i = 0; i < entries.n; ++i) {
      const Node& pair = arena_[entries.u.first + i];
      if (pair.kind != Node::Kind::tuple || pair.n != 2) bail();
      const Node* kv = &arena_[pair.u.first];
      Value key = plain(kv[0]);
      Value child = decode(kv[1]);
      std::uint64_t units = kv[0].kind == Node::Kind::str ? 1 + kv[0].n / 64 : key_work_units(key);
      if (units > work_budget_ - work_) bail();
      work_ += units;
      if (keys ? !keys->insert(key) : holds_key(out.entries(), kv[0], key)) bail();
      ValueAccess::add_entry(out, std::move(key), std::move(child));
    }
    return out;
  }

  // hpref::holds_key, with a str key compared by its bytes (a str equals only a str).
  static bool holds_key(std::span<const Value::Entry> entries, const Node& x, const Value& key) {
    if (x.kind != Node::Kind::str) return hpref::holds_key(entries, key);
    std::string_view text(reinterpret_cast<const char*>(x.u.p), x.n);
    for (const auto& entry : entries) {
      if (entry.first.is(ValueKind::string) && entry.first.as_str() == text) return true;
    }
    return false;
  }

  const std::uint8_t* begin_;
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  const PickleLimits& limits_;
  std::uint32_t max_depth_ = 0;
  bool strict_;
  const SharedBytes& binary_;
  std::uint64_t work_budget_;
  std::uint64_t work_ = 0;
  std::uint64_t cursor_ = 0;     // strict: where the next leaf must start
  std::uint64_t nodes_ = 0;      // values built, as the reader counts them
  std::uint64_t converted_ = 0;  // metadata entries already turned into items
  std::uint32_t root_depth_ = 0;
  bool root_closed_ = false;
  std::vector<Node> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Node> arena_;
  std::vector<Node> memo_;
  std::vector<Value> texts_;  // memoized strs, each one Value shared by every use
  std::shared_ptr<const std::vector<std::int64_t>> last_dims_;
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
