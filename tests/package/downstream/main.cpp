// Encodes one segment with the installed hpref and decodes it back.
#include <cstdio>

#include "hpref/codec.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/version.hpp"

int main() {
  std::vector<hpref::Item> items;
  items.emplace_back(hpref::SampleKey::make(7, 0).to_value(),
                     hpref::Value::bytes(std::string_view("payload")));
  auto bytes = hpref::encode_segment(items);
  auto back = hpref::decode_segment(std::span<const std::uint8_t>(bytes));
  bool ok = back.size() == 1 && back[0].second == items[0].second;
  std::printf("hpref %s: encoded %zu bytes, round trip %s\n", hpref::kVersion, bytes.size(),
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
