// Value (SPEC 1.1): the tree of None, bool, int64, double, str, bytes, bytearray,
// Tensor, tuple, list and insertion-ordered mapping that payloads and control
// messages are made of. Values are immutable once built; copies share children,
// which is unobservable. Two equalities: structural (type-exact, floats by bits,
// used by round-trip tests) and key equality (Python's ==, used for duplicates).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"

namespace hpref {

enum class ValueKind : unsigned char {
  none,
  boolean,
  integer,
  floating,
  string,
  bytes,
  bytearray,
  tensor,
  tuple,
  list,
  mapping,
};

// Python's type name for a kind ("NoneType", "int", "dict", ...).
std::string_view value_kind_name(ValueKind kind) noexcept;

class Value;
namespace detail {
struct ValueAccess;
}

class Value {
 public:
  using Entry = std::pair<Value, Value>;

  // Scalars are built inline: decoders build millions.
  Value() noexcept : kind_(ValueKind::none), scalar_{.i = 0} {}  // None

  static Value none() noexcept { return Value(); }
  static Value boolean(bool b) noexcept { return Value(ValueKind::boolean, {.b = b}); }
  static Value integer(std::int64_t i) noexcept { return Value(ValueKind::integer, {.i = i}); }
  static Value floating(double d) noexcept { return Value(ValueKind::floating, {.f = d}); }
  // Throws Error invalid_utf8 unless `utf8` is valid UTF-8 (no surrogates).
  static Value string(std::string_view utf8);
  static Value bytes(std::span<const std::uint8_t> data);
  static Value bytes(std::string_view data);
  static Value bytes(SharedBytes data) noexcept;
  static Value bytearray(std::span<const std::uint8_t> data);
  static Value bytearray(SharedBytes data) noexcept;
  static Value tensor(Tensor t) noexcept;
  static Value tuple(std::vector<Value> items);
  static Value list(std::vector<Value> items);
  // Keys must be hashable (Error unhashable_key) and distinct under key equality
  // (Error duplicate_key).
  static Value mapping(std::vector<Entry> entries);

  ValueKind kind() const noexcept { return kind_; }
  bool is(ValueKind k) const noexcept { return kind_ == k; }
  bool is_container() const noexcept {
    return kind_ == ValueKind::tuple || kind_ == ValueKind::list || kind_ == ValueKind::mapping;
  }
  bool is_binary_leaf() const noexcept {
    return kind_ == ValueKind::tensor || kind_ == ValueKind::bytes || kind_ == ValueKind::bytearray;
  }

  // Accessors; each checks the kind (an internal error on misuse).
  bool as_bool() const;
  std::int64_t as_int() const;
  double as_float() const;
  std::string_view as_str() const;
  const SharedBytes& as_bytes() const;  // bytes or bytearray
  const Tensor& as_tensor() const;
  std::span<const Value> items() const;    // tuple or list
  std::span<const Entry> entries() const;  // mapping

  // Nodes of the tree counted as if every shared child were copied (saturating),
  // and container depth (a scalar is 0, each tuple/list/mapping level adds 1).
  std::uint64_t node_count() const noexcept;
  int depth() const noexcept;
  // None, bool, int, float, str, bytes, and tuples of hashable Values (SPEC 1.1).
  bool is_hashable() const noexcept;
  // Identity of the shared container node (nullptr for scalars and leaves).
  const void* node_identity() const noexcept;

 private:
  friend struct detail::ValueAccess;
  struct Node;
  union Scalar {
    bool b;
    std::int64_t i;
    double f;
  };
  Value(ValueKind kind, Scalar scalar) noexcept : kind_(kind), scalar_(scalar) {}

  ValueKind kind_;
  Scalar scalar_;
  // The string, SharedBytes, Tensor or Node of this kind (null for scalars).
  std::shared_ptr<void> ptr_;
};

// Structural equality (SPEC 1.1): type-exact, floats by bit pattern, tensors by
// dtype, shape and bytes, mappings entry by entry in order.
bool operator==(const Value& a, const Value& b) noexcept;

// Prints repr(v) (hpref/repr.hpp), shortened when long.
std::ostream& operator<<(std::ostream& os, const Value& v);

// The work of hashing or comparing `key` as a mapping or item key, in units of about one
// Value node: one per node plus one per 64 bytes of its strings and bytes. A long key that
// memo references share costs its length at every use, so decoders charge this against
// their work budget (the node limit plus the input's size, SPEC 2.4).
std::uint64_t key_work_units(const Value& key) noexcept;

// Python's key equality (SPEC 1.1): True == 1 == 1.0, 0.0 == -0.0, NaN equals nothing,
// tuples element-wise. Defined for all Values; unhashable ones equal nothing.
bool key_equal(const Value& a, const Value& b) noexcept;
// A hash consistent with key_equal, keyed per process (SipHash-1-3 under a random key), so
// keys from a peer cannot be chosen to collide (hash flooding).
std::size_t key_hash(const Value& v) noexcept;

// The same keyed hash for the reader's and decoder's own tables (memo indices, interned
// text, node identities): no table indexed by peer-chosen data uses std::hash.
std::uint64_t seeded_hash(std::uint64_t x) noexcept;
std::uint64_t seeded_hash(std::string_view bytes) noexcept;
struct SeededHash {
  std::size_t operator()(std::uint64_t x) const noexcept { return seeded_hash(x); }
  std::size_t operator()(const void* p) const noexcept {
    return seeded_hash(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)));
  }
  std::size_t operator()(std::string_view s) const noexcept { return seeded_hash(s); }
};

// A set of keys under key equality; insert() returns false for a key already present.
// Small sets are scanned linearly (no hashing, one allocation); larger ones are hashed.
class KeySet {
 public:
  KeySet();
  ~KeySet();
  KeySet(KeySet&&) noexcept;
  KeySet& operator=(KeySet&&) noexcept;
  bool insert(const Value& key);
  std::size_t size() const noexcept;

 private:
  struct Impl;
  std::vector<Value> small_;
  std::unique_ptr<Impl> impl_;
};

// How a mapping being built finds a key that repeats (key equality), in Value::mapping and
// every decoder: while it has fewer than kScannedKeys entries (most mappings: a sample's
// fields) by scanning them, without allocating; past that through a KeySet built from
// them. One per mapping; ask about each key, in order, before adding it.
inline constexpr std::size_t kScannedKeys = 16;
class MappingKeys {
 public:
  // Whether `key` equals one of `so_far`, the mapping's entries added before it.
  // Inline: decoders ask for every key. A str (the usual key) equals only a str of its bytes.
  bool repeats(std::span<const Value::Entry> so_far, const Value& key) {
    if (so_far.size() >= kScannedKeys) return repeats_in_set(so_far, key);
    if (!key.is(ValueKind::string)) return scanned(so_far, key);
    std::string_view text = key.as_str();
    for (const Value::Entry& e : so_far) {
      if (e.first.is(ValueKind::string) && e.first.as_str() == text) return true;
    }
    return false;
  }

 private:
  // key_equal against each of `so_far` (any key; repeats() compares a str itself).
  static bool scanned(std::span<const Value::Entry> so_far, const Value& key) noexcept;
  bool repeats_in_set(std::span<const Value::Entry> so_far, const Value& key);
  std::optional<KeySet> seen_;
};

}  // namespace hpref
