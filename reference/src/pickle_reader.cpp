// The metadata pickle reader of SPEC 2.3. A stack machine over CPython's opcodes that
// accepts only the opcodes that build plain data, plus exactly three global shapes
// (_codecs.encode for bytes, bytearray, the SPEC 1.4 key class). Every length is
// checked against the input left before anything is allocated; memo references share
// nodes instead of copying them, and a container fetched from the memo is frozen, so no
// cycle can be built and the node count (as if copied) bounds all later work.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "hpref/detail/value_access.hpp"
#include "hpref/error.hpp"
#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"
#include "hpref/utf8.hpp"
#include "pickle_opcodes.hpp"

namespace hpref {
namespace {

enum class Callable { codecs_encode, bytearray, bytes, key_class };

// The object the key-class NEWOBJ creates; BUILD fills it in.
struct KeyObject {
  bool built = false;
  bool frozen = false;  // fetched from the memo: BUILD may no longer modify it
  Value key;            // the tuple of the field values in field order, once built
};

// A global pushed by GLOBAL/STACK_GLOBAL.
struct Global {
  Callable callable = Callable::bytes;
  std::string name;  // "module.name", for messages
};

// One stack (or memo) entry, kept small: the stack may hold up to max_stack of them.
// A callable or key object lives in the reader's side tables, named by `index`.
struct Slot {
  enum class Tag : unsigned char { value, callable, key_object };
  Value value;
  std::uint32_t index = 0;  // into Reader::globals_ or Reader::key_objects_
  Tag tag = Tag::value;
};

std::string opcode_label(std::uint8_t op) {
  std::string_view name = pickle_opcode_name(op);
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", op);
  return name.empty() ? std::string("unknown opcode ") + buf : std::string(name) + " (" + buf + ")";
}

class Reader {
 public:
  Reader(std::span<const std::uint8_t> in, const PickleReadOptions& options)
      : in_(in), options_(options) {
    const KeyClass& kc = options.key_class;
    kc.validate();
    if (!kc.empty()) {
      key_module_ = kc.module();
      key_name_ = kc.class_name();
    }
    stack_.reserve(64);
    marks_.reserve(16);
  }

  Value run() {
    for (;;) {
      op_offset_ = pos_;
      std::uint8_t op = take_u8("an opcode");
      if (op == op::STOP) return finish();
      dispatch(op);
    }
  }

 private:
  // ---- errors -------------------------------------------------------------
  [[noreturn]] void fail(Errc code, const std::string& what) const {
    throw Error(
        code, "metadata pickle: " + what + " (opcode at byte " + std::to_string(op_offset_) + ")");
  }

  // ---- input --------------------------------------------------------------
  std::size_t left() const { return in_.size() - pos_; }

  void need(std::uint64_t n, const char* what) const {
    if (n > left()) {
      fail(Errc::pickle_truncated, std::string(what) + " needs " + std::to_string(n) +
                                       " bytes but only " + std::to_string(left()) +
                                       " are left in the input");
    }
  }

  std::uint8_t take_u8(const char* what) {
    need(1, what);
    return in_[pos_++];
  }

  std::uint64_t take_le(int nbytes, const char* what) {
    need(static_cast<std::uint64_t>(nbytes), what);
    std::uint64_t x = 0;
    for (int i = 0; i < nbytes; ++i) x |= std::uint64_t{in_[pos_ + i]} << (8 * i);
    pos_ += static_cast<std::size_t>(nbytes);
    return x;
  }

  std::string_view take_bytes(std::uint64_t n, const char* what) {
    need(n, what);
    std::string_view out(reinterpret_cast<const char*>(in_.data() + pos_),
                         static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }

  std::string_view take_line() {
    const auto* start = in_.data() + pos_;
    const void* nl = std::memchr(start, '\n', left());
    if (nl == nullptr) fail(Errc::pickle_truncated, "GLOBAL name line has no newline");
    std::size_t len = static_cast<const std::uint8_t*>(nl) - start;
    pos_ += len + 1;
    return {reinterpret_cast<const char*>(start), len};
  }

  // ---- stack --------------------------------------------------------------
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }

  // SPEC 2.4: memory stays a small multiple of the input. Every push (an item or a MARK)
  // is checked first, so a run of push opcodes with nothing to consume them stops at the
  // limit instead of at STOP.
  void grow_stack() {
    if (stack_.size() + marks_.size() >= options_.limits.max_stack) {
      fail(Errc::pickle_stack_limit, "the stack would hold more than " +
                                         std::to_string(options_.limits.max_stack) +
                                         " entries (items and MARKs)");
    }
  }

  void push_slot(Slot s) {
    grow_stack();
    stack_.push_back(std::move(s));
  }

  void push(Value v) {
    Slot s;
    s.value = std::move(v);
    push_slot(std::move(s));
  }

  Slot pop_slot(const char* what) {
    if (stack_.size() <= fence()) {
      fail(Errc::pickle_stack, std::string(what) + " needs an item but the stack is empty" +
                                   (marks_.empty() ? "" : " above the last MARK"));
    }
    Slot s = std::move(stack_.back());
    stack_.pop_back();
    return s;
  }

  Value as_value(Slot&& s) {
    switch (s.tag) {
      case Slot::Tag::value:
        return std::move(s.value);
      case Slot::Tag::callable:
        fail(Errc::pickle_global,
             "global " + name_of(s) +
                 " may only be called (REDUCE, or NEWOBJ for the key class), not used as a value");
      case Slot::Tag::key_object:
        if (!key_objects_[s.index].built) {
          fail(Errc::pickle_reduce, "a " + key_name() + " object is used before BUILD");
        }
        return key_objects_[s.index].key;
    }
    fail(Errc::internal, "bad slot");
  }

  Value pop_value(const char* what) { return as_value(pop_slot(what)); }

  Slot& top_slot(const char* what) {
    if (stack_.size() <= fence()) {
      fail(Errc::pickle_stack, std::string(what) + " needs a target but the stack is empty" +
                                   (marks_.empty() ? "" : " above the last MARK"));
    }
    return stack_.back();
  }

  // Pops everything above the last MARK, and the MARK.
  std::vector<Value> pop_mark(const char* what) {
    if (marks_.empty()) fail(Errc::pickle_stack, std::string(what) + " has no MARK to pop to");
    std::size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items;
    items.reserve(stack_.size() - mark);
    for (std::size_t i = mark; i < stack_.size(); ++i)
      items.push_back(as_value(std::move(stack_[i])));
    stack_.resize(mark);
    return items;
  }

  // Work that a memo reference can repeat without new input (hashing a shared key,
  // converting a shared string) is counted: it may not exceed the node limit plus the
  // input's size, so total work stays proportional to the input (SPEC 2.4).
  void spend(std::uint64_t units, const char* what) {
    std::uint64_t budget = options_.limits.max_nodes + in_.size();
    if (units > budget - work_) {
      fail(Errc::pickle_node_limit, std::string(what) + " would bring the reader's work past " +
                                        std::to_string(budget) +
                                        " units (the node limit plus the input's size)");
    }
    work_ += units;
  }

  // ---- containers -----------------------------------------------------------
  void check_limits(const Value& v) const {
    if (v.depth() > options_.limits.max_depth) {
      fail(Errc::pickle_depth_limit, "nesting depth " + std::to_string(v.depth()) +
                                         " exceeds the limit of " +
                                         std::to_string(options_.limits.max_depth));
    }
    if (v.node_count() > options_.limits.max_nodes) {
      fail(Errc::pickle_node_limit, "the value would have more than " +
                                        std::to_string(options_.limits.max_nodes) +
                                        " nodes (memo references counted as copies)");
    }
  }

  void created(const void* identity) {
    if (!frozen_.empty()) frozen_.erase(identity);
  }

  void push_container(Value v) {
    created(v.node_identity());
    check_limits(v);
    push(std::move(v));
  }

  Value new_tuple(std::vector<Value> items) {
    // Value::tuple computes depth and node counts as it goes; check them after.
    return Value::tuple(std::move(items));
  }

  Value& target(const char* what, ValueKind kind) {
    Slot& s = top_slot(what);
    if (s.tag != Slot::Tag::value || !s.value.is(kind)) {
      std::string got = s.tag == Slot::Tag::value ? std::string(value_kind_name(s.value.kind()))
                                                  : std::string("a global or object");
      fail(Errc::pickle_stack, std::string(what) + " needs a " +
                                   std::string(value_kind_name(kind)) + " below it, got " + got);
    }
    if (frozen_.count(s.value.node_identity())) {
      fail(Errc::pickle_frozen_mutation, std::string(what) + " modifies a " +
                                             std::string(value_kind_name(kind)) +
                                             " after it was fetched from the memo");
    }
    return s.value;
  }

  void append_items(const char* what, std::vector<Value> items) {
    if (items.empty()) {
      top_slot(what);
      return;
    }
    Value& list = target(what, ValueKind::list);
    detail::ValueAccess::reserve(list, items.size());
    for (Value& item : items) detail::ValueAccess::append(list, std::move(item));
    check_limits(list);
  }

  void add_entries(Value& dict, std::vector<Value>& flat, const char* what) {
    if (flat.size() % 2 != 0) {
      fail(Errc::pickle_stack, std::string(what) + " has an odd number (" +
                                   std::to_string(flat.size()) + ") of keys and values");
    }
    for (std::size_t i = 0; i < flat.size(); i += 2)
      spend(key_work_units(flat[i]), "dict keys hashed");
    // A dict may be filled by several SETITEM(S): one that grows past the scan keeps its
    // MappingKeys by address (it starts a new set when the scan ends, so one left by a
    // freed dict whose address this one reuses is replaced).
    MappingKeys scanned;
    MappingKeys& keys = dict.entries().size() + flat.size() / 2 > kScannedKeys
                            ? dict_keys_[dict.node_identity()]
                            : scanned;
    detail::ValueAccess::reserve(dict, flat.size() / 2);
    for (std::size_t i = 0; i < flat.size(); i += 2) {
      if (!flat[i].is_hashable()) {
        fail(Errc::pickle_unhashable_key, "dict key " + repr(flat[i]) + " of type " +
                                              std::string(value_kind_name(flat[i].kind())) +
                                              " is not hashable");
      }
      if (keys.repeats(dict.entries(), flat[i])) {
        fail(Errc::pickle_duplicate_key, "dict key " + repr(flat[i]) + " appears twice");
      }
      detail::ValueAccess::add_entry(dict, std::move(flat[i]), std::move(flat[i + 1]));
    }
    check_limits(dict);
  }

  // ---- memo -----------------------------------------------------------------
  void memo_put(std::uint64_t index) {
    Slot& top = top_slot("a memo store");
    auto it = memo_.find(index);
    if (it == memo_.end()) {
      if (memo_.size() >= options_.limits.max_memo_entries) {
        fail(Errc::pickle_memo_limit, "the memo would hold more than " +
                                          std::to_string(options_.limits.max_memo_entries) +
                                          " entries");
      }
      memo_.emplace(index, top);
    } else {
      it->second = top;
    }
  }

  void memo_get(std::uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) {
      fail(Errc::pickle_memo_missing, "memo index " + std::to_string(index) + " was never stored");
    }
    const Slot& s = it->second;
    if (s.tag == Slot::Tag::value && s.value.is_container())
      frozen_.insert(s.value.node_identity());
    if (s.tag == Slot::Tag::key_object) key_objects_[s.index].frozen = true;
    push_slot(s);
  }

  // ---- globals and calls ------------------------------------------------------
  void push_global(std::string_view module, std::string_view name) {
    Global g;
    g.name = std::string(module) + "." + std::string(name);
    if (module == "_codecs" && name == "encode") {
      g.callable = Callable::codecs_encode;
    } else if ((module == "builtins" || module == "__builtin__") && name == "bytearray") {
      g.callable = Callable::bytearray;
    } else if ((module == "builtins" || module == "__builtin__") && name == "bytes") {
      g.callable = Callable::bytes;
    } else if (!key_module_.empty() && module == key_module_ && name == key_name_) {
      g.callable = Callable::key_class;
    } else {
      fail(Errc::pickle_global,
           "global " + quote_text(g.name) +
               " is refused: only _codecs.encode, builtins.bytearray, builtins.bytes and the "
               "key class build plain data, and decoding never runs code");
    }
    Slot s;
    s.tag = Slot::Tag::callable;
    s.index = static_cast<std::uint32_t>(globals_.size());
    globals_.push_back(std::move(g));
    push_slot(std::move(s));
  }

  Slot pop_callable(const char* what) {
    Slot s = pop_slot(what);
    if (s.tag != Slot::Tag::callable) {
      std::string got = s.tag == Slot::Tag::value ? repr(s.value, 60) : "a key object";
      fail(Errc::pickle_reduce, std::string(what) + " calls " + got + ", which is not a global");
    }
    return s;
  }

  // Decodes UTF-8 text whose code points are all <= U+00FF into latin-1 bytes.
  std::string latin1_bytes(std::string_view utf8) {
    std::string out;
    out.reserve(utf8.size());
    for (std::size_t i = 0; i < utf8.size(); ++i) {
      auto c = static_cast<std::uint8_t>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
        out.push_back(static_cast<char>(((c & 0x03) << 6) | (utf8[++i] & 0x3F)));
      } else {
        fail(Errc::pickle_reduce,
             "_codecs.encode got text with a character above U+00FF, "
             "which latin1 cannot encode");
      }
    }
    return out;
  }

  void reduce() {
    Value args = pop_value("REDUCE");
    Slot fn = pop_callable("REDUCE");
    if (!args.is(ValueKind::tuple)) {
      fail(Errc::pickle_reduce,
           "REDUCE arguments for " + name_of(fn) + " must be a tuple, got " + repr(args, 60));
    }
    auto a = args.items();
    switch (callable_of(fn)) {
      case Callable::codecs_encode:
        if (a.size() == 2 && a[0].is(ValueKind::string) && a[1].is(ValueKind::string) &&
            a[1].as_str() == "latin1") {
          spend(a[0].as_str().size(), "text converted by _codecs.encode");
          push(Value::bytes(std::string_view(latin1_bytes(a[0].as_str()))));
          return;
        }
        break;
      case Callable::bytearray:
        if (a.empty()) {
          push(Value::bytearray(SharedBytes()));
          return;
        }
        if (a.size() == 1 && a[0].is(ValueKind::bytes)) {
          push(Value::bytearray(a[0].as_bytes()));
          return;
        }
        break;
      case Callable::bytes:
        if (a.empty()) {
          push(Value::bytes(SharedBytes()));
          return;
        }
        break;
      case Callable::key_class:
        break;
    }
    fail(Errc::pickle_reduce, "REDUCE of " + name_of(fn) + " with arguments " + repr(args, 60) +
                                  " is refused: only _codecs.encode(str, 'latin1'), "
                                  "bytearray() / bytearray(bytes) and bytes() are accepted");
  }

  void newobj() {
    Value args = pop_value("NEWOBJ");
    Slot cls = pop_callable("NEWOBJ");
    if (callable_of(cls) != Callable::key_class || !args.is(ValueKind::tuple) ||
        !args.items().empty()) {
      fail(Errc::pickle_reduce, "NEWOBJ of " + name_of(cls) + " with arguments " + repr(args, 60) +
                                    " is refused: only " + key_name() +
                                    " with no arguments is accepted");
    }
    Slot s;
    s.tag = Slot::Tag::key_object;
    s.index = static_cast<std::uint32_t>(key_objects_.size());
    key_objects_.emplace_back();
    push_slot(std::move(s));
  }

  void build() {
    Value state = pop_value("BUILD");
    Slot& slot = top_slot("BUILD");
    if (slot.tag != Slot::Tag::key_object || key_objects_[slot.index].built) {
      fail(Errc::pickle_reduce, "BUILD is only accepted once on a fresh " + key_name() + " object");
    }
    KeyObject& obj = key_objects_[slot.index];
    if (obj.frozen) {
      fail(Errc::pickle_frozen_mutation,
           "BUILD modifies a " + key_name() + " object after it was fetched from the memo");
    }
    Value key = options_.key_class.state == KeyClass::State::values ? key_from_values(state)
                                                                    : key_from_dict(state);
    if (!key.is_hashable()) {
      fail(Errc::pickle_unhashable_key,
           key_name() + " fields " + repr(key, 80) + " are not hashable");
    }
    obj.key = std::move(key);
    obj.built = true;
  }

  // SPEC 1.4 dict state: a dict of exactly the fields, in any order.
  Value key_from_dict(const Value& state) {
    const auto& fields = options_.key_class.fields;
    std::vector<Value> values(fields.size());
    std::size_t found = 0;
    if (state.is(ValueKind::mapping) && state.entries().size() == fields.size()) {
      for (const auto& [k, v] : state.entries()) {
        if (!k.is(ValueKind::string)) break;
        auto it = std::find(fields.begin(), fields.end(), k.as_str());
        if (it == fields.end()) break;
        values[static_cast<std::size_t>(it - fields.begin())] = v;
        ++found;  // keys are distinct: the dict refused duplicates
      }
    }
    if (found != fields.size()) {
      std::string hint = state.is(ValueKind::list)
                             ? " (a list is the values state of a frozen slots=True dataclass)"
                             : "";
      fail(Errc::pickle_reduce, "BUILD state of " + key_name() + " must be a dict of exactly " +
                                    field_list() + ", got " + repr(state, 80) + hint);
    }
    return Value::tuple(std::move(values));
  }

  // SPEC 1.4 values state: the list of the field values in field order.
  Value key_from_values(const Value& state) {
    const auto& fields = options_.key_class.fields;
    if (!state.is(ValueKind::list) || state.items().size() != fields.size()) {
      std::string hint = state.is(ValueKind::mapping)
                             ? " (a dict is the dict state of a dataclass without slots)"
                             : "";
      fail(Errc::pickle_reduce, "BUILD state of " + key_name() + " must be the list of its " +
                                    std::to_string(fields.size()) + " field values " +
                                    field_list() + " in order, got " + repr(state, 80) + hint);
    }
    auto items = state.items();
    return Value::tuple(std::vector<Value>(items.begin(), items.end()));
  }

  // 'a', 'b' and 'c'
  std::string field_list() const {
    const auto& fields = options_.key_class.fields;
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) out += i + 1 == fields.size() ? " and " : ", ";
      out += quote_text(fields[i]);
    }
    return out;
  }

  const std::string& key_name() const { return options_.key_class.name; }

  // ---- scalars ------------------------------------------------------------------
  // Short strings (tags, dtype names, field names) repeat in every item: equal ones share
  // one node, found by their bytes in the input (which outlives the reader).
  void push_text(std::string_view text) {
    if (text.size() <= kInternMax) {
      auto it = interned_.find(text);
      if (it != interned_.end()) {
        push(it->second);
        return;
      }
    }
    if (!is_valid_utf8(text)) {
      fail(Errc::pickle_invalid_utf8,
           "string " + quote_bytes(text) + " is not valid UTF-8 (lone surrogates are refused)");
    }
    Value v = Value::string(text);
    if (text.size() <= kInternMax) interned_.emplace(text, v);
    push(std::move(v));
  }

  void push_long1() {
    std::uint8_t n = take_u8("LONG1 length");
    if (n > 8) {
      fail(Errc::pickle_int_range,
           "LONG1 of " + std::to_string(n) + " bytes: integers beyond 64 bits are refused");
    }
    std::uint64_t x = take_le(n, "LONG1 bytes");
    if (n > 0 && n < 8 && (x >> (8 * n - 1)) & 1) x |= ~std::uint64_t{0} << (8 * n);
    push(Value::integer(static_cast<std::int64_t>(x)));
  }

  void push_binfloat() {
    std::string_view b = take_bytes(8, "BINFLOAT");
    std::uint64_t bits = 0;
    for (char c : b) bits = (bits << 8) | static_cast<std::uint8_t>(c);
    push(Value::floating(std::bit_cast<double>(bits)));
  }

  // ---- the loop ---------------------------------------------------------------------
  void dispatch(std::uint8_t op) {
    switch (op) {
      case op::PROTO: {
        std::uint8_t proto = take_u8("PROTO");
        if (proto < 2 || proto > 5) {
          fail(Errc::pickle_protocol,
               "protocol " + std::to_string(proto) + " is refused; protocols 2 to 5 are accepted");
        }
        return;
      }
      case op::FRAME:
        need(take_le(8, "FRAME length"), "FRAME");
        return;
      case op::MARK:
        grow_stack();
        marks_.push_back(stack_.size());
        return;
      case op::POP:
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
        } else {
          pop_slot("POP");
        }
        return;
      case op::POP_MARK:
        pop_mark("POP_MARK");
        return;
      case op::NONE:
        push(Value());
        return;
      case op::NEWTRUE:
        push(Value::boolean(true));
        return;
      case op::NEWFALSE:
        push(Value::boolean(false));
        return;
      case op::BININT:
        push(Value::integer(static_cast<std::int32_t>(take_le(4, "BININT"))));
        return;
      case op::BININT1:
        push(Value::integer(static_cast<std::int64_t>(take_le(1, "BININT1"))));
        return;
      case op::BININT2:
        push(Value::integer(static_cast<std::int64_t>(take_le(2, "BININT2"))));
        return;
      case op::LONG1:
        push_long1();
        return;
      case op::BINFLOAT:
        push_binfloat();
        return;
      case op::SHORT_BINUNICODE:
        push_text(take_bytes(take_le(1, "length"), "SHORT_BINUNICODE"));
        return;
      case op::BINUNICODE:
        push_text(take_bytes(take_le(4, "length"), "BINUNICODE"));
        return;
      case op::BINUNICODE8:
        push_text(take_bytes(take_le(8, "length"), "BINUNICODE8"));
        return;
      case op::SHORT_BINBYTES:
        push(Value::bytes(take_bytes(take_le(1, "length"), "SHORT_BINBYTES")));
        return;
      case op::BINBYTES:
        push(Value::bytes(take_bytes(take_le(4, "length"), "BINBYTES")));
        return;
      case op::BINBYTES8:
        push(Value::bytes(take_bytes(take_le(8, "length"), "BINBYTES8")));
        return;
      case op::BYTEARRAY8: {
        std::string_view b = take_bytes(take_le(8, "length"), "BYTEARRAY8");
        push(Value::bytearray(SharedBytes::copy_of(b)));
        return;
      }
      case op::EMPTY_TUPLE:
        // All empty tuples share one node (as in CPython): a tuple is never modified.
        if (empty_tuple_.is(ValueKind::none)) empty_tuple_ = Value::tuple({});
        push(empty_tuple_);
        return;
      case op::TUPLE1:
      case op::TUPLE2:
      case op::TUPLE3: {
        std::size_t n = op - op::TUPLE1 + 1;
        std::vector<Value> items(n);
        for (std::size_t i = n; i-- > 0;) items[i] = pop_value(pickle_opcode_name(op).data());
        push_container(Value::tuple(std::move(items)));
        return;
      }
      case op::TUPLE:
        push_container(Value::tuple(pop_mark("TUPLE")));
        return;
      case op::EMPTY_LIST:
        push_container(Value::list({}));
        return;
      case op::LIST:
        push_container(Value::list(pop_mark("LIST")));
        return;
      case op::APPEND: {
        std::vector<Value> one;
        one.push_back(pop_value("APPEND"));
        append_items("APPEND", std::move(one));
        return;
      }
      case op::APPENDS:
        append_items("APPENDS", pop_mark("APPENDS"));
        return;
      case op::EMPTY_DICT:
        push_container(Value::mapping({}));
        return;
      case op::DICT: {
        std::vector<Value> flat = pop_mark("DICT");
        Value d = Value::mapping({});
        created(d.node_identity());
        add_entries(d, flat, "DICT");
        push(std::move(d));
        return;
      }
      case op::SETITEM: {
        std::vector<Value> flat(2);
        flat[1] = pop_value("SETITEM");
        flat[0] = pop_value("SETITEM");
        add_entries(target("SETITEM", ValueKind::mapping), flat, "SETITEM");
        return;
      }
      case op::SETITEMS: {
        std::vector<Value> flat = pop_mark("SETITEMS");
        if (flat.empty()) {
          top_slot("SETITEMS");
          return;
        }
        add_entries(target("SETITEMS", ValueKind::mapping), flat, "SETITEMS");
        return;
      }
      case op::MEMOIZE:
        memo_put(memo_.size());
        return;
      case op::BINPUT:
        memo_put(take_le(1, "BINPUT index"));
        return;
      case op::LONG_BINPUT:
        memo_put(take_le(4, "LONG_BINPUT index"));
        return;
      case op::BINGET:
        memo_get(take_le(1, "BINGET index"));
        return;
      case op::LONG_BINGET:
        memo_get(take_le(4, "LONG_BINGET index"));
        return;
      case op::GLOBAL: {
        std::string_view module = take_line();
        std::string_view name = take_line();
        push_global(module, name);
        return;
      }
      case op::STACK_GLOBAL: {
        Value name = pop_value("STACK_GLOBAL");
        Value module = pop_value("STACK_GLOBAL");
        if (!name.is(ValueKind::string) || !module.is(ValueKind::string)) {
          fail(Errc::pickle_global, "STACK_GLOBAL needs two strings, got " + repr(module, 40) +
                                        " and " + repr(name, 40));
        }
        push_global(module.as_str(), name.as_str());
        return;
      }
      case op::REDUCE:
        reduce();
        return;
      case op::NEWOBJ:
        newobj();
        return;
      case op::BUILD:
        build();
        return;
      default:
        fail(Errc::pickle_opcode,
             opcode_label(op) + " is refused: metadata pickles hold plain data only");
    }
  }

  Value finish() {
    if (pos_ != in_.size()) {
      fail(Errc::pickle_trailing_bytes,
           std::to_string(in_.size() - pos_) + " bytes follow STOP; a pickle must end at STOP");
    }
    if (!marks_.empty()) fail(Errc::pickle_stack, "STOP with an unclosed MARK");
    if (stack_.size() != 1) {
      fail(Errc::pickle_stack,
           "STOP needs exactly one item on the stack, found " + std::to_string(stack_.size()));
    }
    Value result = pop_value("STOP");
    check_limits(result);
    return result;
  }

  std::span<const std::uint8_t> in_;
  const PickleReadOptions& options_;
  std::string key_module_, key_name_;
  std::size_t pos_ = 0;
  std::size_t op_offset_ = 0;
  std::uint64_t work_ = 0;
  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;
  // Keyed hashes: memo indices come from the peer (BINPUT), so std::hash's identity on
  // ints would let it aim every index at one bucket.
  std::unordered_map<std::uint64_t, Slot, SeededHash> memo_;
  std::unordered_set<const void*, SeededHash> frozen_;
  std::unordered_map<const void*, MappingKeys, SeededHash> dict_keys_;
  static constexpr std::size_t kInternMax = 32;
  std::unordered_map<std::string_view, Value, SeededHash> interned_;
  std::vector<Global> globals_;
  std::vector<KeyObject> key_objects_;
  Value empty_tuple_;

  const std::string& name_of(const Slot& s) const { return globals_[s.index].name; }
  Callable callable_of(const Slot& s) const { return globals_[s.index].callable; }
};

}  // namespace

Value read_pickle(std::span<const std::uint8_t> data, const PickleReadOptions& options) {
  return Reader(data, options).run();
}

Value read_pickle(std::string_view data, const PickleReadOptions& options) {
  return read_pickle(std::span<const std::uint8_t>(
                         reinterpret_cast<const std::uint8_t*>(data.data()), data.size()),
                     options);
}

std::string_view pickle_opcode_name(std::uint8_t b) noexcept {
  // A table, several opcodes a line: clang-format settles on no layout for a run of macro
  // calls, so it is left as written.
  // clang-format off
  switch (b) {
#define HPREF_OP(name) \
  case op::name:       \
    return #name;
    HPREF_OP(MARK) HPREF_OP(STOP) HPREF_OP(POP) HPREF_OP(POP_MARK) HPREF_OP(DUP) HPREF_OP(FLOAT)
    HPREF_OP(INT) HPREF_OP(BININT) HPREF_OP(BININT1) HPREF_OP(LONG) HPREF_OP(BININT2)
    HPREF_OP(NONE) HPREF_OP(PERSID) HPREF_OP(BINPERSID) HPREF_OP(REDUCE) HPREF_OP(STRING)
    HPREF_OP(BINSTRING) HPREF_OP(SHORT_BINSTRING) HPREF_OP(UNICODE) HPREF_OP(BINUNICODE)
    HPREF_OP(APPEND) HPREF_OP(BUILD) HPREF_OP(GLOBAL) HPREF_OP(DICT) HPREF_OP(EMPTY_DICT)
    HPREF_OP(APPENDS) HPREF_OP(GET) HPREF_OP(BINGET) HPREF_OP(INST) HPREF_OP(LONG_BINGET)
    HPREF_OP(LIST) HPREF_OP(EMPTY_LIST) HPREF_OP(OBJ) HPREF_OP(PUT) HPREF_OP(BINPUT)
    HPREF_OP(LONG_BINPUT) HPREF_OP(SETITEM) HPREF_OP(TUPLE) HPREF_OP(EMPTY_TUPLE)
    HPREF_OP(SETITEMS) HPREF_OP(BINFLOAT) HPREF_OP(PROTO) HPREF_OP(NEWOBJ) HPREF_OP(EXT1)
    HPREF_OP(EXT2) HPREF_OP(EXT4) HPREF_OP(TUPLE1) HPREF_OP(TUPLE2) HPREF_OP(TUPLE3)
    HPREF_OP(NEWTRUE) HPREF_OP(NEWFALSE) HPREF_OP(LONG1) HPREF_OP(LONG4) HPREF_OP(BINBYTES)
    HPREF_OP(SHORT_BINBYTES) HPREF_OP(SHORT_BINUNICODE) HPREF_OP(BINUNICODE8) HPREF_OP(BINBYTES8)
    HPREF_OP(EMPTY_SET) HPREF_OP(ADDITEMS) HPREF_OP(FROZENSET) HPREF_OP(NEWOBJ_EX)
    HPREF_OP(STACK_GLOBAL) HPREF_OP(MEMOIZE) HPREF_OP(FRAME) HPREF_OP(BYTEARRAY8)
    HPREF_OP(NEXT_BUFFER) HPREF_OP(READONLY_BUFFER)
#undef HPREF_OP
    default: return "";
  }
  // clang-format on
}

}  // namespace hpref
