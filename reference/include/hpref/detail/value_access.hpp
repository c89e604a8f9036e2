// Internal: in-place construction of containers, used by the pickle reader so that it
// can fill a list or dict that is already memoized (SPEC 2.3). Not for users.
#pragma once

#include <span>

#include "hpref/value.hpp"

namespace hpref::detail {

struct ValueAccess {
  // Appends to a list or tuple under construction, updating its node count and depth.
  static void append(Value& container, Value child);
  // Adds an entry to a mapping under construction (the caller checks duplicates).
  static void add_entry(Value& mapping, Value key, Value value);
  // Makes room for `more` further items (list, tuple) or entries (mapping).
  static void reserve(Value& container, std::size_t more);
  // Count of owners of a container node (1: only its parent holds it).
  static long use_count(const Value& v) noexcept;
  // A tuple or list (`kind`), or a mapping, made in one allocation from `items` / `entries`
  // (moved from); it cannot grow. The caller has checked the keys (hashable, distinct).
  static Value make_sequence(ValueKind kind, std::span<Value> items);
  static Value make_mapping(std::span<Value::Entry> entries);
  // A tensor Value of a Tensor its caller owns through `tensor` (which may share a larger
  // allocation's ownership).
  static Value adopt_tensor(std::shared_ptr<const Tensor> tensor) noexcept;
};

}  // namespace hpref::detail
