// A run's trace as Chrome trace-event JSON (see chrome_trace.hpp).
#include "hpref/sim/chrome_trace.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "hpref/utf8.hpp"

namespace hpref::sim {
namespace {

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

// The number after `prefix` at the start of `word` ("r3" with prefix 'r' -> 3).
std::optional<long long> number_after(std::string_view word, char prefix) {
  if (word.size() < 2 || word[0] != prefix) return std::nullopt;
  long long v = 0;
  auto [end, ec] = std::from_chars(word.data() + 1, word.data() + word.size(), v);
  if (ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    std::size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// "[0, 2, 5]" -> {0, 2, 5}
std::vector<int> rank_list(std::string_view text) {
  std::vector<int> out;
  int v = 0;
  bool in = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      in = true;
    } else if (in) {
      out.push_back(v);
      v = 0;
      in = false;
    }
  }
  if (in) out.push_back(v);
  return out;
}

struct Launch {
  int rank;
  long long group, seq;
  std::string op;
  std::string detail;  // the rest of the line (bytes=..., sum=...)
  std::size_t step;
};

}  // namespace

std::string chrome_trace(std::span<const std::string> lines) {
  std::vector<Launch> launches;
  std::map<long long, std::vector<int>> group_ranks;  // from new_group lines; 0 = world
  std::map<int, std::size_t> end_step;                // rank -> its exit/died line
  std::map<int, std::string> end_how;
  std::set<int> deadlocked;
  std::set<int> ranks;
  struct Instant {
    std::size_t step;
    int rank;  // -1: global
    std::string name;
  };
  std::vector<Instant> instants;
  for (std::size_t step = 0; step < lines.size(); ++step) {
    std::string_view line = lines[step];
    auto w = words(line);
    if (w.empty()) continue;
    if (w[0] == "new_group" && w.size() >= 3) {
      auto id = std::strtoll(std::string(w[1]).c_str(), nullptr, 10);
      group_ranks[id] = rank_list(line.substr(line.find("ranks=")));
      instants.push_back({step, -1, std::string(line)});
      continue;
    }
    if (w[0] == "deadlock") {
      for (int r : rank_list(line)) deadlocked.insert(r);
      instants.push_back({step, -1, std::string(line)});
      continue;
    }
    auto r = number_after(w[0], 'r');
    if (!r) continue;
    int rank = static_cast<int>(*r);
    ranks.insert(rank);
    if (w.size() >= 4) {
      auto g = number_after(w[1], 'g');
      auto s = number_after(w[2], 's');
      if (g && s) {
        std::size_t detail_at = line.find(w[3]) + w[3].size();
        launches.push_back({rank, *g, *s, std::string(w[3]),
                            std::string(detail_at < line.size() ? line.substr(detail_at + 1) : ""),
                            step});
        continue;
      }
    }
    if (w.size() >= 2 && (w[1] == "exit" || w[1] == "died")) {
      end_step[rank] = step;
      end_how[rank] = std::string(line.substr(w[0].size() + 1));
    }
    instants.push_back({step, rank, std::string(line.substr(w[0].size() + 1))});
  }
  int nranks = ranks.empty() ? 0 : *ranks.rbegin() + 1;
  if (!group_ranks.count(0)) {
    for (int r = 0; r < nranks; ++r) group_ranks[0].push_back(r);
  }
  // A collective completes when its last member launches it (the simulator delivers then).
  std::map<std::pair<long long, long long>, std::vector<const Launch*>> by_op;
  for (const Launch& l : launches) by_op[{l.group, l.seq}].push_back(&l);

  std::map<int, std::size_t> last_launch;
  for (const Launch& l : launches) last_launch[l.rank] = l.step;

  std::ostringstream out;
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"scheduling steps: 1 us = 1 trace "
         "line\"},\"traceEvents\":[";
  bool first = true;
  auto event = [&](const std::string& body) {
    out << (first ? "\n" : ",\n") << body;
    first = false;
  };
  for (int r = 0; r < nranks; ++r) {
    event("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":" + std::to_string(r) +
          ",\"args\":{\"name\":\"rank " + std::to_string(r) + "\"}}");
  }
  for (const Launch& l : launches) {
    const auto& members = by_op[{l.group, l.seq}];
    auto expected = group_ranks.count(l.group) ? group_ranks[l.group].size() : members.size();
    bool complete = members.size() >= expected;
    std::size_t end = l.step + 1;
    std::string problem;
    if (complete) {
      for (const Launch* m : members) end = std::max(end, m->step + 1);
    } else {
      end = end_step.count(l.rank) ? end_step[l.rank] + 1 : lines.size();
      problem = deadlocked.count(l.rank) ? "deadlock" : "incomplete";
    }
    // A rank that exited on a mismatch was refused at its last launch.
    if (end_how.count(l.rank) && end_how[l.rank].find("comm_mismatch") != std::string::npos &&
        last_launch[l.rank] == l.step) {
      problem = "mismatch";
    }
    std::string args =
        "{\"group\":" + std::to_string(l.group) + ",\"seq\":" + std::to_string(l.seq) +
        ",\"launch_step\":" + std::to_string(l.step) + ",\"detail\":" + json_string(l.detail);
    if (!problem.empty()) args += ",\"problem\":" + json_string(problem);
    args += "}";
    std::string body = "{\"ph\":\"X\",\"name\":" + json_string(l.op) + ",\"cat\":\"g" +
                       std::to_string(l.group) + "\",\"pid\":0,\"tid\":" + std::to_string(l.rank) +
                       ",\"ts\":" + std::to_string(l.step) +
                       ",\"dur\":" + std::to_string(end - l.step) + ",\"args\":" + args;
    if (!problem.empty()) body += ",\"cname\":\"terrible\"";
    event(body + "}");
  }
  for (const Instant& i : instants) {
    std::string body = "{\"ph\":\"i\",\"name\":" + json_string(i.name) +
                       ",\"pid\":0,\"ts\":" + std::to_string(i.step);
    body += i.rank < 0 ? ",\"tid\":0,\"s\":\"g\"}"
                       : ",\"tid\":" + std::to_string(i.rank) + ",\"s\":\"t\"}";
    event(body);
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace hpref::sim
