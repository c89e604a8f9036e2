// Encodes one segment with the installed hpref, decodes it back, and sums across a
// two-rank simulated cluster.
#include <cstdio>

#include "hpref/codec.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/sim/cluster.hpp"
#include "hpref/version.hpp"

int main() {
  std::vector<hpref::Item> items;
  items.emplace_back(hpref::SampleKey::make(7, 0).to_value(),
                     hpref::Value::bytes(std::string_view("payload")));
  auto bytes = hpref::encode_segment(items);
  auto back = hpref::decode_segment(std::span<const std::uint8_t>(bytes));
  bool ok = back.size() == 1 && back[0].second == items[0].second;
  auto run = hpref::sim::Cluster::run(2, {}, [](hpref::Communicator& c) {
    std::int64_t v = c.rank() + 1;
    c.all_reduce(c.world(), {&v, 8}, hpref::DType::int64, hpref::ReduceOp::sum).wait();
    return std::to_string(v);
  });
  ok = ok && run.outcomes[0].value == "3" && run.outcomes[1].value == "3";
  std::printf("hpref %s: encoded %zu bytes, round trip and simulated all_reduce %s\n",
              hpref::kVersion, bytes.size(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
