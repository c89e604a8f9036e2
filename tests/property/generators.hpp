// RapidCheck generators of Values (every kind and dtype, empty and 0-d tensors, unicode,
// extreme ints, NaN payloads), hashable keys and item lists.
#pragma once

#include <rapidcheck.h>

#include "hpref/codec.hpp"
#include "hpref/value.hpp"

namespace hpref::gen {

rc::Gen<std::int64_t> int64_value();
rc::Gen<double> float_value();
rc::Gen<std::string> utf8_text();
rc::Gen<Tensor> tensor();
// Hashable Values (None, bool, int, float, str, bytes, tuples of them).
rc::Gen<Value> key(int depth = 2);
// Any Value, at most `depth` container levels.
rc::Gen<Value> value(int depth = 4);
// Item lists with distinct keys (mostly SampleKeys); `binary` forces a binary leaf.
rc::Gen<std::vector<Item>> items(bool binary = false);

}  // namespace hpref::gen
