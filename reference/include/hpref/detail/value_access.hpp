// Internal: in-place construction of containers, used by the pickle reader so that it
// can fill a list or dict that is already memoized (SPEC 2.3). Not for users.
#pragma once

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
};

}  // namespace hpref::detail
