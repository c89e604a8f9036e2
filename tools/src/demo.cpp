// The codec demonstration behind `hpref demo` (and so `./dev demo`).
#include "hpref/cli/demo.hpp"

#include <chrono>
#include <ostream>
#include <random>

#include "hpref/cli/frame.hpp"
#include "hpref/codec.hpp"
#include "hpref/sample_key.hpp"

namespace hpref::cli {
namespace {

// One synthetic training sample: token ids, an encoded image, nested metadata.
Value make_sample(std::mt19937_64& rng, std::int64_t doc, std::int64_t tokens) {
  std::vector<std::uint8_t> token_bytes(static_cast<std::size_t>(tokens) * 8);
  for (std::int64_t i = 0; i < tokens; ++i) {
    std::int64_t id = static_cast<std::int64_t>(rng() % 50257);
    for (int b = 0; b < 8; ++b) token_bytes[i * 8 + b] = static_cast<std::uint8_t>(id >> (8 * b));
  }
  std::vector<std::uint8_t> image = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  image.resize(64 + rng() % 192);
  for (std::size_t i = 8; i < image.size(); ++i) image[i] = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(tokens));
  for (auto& m : mask) m = rng() % 4 != 0;
  Value meta = Value::mapping({
      {Value::string("source"), Value::string(doc % 2 ? "web/crawl-2026-10" : "books/ü-set")},
      {Value::string("document"), Value::integer(doc)},
      {Value::string("quality"), Value::floating(static_cast<double>(rng() % 1000) / 1000.0)},
      {Value::string("tags"), Value::list({Value::string("en"), Value::string("filtered")})},
      {Value::string("dedup"),
       Value::mapping(
           {{Value::string("hash"), Value::bytes(std::string_view("\x01\x02\x03\x04", 4))},
            {Value::string("kept"), Value::boolean(true)},
            {Value::string("cluster"), Value()}})},
  });
  return Value::mapping({
      {Value::string("input_ids"),
       Value::tensor(Tensor::copy_of(DType::int64, {tokens}, token_bytes))},
      {Value::string("loss_mask"), Value::tensor(Tensor::copy_of(DType::boolean, {tokens}, mask))},
      {Value::string("image"), Value::bytes(std::span<const std::uint8_t>(image))},
      {Value::string("meta"), meta},
  });
}

}  // namespace

int run_codec_demo(std::uint64_t seed, std::ostream& out) {
  out << "SEED=" << seed << "\n";
  out << "hpref codec demo: one HPB1 segment of synthetic training samples (SPEC 2)\n\n";
  std::mt19937_64 rng(seed);
  std::vector<Item> items;
  for (std::int64_t i = 0; i < 3; ++i) {
    std::int64_t doc = static_cast<std::int64_t>(rng() % 10000);
    items.emplace_back(SampleKey::make(doc, i).to_value(),
                       make_sample(rng, doc, 8 + static_cast<std::int64_t>(rng() % 24)));
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<std::uint8_t> segment = encode_segment(items);
  out << "$ hpref frame inspect   (of the encoded segment)\n";
  DecodeOptions strict;
  strict.strict = true;
  out << inspect_segment(segment, strict) << "\n";
  std::vector<Item> decoded = decode_segment(std::span<const std::uint8_t>(segment));
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  bool equal = decoded.size() == items.size();
  for (std::size_t i = 0; equal && i < items.size(); ++i) {
    equal = decoded[i].first == items[i].first && decoded[i].second == items[i].second;
  }
  bool stable = encode_segment(decoded) == segment;
  out << "encode + inspect + decode: " << segment.size() << " bytes, " << items.size() << " items, "
      << static_cast<long>(us) << " us\n";
  out << "check decode(encode(items)) == items: " << (equal ? "PASS" : "FAIL") << "\n";
  out << "check encode(decode(segment)) == segment: " << (stable ? "PASS" : "FAIL") << "\n";
  return equal && stable ? 0 : 1;
}

}  // namespace hpref::cli
