// RapidCheck generators for the codec properties.
#include "generators.hpp"

#include <bit>
#include <limits>

#include "hpref/sample_key.hpp"

namespace hpref::gen {
namespace {

std::string encode_utf8(const std::vector<std::uint32_t>& code_points) {
  std::string out;
  for (std::uint32_t c : code_points) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

rc::Gen<std::vector<std::uint8_t>> byte_string() {
  return rc::gen::container<std::vector<std::uint8_t>>(rc::gen::arbitrary<std::uint8_t>());
}

rc::Gen<Value> scalar() {
  return rc::gen::weightedOneOf<Value>({
      {1, rc::gen::just(Value())},
      {2, rc::gen::map(rc::gen::arbitrary<bool>(), [](bool b) { return Value::boolean(b); })},
      {4, rc::gen::map(int64_value(), [](std::int64_t i) { return Value::integer(i); })},
      {3, rc::gen::map(float_value(), [](double d) { return Value::floating(d); })},
      {3, rc::gen::map(utf8_text(), [](const std::string& s) { return Value::string(s); })},
  });
}

rc::Gen<Value> binary_leaf() {
  return rc::gen::weightedOneOf<Value>({
      {3, rc::gen::map(tensor(), [](Tensor t) { return Value::tensor(std::move(t)); })},
      {2, rc::gen::map(byte_string(),
                       [](const std::vector<std::uint8_t>& b) {
                         return Value::bytes(std::span<const std::uint8_t>(b));
                       })},
      {1, rc::gen::map(byte_string(),
                       [](const std::vector<std::uint8_t>& b) {
                         return Value::bytearray(std::span<const std::uint8_t>(b));
                       })},
  });
}

Value dedupe_mapping(std::vector<std::pair<Value, Value>> entries) {
  KeySet seen;
  std::vector<Value::Entry> out;
  for (auto& e : entries) {
    if (seen.insert(e.first)) out.push_back(std::move(e));
  }
  return Value::mapping(std::move(out));
}

}  // namespace

rc::Gen<std::int64_t> int64_value() {
  using L = std::numeric_limits<std::int64_t>;
  return rc::gen::weightedOneOf<std::int64_t>({
      {3, rc::gen::arbitrary<std::int64_t>()},
      {2, rc::gen::inRange<std::int64_t>(-300, 70000)},
      {2, rc::gen::element<std::int64_t>(0, 255, 256, 65535, 65536, -1, 2147483647, -2147483648LL,
                                         2147483648LL, -2147483649LL, 1LL << 40, L::max(), L::min(),
                                         L::min() + 1)},
  });
}

rc::Gen<double> float_value() {
  using L = std::numeric_limits<double>;
  return rc::gen::weightedOneOf<double>({
      {3, rc::gen::arbitrary<double>()},
      {2, rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                       [](std::uint64_t bits) { return std::bit_cast<double>(bits); })},
      {1, rc::gen::element<double>(0.0, -0.0, L::infinity(), -L::infinity(), L::quiet_NaN(),
                                   L::denorm_min(), L::max(), 1.0)},
  });
}

rc::Gen<std::string> utf8_text() {
  auto code_point = rc::gen::weightedOneOf<std::uint32_t>({
      {6, rc::gen::inRange<std::uint32_t>(0, 0x80)},
      {2, rc::gen::inRange<std::uint32_t>(0x80, 0x800)},
      {2, rc::gen::inRange<std::uint32_t>(0x800, 0xD800)},
      {1, rc::gen::inRange<std::uint32_t>(0xE000, 0x10000)},
      {1, rc::gen::inRange<std::uint32_t>(0x10000, 0x110000)},
  });
  return rc::gen::map(rc::gen::container<std::vector<std::uint32_t>>(code_point), encode_utf8);
}

rc::Gen<Tensor> tensor() {
  return rc::gen::exec([] {
    auto dtype = dtype_at(*rc::gen::inRange(0, kDTypeCount));
    auto shape = *rc::gen::resize(
        4, rc::gen::container<std::vector<std::int64_t>>(rc::gen::inRange<std::int64_t>(0, 5)));
    std::int64_t numel = *checked_numel(shape);
    auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(
        static_cast<std::size_t>(numel) * element_size(dtype), rc::gen::arbitrary<std::uint8_t>());
    return Tensor::copy_of(dtype, std::move(shape), bytes);
  });
}

rc::Gen<Value> key(int depth) {
  auto leaf = rc::gen::weightedOneOf<Value>({
      {6, scalar()},
      // Field names from a small pool: real items repeat them, and a repeated str key is
      // what the writer memoizes (SPEC 2.3) and the decoders fetch back.
      {3, rc::gen::map(rc::gen::element<std::string>("tokens", "score", "ok", "emb", ""),
                       [](const std::string& s) { return Value::string(s); })},
      {1, rc::gen::map(byte_string(),
                       [](const std::vector<std::uint8_t>& b) {
                         return Value::bytes(std::span<const std::uint8_t>(b));
                       })},
  });
  if (depth <= 0) return leaf;
  return rc::gen::weightedOneOf<Value>({
      {5, leaf},
      {1, rc::gen::map(rc::gen::resize(4, rc::gen::container<std::vector<Value>>(
                                              rc::gen::lazy([depth] { return key(depth - 1); }))),
                       [](std::vector<Value> v) { return Value::tuple(std::move(v)); })},
  });
}

rc::Gen<Value> value(int depth) {
  if (depth <= 0) {
    return rc::gen::weightedOneOf<Value>({{3, scalar()}, {2, binary_leaf()}});
  }
  auto child = rc::gen::lazy([depth] { return value(depth - 1); });
  auto children = rc::gen::resize(6, rc::gen::container<std::vector<Value>>(child));
  return rc::gen::weightedOneOf<Value>({
      {4, scalar()},
      {3, binary_leaf()},
      {1, rc::gen::map(children, [](std::vector<Value> v) { return Value::tuple(std::move(v)); })},
      {1, rc::gen::map(children, [](std::vector<Value> v) { return Value::list(std::move(v)); })},
      {2, rc::gen::map(rc::gen::resize(6, rc::gen::container<std::vector<std::pair<Value, Value>>>(
                                              rc::gen::pair(key(1), child))),
                       dedupe_mapping)},
  });
}

rc::Gen<std::vector<Item>> items(bool binary) {
  return rc::gen::exec([binary] {
    auto item_key = rc::gen::weightedOneOf<Value>({
        {6, rc::gen::map(rc::gen::pair(rc::gen::inRange<std::int64_t>(0, 1000000),
                                       rc::gen::inRange<std::int64_t>(0, 8)),
                         [](std::pair<std::int64_t, std::int64_t> p) {
                           return SampleKey::make(p.first, p.second).to_value();
                         })},
        {1, key(2)},
    });
    auto raw = *rc::gen::resize(8, rc::gen::container<std::vector<std::pair<Value, Value>>>(
                                       rc::gen::pair(item_key, value(3))));
    if (binary) raw.emplace_back(SampleKey::make(2000000, 0).to_value(), *binary_leaf());
    KeySet seen;
    std::vector<Item> out;
    for (auto& item : raw) {
      if (seen.insert(item.first)) out.push_back(std::move(item));
    }
    return out;
  });
}

}  // namespace hpref::gen
