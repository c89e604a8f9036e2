// Value construction, the two equalities of SPEC 1.1, key hashing and KeySet.
#include "hpref/value.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "hpref/detail/node_arena.hpp"
#include "hpref/detail/value_access.hpp"
#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/siphash.hpp"
#include "hpref/utf8.hpp"

namespace hpref {

struct Value::Node {
  // A growable node (Value::list, mapping, an empty tuple; the pickle reader fills its lists and
  // dicts in place) holds its items in `grown`. A node made whole (ValueAccess::make_sequence /
  // make_mapping) holds its `size` items or entries at `fixed`, after it in its one
  // allocation, and never grows. Small, so that a decode's many small nodes take few bytes.
  struct Grown {
    std::vector<Value> items;    // tuple, list
    std::vector<Entry> entries;  // mapping
  };
  void* fixed = nullptr;  // Value[size] or Entry[size]
  std::size_t size = 0;
  std::uint64_t nodes = 1;
  int depth = 1;
  bool holds_entries = false;
  Grown* grown = nullptr;  // a Growable node's own
  struct Growable;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node() {
    for (std::size_t i = 0; i < size; ++i) {
      if (holds_entries) {
        static_cast<Entry*>(fixed)[i].~Entry();
      } else {
        static_cast<Value*>(fixed)[i].~Value();
      }
    }
  }
  bool growable() const noexcept { return grown != nullptr; }
};

// A growable node and its vectors in one allocation (the shared_ptr destroys it as made).
struct Value::Node::Growable : Value::Node {
  Grown storage;
  Growable() noexcept { grown = &storage; }
};

namespace {

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t out;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<std::uint64_t>::max() : out;
}

}  // namespace

std::string_view value_kind_name(ValueKind kind) noexcept {
  switch (kind) {
    case ValueKind::none:
      return "NoneType";
    case ValueKind::boolean:
      return "bool";
    case ValueKind::integer:
      return "int";
    case ValueKind::floating:
      return "float";
    case ValueKind::string:
      return "str";
    case ValueKind::bytes:
      return "bytes";
    case ValueKind::bytearray:
      return "bytearray";
    case ValueKind::tensor:
      return "Tensor";
    case ValueKind::tuple:
      return "tuple";
    case ValueKind::list:
      return "list";
    case ValueKind::mapping:
      return "dict";
  }
  return "?";
}

Value Value::string(std::string_view utf8) {
  if (!is_valid_utf8(utf8)) {
    throw Error(Errc::invalid_utf8, "string " + quote_bytes(utf8) + " is not valid UTF-8");
  }
  Value v;
  v.kind_ = ValueKind::string;
  v.ptr_ = std::make_shared<std::string>(utf8);
  return v;
}

Value Value::bytes(std::span<const std::uint8_t> data) { return bytes(SharedBytes::copy_of(data)); }

Value Value::bytes(std::string_view data) { return bytes(SharedBytes::copy_of(data)); }

Value Value::bytes(SharedBytes data) noexcept {
  Value v;
  v.kind_ = ValueKind::bytes;
  v.ptr_ = std::make_shared<SharedBytes>(std::move(data));
  return v;
}

Value Value::bytearray(std::span<const std::uint8_t> data) {
  return bytearray(SharedBytes::copy_of(data));
}

Value Value::bytearray(SharedBytes data) noexcept {
  Value v = bytes(std::move(data));
  v.kind_ = ValueKind::bytearray;
  return v;
}

Value Value::tensor(Tensor t) noexcept {
  Value v;
  v.kind_ = ValueKind::tensor;
  v.ptr_ = std::make_shared<Tensor>(std::move(t));
  return v;
}

// Tuples never grow: a non-empty one is built whole (one allocation). Lists and mappings
// stay growable, whatever they start with: the pickle reader appends to a list that LIST
// made and sets items in a dict that DICT made (SPEC 2.3).
Value Value::tuple(std::vector<Value> items) {
  if (!items.empty()) return detail::ValueAccess::make_sequence(ValueKind::tuple, items);
  Value v;
  v.kind_ = ValueKind::tuple;
  v.ptr_ = std::make_shared<Node::Growable>();
  return v;
}

Value Value::list(std::vector<Value> items) {
  auto node = std::make_shared<Node::Growable>();
  for (const Value& item : items) {
    node->nodes = saturating_add(node->nodes, item.node_count());
    node->depth = std::max(node->depth, item.depth() + 1);
  }
  node->storage.items = std::move(items);  // the caller's vector becomes the node's storage
  Value v;
  v.kind_ = ValueKind::list;
  v.ptr_ = std::move(node);
  return v;
}

Value Value::mapping(std::vector<Entry> entries) {
  Value v;
  v.kind_ = ValueKind::mapping;
  v.ptr_ = std::make_shared<Node::Growable>();
  detail::ValueAccess::reserve(v, entries.size());
  MappingKeys seen;
  for (Entry& e : entries) {
    if (!e.first.is_hashable()) {
      throw Error(Errc::unhashable_key, "mapping key " + repr(e.first) + " of type " +
                                            std::string(value_kind_name(e.first.kind())) +
                                            " is not hashable");
    }
    if (seen.repeats(v.entries(), e.first)) {
      throw Error(Errc::duplicate_key, "mapping key " + repr(e.first) + " appears twice");
    }
    detail::ValueAccess::add_entry(v, std::move(e.first), std::move(e.second));
  }
  return v;
}

bool Value::as_bool() const {
  HPREF_CHECK(kind_ == ValueKind::boolean);
  return scalar_.b;
}

std::int64_t Value::as_int() const {
  HPREF_CHECK(kind_ == ValueKind::integer);
  return scalar_.i;
}

double Value::as_float() const {
  HPREF_CHECK(kind_ == ValueKind::floating);
  return scalar_.f;
}

std::string_view Value::as_str() const {
  HPREF_CHECK(kind_ == ValueKind::string);
  return *static_cast<const std::string*>(ptr_.get());
}

const SharedBytes& Value::as_bytes() const {
  HPREF_CHECK(kind_ == ValueKind::bytes || kind_ == ValueKind::bytearray);
  return *static_cast<const SharedBytes*>(ptr_.get());
}

const Tensor& Value::as_tensor() const {
  HPREF_CHECK(kind_ == ValueKind::tensor);
  return *static_cast<const Tensor*>(ptr_.get());
}

std::span<const Value> Value::items() const {
  HPREF_CHECK(kind_ == ValueKind::tuple || kind_ == ValueKind::list);
  const auto* node = static_cast<const Node*>(ptr_.get());
  if (node->grown != nullptr) return node->grown->items;
  return {static_cast<const Value*>(node->fixed), node->size};
}

std::span<const Value::Entry> Value::entries() const {
  HPREF_CHECK(kind_ == ValueKind::mapping);
  const auto* node = static_cast<const Node*>(ptr_.get());
  if (node->grown != nullptr) return node->grown->entries;
  return {static_cast<const Entry*>(node->fixed), node->size};
}

std::uint64_t Value::node_count() const noexcept {
  return is_container() ? static_cast<const Node*>(ptr_.get())->nodes : 1;
}

int Value::depth() const noexcept {
  return is_container() ? static_cast<const Node*>(ptr_.get())->depth : 0;
}

bool Value::is_hashable() const noexcept {
  switch (kind_) {
    case ValueKind::none:
    case ValueKind::boolean:
    case ValueKind::integer:
    case ValueKind::floating:
    case ValueKind::string:
    case ValueKind::bytes:
      return true;
    case ValueKind::tuple:
      for (const Value& item : items()) {
        if (!item.is_hashable()) return false;
      }
      return true;
    default:
      return false;
  }
}

const void* Value::node_identity() const noexcept { return is_container() ? ptr_.get() : nullptr; }

namespace detail {

Value ValueAccess::make_sequence(ValueKind kind, std::span<Value> items) {
  HPREF_CHECK(kind == ValueKind::tuple || kind == ValueKind::list);
  // The control block, the node and the items in one allocation (from this thread's
  // NodeArena when one is active: a large decode's).
  auto node = std::allocate_shared<Value::Node>(
      ArenaAllocator<Value::Node>(items.size() * sizeof(Value), sizeof(Value::Node)));
  auto* out = static_cast<Value*>(arena_tail_start());
  for (std::size_t i = 0; i < items.size(); ++i) {
    node->nodes = saturating_add(node->nodes, items[i].node_count());
    node->depth = std::max(node->depth, items[i].depth() + 1);
    new (out + i) Value(std::move(items[i]));
  }
  node->fixed = out;
  node->size = items.size();
  Value v;
  v.kind_ = kind;
  v.ptr_ = std::move(node);
  return v;
}

Value ValueAccess::adopt_tensor(std::shared_ptr<const Tensor> tensor) noexcept {
  Value v;
  v.kind_ = ValueKind::tensor;
  v.ptr_ = std::const_pointer_cast<Tensor>(std::move(tensor));
  return v;
}

Value ValueAccess::make_mapping(std::span<Value::Entry> entries) {
  auto node = std::allocate_shared<Value::Node>(
      ArenaAllocator<Value::Node>(entries.size() * sizeof(Value::Entry), sizeof(Value::Node)));
  auto* out = static_cast<Value::Entry*>(arena_tail_start());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Value& key = entries[i].first;
    const Value& value = entries[i].second;
    node->nodes = saturating_add(node->nodes, saturating_add(key.node_count(), value.node_count()));
    node->depth = std::max({node->depth, key.depth() + 1, value.depth() + 1});
    new (out + i) Value::Entry(std::move(entries[i]));
  }
  node->fixed = out;
  node->size = entries.size();
  node->holds_entries = true;
  Value v;
  v.kind_ = ValueKind::mapping;
  v.ptr_ = std::move(node);
  return v;
}

void ValueAccess::append(Value& container, Value child) {
  auto* node = static_cast<Value::Node*>(container.ptr_.get());
  HPREF_CHECK(node->growable());
  node->nodes = saturating_add(node->nodes, child.node_count());
  node->depth = std::max(node->depth, child.depth() + 1);
  node->grown->items.push_back(std::move(child));
}

void ValueAccess::add_entry(Value& mapping, Value key, Value value) {
  auto* node = static_cast<Value::Node*>(mapping.ptr_.get());
  HPREF_CHECK(node->growable());
  node->nodes = saturating_add(node->nodes, saturating_add(key.node_count(), value.node_count()));
  node->depth = std::max({node->depth, key.depth() + 1, value.depth() + 1});
  node->grown->entries.emplace_back(std::move(key), std::move(value));
}

void ValueAccess::reserve(Value& container, std::size_t more) {
  auto* node = static_cast<Value::Node*>(container.ptr_.get());
  HPREF_CHECK(node->growable());
  if (container.kind_ == ValueKind::mapping) {
    node->grown->entries.reserve(node->grown->entries.size() + more);
  } else {
    node->grown->items.reserve(node->grown->items.size() + more);
  }
}

long ValueAccess::use_count(const Value& v) noexcept { return v.ptr_.use_count(); }

}  // namespace detail

// ---------------------------------------------------------------------------
// Structural equality.

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::none:
      return true;
    case ValueKind::boolean:
      return a.as_bool() == b.as_bool();
    case ValueKind::integer:
      return a.as_int() == b.as_int();
    case ValueKind::floating:
      return std::bit_cast<std::uint64_t>(a.as_float()) ==
             std::bit_cast<std::uint64_t>(b.as_float());
    case ValueKind::string:
      return a.as_str() == b.as_str();
    case ValueKind::bytes:
    case ValueKind::bytearray:
      return a.as_bytes() == b.as_bytes();
    case ValueKind::tensor:
      return a.as_tensor() == b.as_tensor();
    case ValueKind::tuple:
    case ValueKind::list: {
      if (a.node_identity() == b.node_identity()) return true;
      auto x = a.items();
      auto y = b.items();
      return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
    }
    case ValueKind::mapping: {
      if (a.node_identity() == b.node_identity()) return true;
      auto x = a.entries();
      auto y = b.entries();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!(x[i].first == y[i].first) || !(x[i].second == y[i].second)) return false;
      }
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Key equality and hashing (Python semantics on hashable Values).

namespace {

bool is_numeric(ValueKind k) {
  return k == ValueKind::boolean || k == ValueKind::integer || k == ValueKind::floating;
}

// The int64 a double equals exactly, if any.
std::optional<std::int64_t> exact_int(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
  if (std::trunc(d) != d) return std::nullopt;
  return static_cast<std::int64_t>(d);
}

std::optional<std::int64_t> integral_value(const Value& v) {
  switch (v.kind()) {
    case ValueKind::boolean:
      return v.as_bool() ? 1 : 0;
    case ValueKind::integer:
      return v.as_int();
    case ValueKind::floating:
      return exact_int(v.as_float());
    default:
      return std::nullopt;
  }
}

}  // namespace

std::uint64_t key_work_units(const Value& key) noexcept {
  switch (key.kind()) {
    case ValueKind::string:
      return 1 + key.as_str().size() / 64;
    case ValueKind::bytes:
    case ValueKind::bytearray:
      return 1 + key.as_bytes().size() / 64;
    case ValueKind::tuple:
    case ValueKind::list: {
      std::uint64_t units = 1;
      for (const Value& item : key.items()) units += key_work_units(item);
      return units;
    }
    default:
      return 1;
  }
}

bool key_equal(const Value& a, const Value& b) noexcept {
  if (is_numeric(a.kind()) && is_numeric(b.kind())) {
    if (a.is(ValueKind::floating) && b.is(ValueKind::floating)) {
      return a.as_float() == b.as_float();
    }
    auto x = integral_value(a);
    auto y = integral_value(b);
    return x && y && *x == *y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::none:
      return true;
    case ValueKind::string:
      return a.as_str() == b.as_str();
    case ValueKind::bytes:
      return a.as_bytes() == b.as_bytes();
    case ValueKind::tuple: {
      auto x = a.items();
      auto y = b.items();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!key_equal(x[i], y[i])) return false;
      }
      return true;
    }
    default:
      return false;  // unhashable kinds equal nothing
  }
}

// SipHash-1-3 (Aumasson and Bernstein) under a key drawn once per process: an attacker
// who picks the keys of a dict, an __hp_mapping__ node or a merge cannot aim them at one
// bucket (hash flooding), as they could with std::hash (the identity on ints, a fixed-seed
// MurmurHash on text).
namespace {

struct SipKey {
  std::uint64_t k0, k1;
};

SipKey draw_sip_key() noexcept {
  std::uint64_t k0 = 0, k1 = 0;
  try {
    std::random_device rd;
    k0 = (std::uint64_t{rd()} << 32) ^ rd();
    k1 = (std::uint64_t{rd()} << 32) ^ rd();
  } catch (...) {
  }
  // Mixed with what differs between processes anyway, should random_device be weak.
  auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  k0 ^= t * 0x9e3779b97f4a7c15ULL;
  k1 ^= reinterpret_cast<std::uintptr_t>(&k1) * 0xbf58476d1ce4e5b9ULL;
  return {k0, k1};
}

const SipKey& sip_key() noexcept {
  static const SipKey key = draw_sip_key();
  return key;
}

class Sip13 {
 public:
  explicit Sip13(std::uint64_t domain, const SipKey& k = sip_key()) noexcept {
    v0_ = k.k0 ^ 0x736f6d6570736575ULL ^ domain;
    v1_ = k.k1 ^ 0x646f72616e646f6dULL;
    v2_ = k.k0 ^ 0x6c7967656e657261ULL;
    v3_ = k.k1 ^ 0x7465646279746573ULL;
  }

  void word(std::uint64_t m) noexcept {
    v3_ ^= m;
    round();
    v0_ ^= m;
    length_ += 8;
  }

  void bytes(std::string_view data) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= data.size(); i += 8) {
      std::uint64_t m;
      std::memcpy(&m, data.data() + i, 8);
      word(m);
    }
    std::uint64_t tail = 0;
    if (i < data.size()) std::memcpy(&tail, data.data() + i, data.size() - i);
    tail_ = tail;
    length_ += data.size() - i;
  }

  std::uint64_t finish() noexcept {
    std::uint64_t b = (length_ << 56) | tail_;
    v3_ ^= b;
    round();
    v0_ ^= b;
    v2_ ^= 0xff;
    round();
    round();
    round();
    return v0_ ^ v1_ ^ v2_ ^ v3_;
  }

 private:
  void round() noexcept {
    v0_ += v1_;
    v1_ = std::rotl(v1_, 13);
    v1_ ^= v0_;
    v0_ = std::rotl(v0_, 32);
    v2_ += v3_;
    v3_ = std::rotl(v3_, 16);
    v3_ ^= v2_;
    v0_ += v3_;
    v3_ = std::rotl(v3_, 21);
    v3_ ^= v0_;
    v2_ += v1_;
    v1_ = std::rotl(v1_, 17);
    v1_ ^= v2_;
    v2_ = std::rotl(v2_, 32);
  }

  std::uint64_t v0_, v1_, v2_, v3_;
  std::uint64_t length_ = 0;
  std::uint64_t tail_ = 0;
};

// Domains keep the kinds apart (an int and the str of its bytes hash differently).
enum : std::uint64_t { kNumber = 1, kFloat = 2, kText = 3, kBytes = 4, kTuple = 5, kRaw = 6 };

std::uint64_t hash_word(std::uint64_t domain, std::uint64_t x) noexcept {
  Sip13 h(domain);
  h.word(x);
  return h.finish();
}

std::uint64_t hash_text(std::uint64_t domain, std::string_view text) noexcept {
  Sip13 h(domain);
  h.bytes(text);
  return h.finish();
}

}  // namespace

std::uint64_t seeded_hash(std::uint64_t x) noexcept { return hash_word(kRaw, x); }

std::uint64_t seeded_hash(std::string_view bytes) noexcept { return hash_text(kRaw, bytes); }

std::uint64_t siphash13(std::uint64_t k0, std::uint64_t k1, std::string_view bytes) noexcept {
  Sip13 h(0, SipKey{k0, k1});
  h.bytes(bytes);
  return h.finish();
}

namespace {

// A tuple node that memo references share (use_count > 1) is hashed once per key_hash call:
// a key of a few hundred bytes whose tuples nest pairs of one shared tuple has 2^depth
// logical nodes, and hashing them one by one cost seconds per merge (SPEC 2.4 charges the
// logical count to the budget; the work need not follow it). The nodes stay alive: the key
// being hashed holds them.
using TupleHashes = std::unordered_map<const void*, std::uint64_t, SeededHash>;

std::uint64_t hash_key(const Value& v, TupleHashes& shared);

std::uint64_t hash_items(const Value& v, TupleHashes& shared) {
  Sip13 h(kTuple);
  for (const Value& item : v.items()) h.word(hash_key(item, shared));
  return h.finish();
}

std::uint64_t hash_key(const Value& v, TupleHashes& shared) {
  if (v.is(ValueKind::tuple) && detail::ValueAccess::use_count(v) > 1) {
    if (auto it = shared.find(v.node_identity()); it != shared.end()) return it->second;
    std::uint64_t h = hash_items(v, shared);
    shared.emplace(v.node_identity(), h);
    return h;
  }
  if (v.is(ValueKind::tuple)) return hash_items(v, shared);
  return key_hash(v);
}

}  // namespace

std::size_t key_hash(const Value& v) noexcept {
  switch (v.kind()) {
    case ValueKind::none:
      return hash_word(kNumber, 0x6e6f6e65);
    case ValueKind::boolean:
    case ValueKind::integer:
    case ValueKind::floating: {
      // Key-equal numbers (True, 1, 1.0) hash alike.
      if (auto i = integral_value(v)) return hash_word(kNumber, static_cast<std::uint64_t>(*i));
      return hash_word(kFloat, std::bit_cast<std::uint64_t>(v.as_float()));
    }
    case ValueKind::string:
      return hash_text(kText, v.as_str());
    case ValueKind::bytes:
      return hash_text(kBytes, v.as_bytes().view());
    case ValueKind::tuple: {
      // The key's own node is not looked up (it is shared by whoever holds the key: a
      // set and its caller); its items are, when shared.
      try {
        TupleHashes shared;
        return hash_items(v, shared);
      } catch (const std::bad_alloc&) {  // no memory for the table: item by item
        Sip13 plain(kTuple);
        for (const Value& item : v.items()) plain.word(key_hash(item));
        return plain.finish();
      }
    }
    default:
      return 7;
  }
}

struct KeySet::Impl {
  // Each key with its hash, computed once: the table rehashes as it grows and, without
  // hashes kept beside the keys, walks a bucket by hashing its keys again (libstdc++ keeps
  // none for a hash it takes to be fast); and keys are compared only when the hashes are
  // equal. A long key (memo-shared tuples) cost its length at each of those.
  struct Hashed {
    Value key;
    std::size_t hash;
  };
  struct ByHash {
    std::size_t operator()(const Hashed& k) const noexcept { return k.hash; }
  };
  struct Equal {
    bool operator()(const Hashed& a, const Hashed& b) const noexcept {
      return a.hash == b.hash && key_equal(a.key, b.key);
    }
  };
  std::unordered_set<Hashed, ByHash, Equal> keys;
  bool insert(const Value& key) { return keys.insert({key, key_hash(key)}).second; }
};

namespace {
constexpr std::size_t kLinearKeys = 16;
}

KeySet::KeySet() = default;
KeySet::~KeySet() = default;
KeySet::KeySet(KeySet&&) noexcept = default;
KeySet& KeySet::operator=(KeySet&&) noexcept = default;

bool MappingKeys::scanned(std::span<const Value::Entry> so_far, const Value& key) noexcept {
  for (const Value::Entry& e : so_far) {
    if (key_equal(e.first, key)) return true;
  }
  return false;
}

bool MappingKeys::repeats_in_set(std::span<const Value::Entry> so_far, const Value& key) {
  // Built from the entries when the scan ends, and whenever the set does not hold exactly
  // as many keys as the mapping: one kept for another mapping (the pickle reader keeps them
  // by address), or entries added without asking. Otherwise it holds exactly `so_far`.
  if (!seen_ || so_far.size() == kScannedKeys || seen_->size() != so_far.size()) {
    seen_.emplace();
    for (const Value::Entry& e : so_far) seen_->insert(e.first);
  }
  return !seen_->insert(key);
}

bool KeySet::insert(const Value& key) {
  if (impl_) return impl_->insert(key);
  for (const Value& k : small_) {
    if (key_equal(k, key)) return false;
  }
  if (small_.size() < kLinearKeys) {
    small_.push_back(key);
    return true;
  }
  impl_ = std::make_unique<Impl>();
  for (const Value& k : small_) impl_->insert(k);
  small_.clear();
  return impl_->insert(key);
}

std::size_t KeySet::size() const noexcept { return impl_ ? impl_->keys.size() : small_.size(); }

}  // namespace hpref
