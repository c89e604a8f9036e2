// Fault plans: parsing, drawing and applying them (see faults.hpp).
#include "faults.hpp"

#include <charconv>
#include <limits>

#include "hpref/repr.hpp"

namespace hpref::sim {
namespace {

// The spec as messages quote it: Python's repr, cut at 60 characters (a spec is user input of
// any length and bytes).
std::string quoted(std::string_view spec) { return "fault " + quote_text(spec, 60); }

std::uint64_t parse_number(std::string_view text, std::string_view spec) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw Error(Errc::invalid_argument, quoted(spec) +
                                            " is not crash:R@K, flip:R@K[:B], delay:R@K or "
                                            "random (one drawn from the seed)");
  }
  return v;
}

}  // namespace

Fault Fault::parse(std::string_view spec) {
  if (spec == "random") {  // the commands and hpref.sim.run draw it before parsing
    throw Error(Errc::invalid_argument,
                "fault 'random' is drawn from the seed (Fault::drawn), not parsed");
  }
  Fault f;
  auto colon = spec.find(':');
  auto at = spec.find('@');
  if (colon == std::string_view::npos || at == std::string_view::npos || at < colon) {
    parse_number("", spec);
  }
  std::string_view kind = spec.substr(0, colon);
  if (kind == "crash") {
    f.kind = Kind::crash;
  } else if (kind == "flip") {
    f.kind = Kind::flip;
  } else if (kind == "delay") {
    f.kind = Kind::delay;
  } else {
    parse_number("", spec);
  }
  std::uint64_t rank = parse_number(spec.substr(colon + 1, at - colon - 1), spec);
  if (rank > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    throw Error(Errc::invalid_argument,
                quoted(spec) + " names rank " + std::to_string(rank) +
                    ", past any cluster");  // it wrapped to another rank until 2026-12-02
  }
  f.rank = static_cast<int>(rank);
  std::string_view rest = spec.substr(at + 1);
  auto second = rest.find(':');
  f.at = parse_number(rest.substr(0, second), spec);
  if (second != std::string_view::npos) {
    if (f.kind != Kind::flip) parse_number("", spec);
    std::uint64_t byte = parse_number(rest.substr(second + 1), spec);
    if (byte > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(Errc::invalid_argument,
                  quoted(spec) + " names byte " + std::to_string(byte) + ", past any payload");
    }
    f.byte = static_cast<std::int64_t>(byte);
  }
  if (f.at == 0 && f.kind != Kind::delay) {
    throw Error(Errc::invalid_argument, quoted(spec) + ": K counts from 1");
  }
  return f;
}

Fault Fault::drawn(std::uint64_t seed, int ranks) {
  SplitMix64 rng(seed ^ 0xfa017c0ffeeULL);
  Fault f;
  f.kind = static_cast<Kind>(rng.next() % 3);
  f.rank = static_cast<int>(rng.next() % static_cast<std::uint64_t>(std::max(ranks, 1)));
  f.at = 1 + rng.next() % kDrawnAtMost;
  return f;
}

std::vector<Fault> Fault::drawable(int ranks) {
  std::vector<Fault> out;
  for (Kind kind : {Kind::crash, Kind::flip, Kind::delay}) {
    for (int rank = 0; rank < std::max(ranks, 1); ++rank) {
      for (std::uint64_t at = 1; at <= kDrawnAtMost; ++at) out.push_back({kind, rank, at, -1});
    }
  }
  return out;
}

std::string Fault::str() const {
  const char* names[] = {"crash", "flip", "delay"};
  std::string out = std::string(names[static_cast<int>(kind)]) + ":" + std::to_string(rank) + "@" +
                    std::to_string(at);
  if (kind == Kind::flip && byte >= 0) out += ":" + std::to_string(byte);
  return out;
}

}  // namespace hpref::sim

namespace hpref::sim::detail {

FaultPlan::FaultPlan(const std::vector<Fault>& faults, int ranks, std::uint64_t seed)
    : faults_(faults),
      seed_(seed),
      delay_(static_cast<std::size_t>(ranks), 0),
      delay_fired_(static_cast<std::size_t>(ranks), false),
      flip_fired_(faults.size(), false) {
  for (const Fault& f : faults) {
    if (f.kind == Fault::Kind::delay) delay_[static_cast<std::size_t>(f.rank)] += f.at;
  }
}

std::uint64_t FaultPlan::crash_call(const std::vector<Fault>& faults, int rank) {
  std::uint64_t at = 0;
  for (const Fault& f : faults) {
    if (f.kind == Fault::Kind::crash && f.rank == rank) at = f.at;
  }
  return at;
}

void FaultPlan::passed_over(int rank) {
  auto r = static_cast<std::size_t>(rank);
  if (delay_[r] == 0) return;
  --delay_[r];
  delay_fired_[r] = true;
}

std::int64_t FaultPlan::flip(int rank, std::uint64_t k, std::uint64_t received, int group,
                             std::int64_t seq, Trace& trace) {
  std::int64_t flipped = -1;
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind != Fault::Kind::flip || f.rank != rank || f.at != k || received == 0) continue;
    if (f.byte >= 0 && static_cast<std::uint64_t>(f.byte) >= received) {
      trace.flip(rank, group, seq, f.byte, true, received);  // past the payload: nothing flips
      continue;
    }
    flip_fired_[i] = true;
    if (f.byte >= 0) {
      flipped = f.byte;
    } else {
      SplitMix64 pick(seed_ ^ (0x5eedf11bULL + static_cast<std::uint64_t>(rank) * 131 + k));
      flipped = static_cast<std::int64_t>(pick.next() % received);
    }
    trace.flip(rank, group, seq, flipped, false, received);
  }
  return flipped;
}

std::vector<std::string> FaultPlan::unfired(std::span<const RankOutcome> outcomes,
                                            const std::vector<bool>& crashed) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    std::string rank = f.str() + ": rank " + std::to_string(f.rank);
    switch (f.kind) {
      case Fault::Kind::crash:
        if (outcomes[static_cast<std::size_t>(f.rank)].status != RankOutcome::Status::died) {
          out.push_back(rank + " never reached call " + std::to_string(f.at));
        } else if (!crashed[static_cast<std::size_t>(f.rank)]) {
          out.push_back(rank + " died of something else before call " + std::to_string(f.at));
        }
        break;
      case Fault::Kind::flip:
        if (!flip_fired_[i]) {
          out.push_back(rank + " received no payload" +
                        (f.byte >= 0 ? " reaching byte " + std::to_string(f.byte) : std::string()) +
                        " from its collective " + std::to_string(f.at));
        }
        break;
      case Fault::Kind::delay:
        if (f.at > 0 && !delay_fired_[static_cast<std::size_t>(f.rank)]) {
          out.push_back(rank + " was never passed over while another rank was ready");
        }
        break;
    }
  }
  return out;
}

}  // namespace hpref::sim::detail
