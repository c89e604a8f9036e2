// `hpref verify`: the checked-mode logs of a job that died, lined up per group and
// sequence number (see hpref/cli/verify.hpp). The mismatch messages are the checked
// mode's own (signature_mismatch); the expected all-to-all counts are the SPEC 7 planners'.
#include "hpref/cli/verify.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "hpref/cli/integer_option.hpp"
#include "hpref/cli/json_value.hpp"
#include "hpref/cli/route.hpp"
#include "hpref/cli/text_option.hpp"
#include "hpref/communicator.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/op_signature.hpp"
#include "hpref/routes.hpp"
#include "sim_command.hpp"

namespace hpref::cli {
namespace {

// The most members a logged group may have (the Python binding's limit).
constexpr std::size_t kMaxMembers = std::size_t{1} << 20;

// A job that destroys its default process group and makes it again restarts torch's group
// ids and every group's seq at 0: its checked groups log which default group of the process
// they belong to, as "run" (0, the field's absence, for the first). Groups, seqs and
// findings are per (run, group).
using GroupKey = std::pair<int, int>;  // (run, group)

// "run R: " before a message about run R > 0; nothing for run 0 (the only run of most jobs).
std::string run_prefix(int run) {
  return run == 0 ? std::string() : "run " + std::to_string(run) + ": ";
}

struct Record {
  int run = 0;
  int group = 0;
  std::vector<int> ranks;  // the members' world ranks, group order
  std::int64_t seq = 0;
  OpSignature sig;
  // A new_group agreed on this group (checked mode logs it in the world's order, SPEC 9.1):
  // its members and backend; empty for the SPEC 9.2 operations.
  std::vector<int> members;
  std::string backend;
  bool new_group = false;
  std::size_t line = 0;

  Launch launch() const { return Launch{new_group, members, backend, sig}; }
  std::string describe() const { return launch().str(); }
};

struct RankLog {
  int rank = 0;
  std::string file;  // the file name, for messages
  std::vector<Record> records;
  std::map<std::tuple<int, int, std::int64_t>, std::size_t> at;  // (run, group, seq) -> index
  std::map<GroupKey, std::int64_t> next_seq;  // (run, group) -> the seq its next record must have
  int run = 0;               // the run of the last record (runs never go back in one file)
  std::size_t run_line = 0;  // the line where that run began
};

[[noreturn]] void bad_line(const RankLog& log, std::size_t line, const std::string& why) {
  throw Error(Errc::json_value, "line " + std::to_string(line) + " of " + log.file + ": " + why);
}

std::int64_t int_field(const RankLog& log, std::size_t line, const Json& obj, const char* name,
                       std::int64_t lo, std::int64_t hi) {
  auto it = obj.find(name);
  if (it == obj.end()) bad_line(log, line, std::string("no \"") + name + "\" field");
  auto v = json_as_int64(*it);
  if (!v || *v < lo || *v > hi) {
    std::string text = shortened(dump_json(*it), 80);
    bad_line(log, line,
             std::string("\"") + name + "\" must be an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "], got " + text);
  }
  return *v;
}

std::string string_field(const RankLog& log, std::size_t line, const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_string())
    bad_line(log, line, std::string("\"") + name + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::uint64_t> counts_field(const RankLog& log, std::size_t line, const Json& obj,
                                        const char* name, std::size_t members) {
  auto it = obj.find(name);
  if (it == obj.end() || !it->is_array() || it->size() != members) {
    bad_line(log, line,
             std::string("\"") + name + "\" must be an array of " + std::to_string(members) +
                 " byte counts (one per member)");
  }
  std::vector<std::uint64_t> out;
  out.reserve(members);
  for (const Json& c : *it) {
    if (!c.is_number_integer() || (!c.is_number_unsigned() && c.get<std::int64_t>() < 0)) {
      bad_line(log, line,
               std::string("\"") + name + "\" holds " + shortened(dump_json(c), 80) +
                   ", not a byte count");
    }
    out.push_back(c.get<std::uint64_t>());
  }
  return out;
}

OpKind kind_named(const RankLog& log, std::size_t line, const std::string& name) {
  for (auto k : {OpKind::all_gather, OpKind::broadcast, OpKind::all_reduce, OpKind::all_to_all_v,
                 OpKind::barrier}) {
    if (name == op_kind_name(k)) return k;
  }
  std::string shown = shortened(name, 40);
  bad_line(log, line,
           "\"kind\" '" + shown +
               "' is not all_gather, broadcast, all_reduce, all_to_all_v, barrier or new_group");
}

// One line of rank<R>.jsonl -> its record (checked against the file's earlier lines).
void add_line(RankLog& log, std::size_t line, std::string_view text) {
  Json obj;
  try {
    obj = parse_json(text);
  } catch (const Error& e) {
    throw Error(Errc::json_syntax,
                "line " + std::to_string(line) + " of " + log.file + " is not JSON: " + e.what());
  }
  if (!obj.is_object()) bad_line(log, line, "not a JSON object");
  Record r;
  r.line = line;
  std::int64_t rank = int_field(log, line, obj, "rank", 0, std::numeric_limits<int>::max());
  if (rank != log.rank) {
    bad_line(
        log, line,
        "\"rank\" is " + std::to_string(rank) + " in the log of rank " + std::to_string(log.rank));
  }
  if (obj.find("run") != obj.end()) {
    r.run = static_cast<int>(int_field(log, line, obj, "run", 0, std::numeric_limits<int>::max()));
  }
  if (r.run < log.run) {
    bad_line(log, line,
             "run " + std::to_string(r.run) + " after run " + std::to_string(log.run) + " (line " +
                 std::to_string(log.run_line) + "): two jobs' logs in one directory?");
  }
  if (r.run > log.run || log.records.empty()) log.run_line = line;
  log.run = r.run;
  r.group = static_cast<int>(int_field(log, line, obj, "group", std::numeric_limits<int>::min(),
                                       std::numeric_limits<int>::max()));
  r.seq = int_field(log, line, obj, "seq", 0, std::numeric_limits<std::int64_t>::max());
  auto ranks = obj.find("ranks");
  if (ranks == obj.end() || !ranks->is_array() || ranks->empty() || ranks->size() > kMaxMembers) {
    bad_line(log, line, "\"ranks\" must be an array of 1 to 2^20 world ranks");
  }
  std::set<int> seen;
  for (const Json& m : *ranks) {
    auto v = json_as_int64(m);
    if (!v || *v < 0 || *v > std::numeric_limits<int>::max() ||
        !seen.insert(static_cast<int>(*v)).second) {
      bad_line(log, line,
               "\"ranks\" holds " + shortened(dump_json(m), 80) + ", not a distinct world rank");
    }
    r.ranks.push_back(static_cast<int>(*v));
  }
  if (!seen.count(log.rank))
    bad_line(log, line, "rank " + std::to_string(log.rank) + " is not in \"ranks\"");
  OpSignature& s = r.sig;
  std::string kind = string_field(log, line, obj, "kind");
  if (kind == "new_group") {
    auto members = obj.find("members");
    if (members == obj.end() || !members->is_array() || members->empty() ||
        members->size() > kMaxMembers) {
      bad_line(log, line, "a new_group's \"members\" must be an array of 1 to 2^20 world ranks");
    }
    std::set<int> distinct;
    for (const Json& m : *members) {
      auto v = json_as_int64(m);
      if (!v || *v < 0 || *v > std::numeric_limits<int>::max() ||
          !distinct.insert(static_cast<int>(*v)).second) {
        bad_line(
            log, line,
            "\"members\" holds " + shortened(dump_json(m), 80) + ", not a distinct world rank");
      }
      r.members.push_back(static_cast<int>(*v));
    }
    r.backend = string_field(log, line, obj, "backend");
    if (r.backend.size() > 256) bad_line(log, line, "\"backend\" is longer than 256 bytes");
    r.new_group = true;
    s.kind = OpKind::barrier;  // unused: new_group records are compared by describe()
  } else {
    s.kind = kind_named(log, line, kind);
  }
  const auto u64max = std::numeric_limits<std::int64_t>::max();
  if (!r.new_group) switch (s.kind) {
      case OpKind::broadcast: {
        s.root =
            static_cast<int>(int_field(log, line, obj, "root", 0, std::numeric_limits<int>::max()));
        if (!seen.count(s.root))
          bad_line(log, line, "broadcast root " + std::to_string(s.root) + " is not a member");
        s.bytes = static_cast<std::uint64_t>(int_field(log, line, obj, "bytes", 0, u64max));
        break;
      }
      case OpKind::all_reduce: {
        std::string op = string_field(log, line, obj, "op");
        bool found = false;
        for (auto o : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
          if (op == reduce_op_name(o)) s.op = o, found = true;
        }
        if (!found) bad_line(log, line, "\"op\" must be sum, min or max");
        auto d = dtype_from_bare_name(string_field(log, line, obj, "dtype"));
        if (!d) bad_line(log, line, "\"dtype\" is not a SPEC 1.3 dtype");
        s.dtype = *d;
        s.bytes = static_cast<std::uint64_t>(int_field(log, line, obj, "bytes", 0, u64max));
        break;
      }
      case OpKind::all_gather:
        s.bytes = static_cast<std::uint64_t>(int_field(log, line, obj, "bytes", 0, u64max));
        break;
      case OpKind::all_to_all_v: {
        s.counts_in = counts_field(log, line, obj, "counts_in", r.ranks.size());
        s.counts_out = counts_field(log, line, obj, "counts_out", r.ranks.size());
        s.bytes = static_cast<std::uint64_t>(int_field(log, line, obj, "bytes", 0, u64max));
        std::uint64_t sum = 0;
        bool over = false;
        for (auto c : s.counts_in) over |= __builtin_add_overflow(sum, c, &sum);
        if (over || sum != s.bytes)
          bad_line(log, line, "\"bytes\" is not the sum of \"counts_in\"");
        break;
      }
      case OpKind::barrier:
        break;
    }
  // The same group has the same members on every line of its run; its seqs go 0, 1, 2, ...
  // (a repeat is two jobs appended to one log, a gap an edited or truncated one).
  for (const Record& earlier : log.records) {
    if (earlier.run == r.run && earlier.group == r.group) {
      if (earlier.ranks != r.ranks) {
        bad_line(log, line,
                 run_prefix(r.run) + "group " + std::to_string(r.group) + " has members " +
                     rank_list_text(r.ranks) + " but " + rank_list_text(earlier.ranks) +
                     " at line " + std::to_string(earlier.line));
      }
      break;
    }
  }
  std::int64_t& next = log.next_seq[{r.run, r.group}];
  if (r.seq != next) {
    if (r.seq < next) {
      bad_line(log, line,
               run_prefix(r.run) + "group " + std::to_string(r.group) + " seq " +
                   std::to_string(r.seq) + " again (line " +
                   std::to_string(log.records[log.at.at({r.run, r.group, r.seq})].line) +
                   "): two jobs' logs in one directory?");
    }
    bad_line(log, line,
             run_prefix(r.run) + "group " + std::to_string(r.group) + " seq " +
                 std::to_string(r.seq) +
                 (next == 0 ? " is the group's first record, not seq 0"
                            : " follows seq " + std::to_string(next - 1)) +
                 " (an edited or truncated log?)");
  }
  ++next;
  log.at[{r.run, r.group, r.seq}] = log.records.size();
  log.records.push_back(std::move(r));
}

struct Limits {
  std::uint64_t max_line_bytes, max_records, max_log_bytes;
  std::uint64_t records = 0, bytes = 0;
};

void read_log(RankLog& log, const std::filesystem::path& path, Limits& limits) {
  // Closed once, by the holder, on every way out (an error at the last line included).
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw Error(Errc::io, "cannot open " + log.file + ": " + std::strerror(errno));
  std::FILE* f = file.get();
  std::string line;
  std::size_t number = 1;
  char buf[1 << 16];
  auto finish = [&](bool last) {
    if (line.empty() && last) return;
    if (++limits.records > limits.max_records) {
      throw Error(Errc::invalid_argument, "line " + std::to_string(number) + " of " + log.file +
                                              " is record " + std::to_string(limits.records) +
                                              " of the logs, past --max-records " +
                                              std::to_string(limits.max_records));
    }
    add_line(log, number, line);
    line.clear();
    ++number;
  };
  for (;;) {
    std::size_t n = std::fread(buf, 1, sizeof buf, f);
    if (n == 0) break;
    limits.bytes += n;
    if (limits.bytes > limits.max_log_bytes) {
      throw Error(Errc::invalid_argument, "the logs hold more than --max-log-bytes " +
                                              std::to_string(limits.max_log_bytes) + " bytes (at " +
                                              log.file + ")");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        finish(false);
        continue;
      }
      if (line.size() >= limits.max_line_bytes) {
        throw Error(Errc::json_syntax, "line " + std::to_string(number) + " of " + log.file +
                                           " is longer than --max-line-bytes " +
                                           std::to_string(limits.max_line_bytes));
      }
      line.push_back(buf[i]);
    }
  }
  if (std::ferror(f) != 0)
    throw Error(Errc::io, "cannot read " + log.file + ": " + std::strerror(errno));
  finish(true);
}

// Every LOGDIR/rank<R>.jsonl, by rank.
std::vector<RankLog> read_logs(const std::string& dir, Limits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(Errc::io, "LOGDIR '" + dir + "' is not a directory");
  std::map<int, fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() < 11 || name.rfind("rank", 0) != 0 || name.substr(name.size() - 6) != ".jsonl")
      continue;
    std::string_view digits(name.data() + 4, name.size() - 10);
    int r = 0;
    auto [p, e] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
    if (e != std::errc() || p != digits.data() + digits.size() || r < 0 ||
        std::to_string(r) != digits)
      continue;
    files[r] = it->path();
  }
  if (ec) throw Error(Errc::io, "cannot list LOGDIR '" + dir + "': " + ec.message());
  if (files.empty())
    throw Error(Errc::io, "LOGDIR '" + dir + "' holds no rank<R>.jsonl (HPREF_CHECKED_LOG's logs)");
  std::vector<RankLog> logs;
  for (const auto& [r, path] : files) {
    RankLog log;
    log.rank = r;
    log.file = path.filename().string();
    read_log(log, path, limits);
    logs.push_back(std::move(log));
  }
  return logs;
}

struct Finding {
  std::string type;  // members, missing, mismatch (divergence); route
  int run = 0;
  int group = 0;
  std::int64_t seq = 0;
  std::vector<int> ranks;
  std::string message;
  std::size_t order = 0;  // the earliest line of the logs it shows at
};

Json finding_json(const std::optional<Finding>& f) {
  if (!f) return nullptr;
  return Json{{"type", f->type}, {"run", f->run},     {"group", f->group},
              {"seq", f->seq},   {"ranks", f->ranks}, {"message", f->message}};
}

struct GroupView {
  std::vector<int> ranks;  // as the lowest logging rank logs them
  std::int64_t seqs = 0;   // 1 + the highest seq any member logged
};

// The first divergence of one group: members disagreeing on the group, a member missing
// an operation another logged, or signatures that differ (signature_mismatch's words).
std::optional<Finding> group_divergence(GroupKey key, const GroupView& g,
                                        const std::map<int, const RankLog*>& by_rank) {
  const auto [run, gid] = key;
  const std::string in_run = run_prefix(run);
  std::vector<const RankLog*> logs;
  for (int r : g.ranks) {
    auto it = by_rank.find(r);
    logs.push_back(it == by_rank.end() ? nullptr : it->second);
  }
  // Members that log the group with other members.
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (!logs[i]) continue;
    for (const Record& rec : logs[i]->records) {
      if (rec.run != run || rec.group != gid) continue;
      if (rec.ranks != g.ranks) {
        return Finding{"members",
                       run,
                       gid,
                       rec.seq,
                       {g.ranks[0], g.ranks[i]},
                       in_run + "group " + std::to_string(gid) + ": rank " +
                           std::to_string(g.ranks[i]) + " logs members " +
                           rank_list_text(rec.ranks) + " but " + rank_list_text(g.ranks) +
                           " are logged before it",
                       rec.line};
      }
      break;
    }
  }
  Group group(gid, g.ranks, "checked", g.ranks.front());
  for (std::int64_t seq = 0; seq < g.seqs; ++seq) {
    std::vector<const Record*> recs(logs.size(), nullptr);
    std::size_t order = std::numeric_limits<std::size_t>::max();
    for (std::size_t i = 0; i < logs.size(); ++i) {
      if (!logs[i]) continue;
      auto it = logs[i]->at.find({run, gid, seq});
      if (it == logs[i]->at.end()) continue;
      recs[i] = &logs[i]->records[it->second];
      order = std::min(order, recs[i]->line);
    }
    std::size_t have = 0;
    while (recs[have] == nullptr) ++have;  // some member logged it (seq < g.seqs)
    for (std::size_t i = 0; i < recs.size(); ++i) {
      if (recs[i]) continue;
      std::string last = "it logged nothing on group " + std::to_string(gid);
      if (seq > 0 && logs[i]) {
        const Record& prev = logs[i]->records[logs[i]->at.at({run, gid, seq - 1})];
        last = "its last operation on group " + std::to_string(gid) + " is seq " +
               std::to_string(seq - 1) + ", " + prev.describe();
      }
      if (!logs[i])
        last = "it has no log (" + std::string("rank") + std::to_string(g.ranks[i]) + ".jsonl)";
      return Finding{"missing",
                     run,
                     gid,
                     seq,
                     {g.ranks[have], g.ranks[i]},
                     in_run + "missing operation on group " + std::to_string(gid) + " seq " +
                         std::to_string(seq) + ": rank " + std::to_string(g.ranks[have]) +
                         " launched " + recs[have]->describe() + " but rank " +
                         std::to_string(g.ranks[i]) + " never did (" + last + ")",
                     order};
    }
    // A new_group against another call, or asking for other members or another backend
    // (op_signature's new_group_mismatch: the checked process groups' words).
    for (std::size_t i = 1; i < recs.size(); ++i) {
      if (auto error = new_group_mismatch(gid, seq, g.ranks[0], recs[0]->launch(), g.ranks[i],
                                          recs[i]->launch())) {
        return Finding{"mismatch", run, gid, seq, error->ranks(), in_run + error->what(), order};
      }
    }
    if (recs[0]->new_group) continue;  // every member agreed on the same new_group
    std::vector<OpSignature> sigs;
    sigs.reserve(recs.size());
    for (const Record* rec : recs) sigs.push_back(rec->sig);
    if (auto error = signature_mismatch(group, seq, sigs)) {
      return Finding{"mismatch", run, gid, seq, error->ranks(), in_run + error->what(), order};
    }
  }
  return std::nullopt;
}

struct RouteCheck {
  std::string pattern;
  std::size_t checked = 0;
  std::optional<Finding> first;
};

// Why --routes checked no record: the filters, and the groups and seqs the logs'
// all_to_all_v records have (a check of nothing is refused, never passed).
std::string nothing_selected(const VerifyArgs& a, const std::vector<RankLog>& logs) {
  std::set<int> runs, groups;
  std::set<std::int64_t> seqs;
  for (const RankLog& log : logs) {
    for (const Record& rec : log.records) {
      if (rec.sig.kind != OpKind::all_to_all_v) continue;
      runs.insert(rec.run);
      groups.insert(rec.group);
      seqs.insert(rec.seq);
    }
  }
  auto list = [](const auto& values) {
    std::string text;
    for (auto v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
    return text;
  };
  std::string filters;
  for (std::int64_t r : a.runs) filters += " --run " + std::to_string(r);
  for (std::int64_t g : a.groups) filters += " --group " + std::to_string(g);
  for (std::int64_t q : a.seqs) filters += " --seq " + std::to_string(q);
  std::string prefix = "--routes " + a.routes + ": ";
  if (groups.empty()) return prefix + "the logs hold no all_to_all_v record to check";
  return prefix + filters.substr(1) +
         " selects no all_to_all_v record (the logs' all_to_all_v records are" +
         (runs.size() > 1 || !a.runs.empty() ? " in runs [" + list(runs) + "]," : "") +
         " on groups [" + list(groups) + "], seqs [" + list(seqs) + "])";
}

// Every logged all_to_all_v (of the selected groups and seqs) against the routes SPEC 7
// gives a group of its size: rank i sends input_splits[j] rows to j and receives
// output_splits[j] from j, each row --row-bytes bytes.
RouteCheck check_routes(const VerifyArgs& a, const std::vector<RankLog>& logs) {
  RouteCheck out;
  out.pattern = a.routes;
  auto boundaries = parse_int_list(a.boundaries, "--boundaries");
  std::map<std::size_t, std::vector<Route>> planned;  // by group size
  auto routes_for = [&](const Record& rec) -> const std::vector<Route>& {
    auto it = planned.find(rec.ranks.size());
    if (it != planned.end()) return it->second;
    auto p = static_cast<std::int64_t>(rec.ranks.size());
    std::vector<Route> routes;
    try {
      routes = a.routes == "window"
                   ? sliding_window_routes(boundaries, a.local_length, p, a.window)
                   : document_prefix_routes(boundaries, a.local_length, p, a.ratio);
    } catch (const Error& e) {
      throw Error(e.code(), "--routes " + a.routes + " for " + run_prefix(rec.run) + "group " +
                                std::to_string(rec.group) + " (" + std::to_string(p) +
                                " members, seq " + std::to_string(rec.seq) + "): " + e.what());
    }
    return planned.emplace(rec.ranks.size(), std::move(routes)).first->second;
  };
  auto selected = [](const std::vector<std::int64_t>& only, std::int64_t v) {
    return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
  };
  for (const RankLog& log : logs) {
    for (const Record& rec : log.records) {
      if (rec.sig.kind != OpKind::all_to_all_v || !selected(a.runs, rec.run) ||
          !selected(a.groups, rec.group) || !selected(a.seqs, rec.seq)) {
        continue;
      }
      const auto& routes = routes_for(rec);
      ++out.checked;
      auto me = static_cast<std::size_t>(std::find(rec.ranks.begin(), rec.ranks.end(), log.rank) -
                                         rec.ranks.begin());
      const Route& route = routes[me];
      for (int way = 0; way < 2; ++way) {
        const auto& counts = way == 0 ? rec.sig.counts_in : rec.sig.counts_out;
        const auto& rows = way == 0 ? route.input_splits : route.output_splits;
        for (std::size_t j = 0; j < counts.size(); ++j) {
          std::uint64_t want = 0;
          bool over = __builtin_mul_overflow(static_cast<std::uint64_t>(rows[j]),
                                             static_cast<std::uint64_t>(a.row_bytes), &want);
          if (!over && counts[j] == want) continue;
          std::size_t order = rec.line;
          if (out.first && out.first->order <= order) break;
          std::string where = run_prefix(rec.run) + "all_to_all_v on group " +
                              std::to_string(rec.group) + " seq " + std::to_string(rec.seq) +
                              ": rank " + std::to_string(log.rank);
          std::string peer = "rank " + std::to_string(rec.ranks[j]);
          std::string routed =
              std::to_string(rows[j]) + " rows x " + std::to_string(a.row_bytes) + " = " +
              (over ? std::string("more than 2^64") : std::to_string(want)) + " bytes";
          std::string msg = way == 0
                                ? where + " sends " + std::to_string(counts[j]) + " bytes to " +
                                      peer + ", but the " + a.routes + " routes send " + routed
                                : where + " expects " + std::to_string(counts[j]) + " bytes from " +
                                      peer + ", but the " + a.routes + " routes send " + routed;
          std::vector<int> pair = way == 0 ? std::vector<int>{log.rank, rec.ranks[j]}
                                           : std::vector<int>{rec.ranks[j], log.rank};
          out.first = Finding{"route", rec.run, rec.group, rec.seq, pair, msg, order};
          break;
        }
        if (out.first && out.first->order <= rec.line) break;
      }
    }
  }
  if (out.checked == 0) throw Error(Errc::invalid_argument, nothing_selected(a, logs));
  return out;
}

void check_route_options(const VerifyArgs& a) {
  if (a.routes.empty()) {
    if (!a.boundaries.empty() || a.has_local_length || a.has_window || a.has_ratio ||
        a.has_row_bytes || !a.runs.empty() || !a.groups.empty() || !a.seqs.empty()) {
      throw Error(Errc::invalid_argument,
                  "--boundaries, --local-length, --window, --ratio, --row-bytes, --run, --group "
                  "and --seq go with --routes window|prefix");
    }
    return;
  }
  // An option given a value it cannot take is named with that value ("--row-bytes (> 0,
  // got -8)", "got 0" too); one not given is named alone.
  auto got = [](bool given, std::int64_t v) {
    return given ? ", got " + std::to_string(v) : std::string();
  };
  std::string missing;
  if (a.boundaries.empty()) missing += " --boundaries";
  if (!a.has_local_length || a.local_length <= 0)
    missing += " --local-length (> 0" + got(a.has_local_length, a.local_length) + ")";
  if (!a.has_row_bytes || a.row_bytes <= 0)
    missing += " --row-bytes (> 0" + got(a.has_row_bytes, a.row_bytes) + ")";
  if (a.routes == "window" && (!a.has_window || a.window <= 0))
    missing += " --window (> 0" + got(a.has_window, a.window) + ")";
  if (a.routes == "prefix" && (!a.has_ratio || a.ratio <= 0))
    missing += " --ratio (1 or 2" + got(a.has_ratio, a.ratio) + ")";
  if (a.routes == "window" && a.has_ratio) missing += " (no --ratio: that is --routes prefix)";
  if (a.routes == "prefix" && a.has_window) missing += " (no --window: that is --routes window)";
  if (!missing.empty())
    throw Error(Errc::invalid_argument, "--routes " + a.routes + " needs" + missing);
}

int verify(const VerifyArgs& a, std::ostream& out) {
  check_route_options(a);
  if (!a.routes.empty()) parse_int_list(a.boundaries, "--boundaries");  // refused before reading
  Limits limits{a.max_line_bytes, a.max_records, a.max_log_bytes};
  std::vector<RankLog> logs = read_logs(a.dir, limits);
  std::map<int, const RankLog*> by_rank;
  for (const RankLog& log : logs) by_rank[log.rank] = &log;
  std::map<GroupKey, GroupView> groups;
  std::set<int> runs;
  std::size_t operations = 0;
  for (const RankLog& log : logs) {
    for (const Record& rec : log.records) {
      runs.insert(rec.run);
      auto [it, fresh] = groups.try_emplace(GroupKey{rec.run, rec.group});
      if (fresh) it->second.ranks = rec.ranks;
      it->second.seqs = std::max(it->second.seqs, rec.seq + 1);
    }
  }
  // The first divergence: a disagreement (members, signatures) before a missing operation,
  // then the earliest line. A rank's log that ends early is most often the consequence of
  // an error it raised (a mismatch on another group, which every member raises), and line
  // numbers of different files are no clock: the earliest line alone named the knock-on
  // "never did" of a rank that had raised at a mismatch elsewhere, not the mismatch.
  auto before = [](const Finding& a, const Finding& b) {
    bool a_missing = a.type == "missing", b_missing = b.type == "missing";
    return a_missing != b_missing ? b_missing : a.order < b.order;
  };
  std::optional<Finding> first;
  for (const auto& [key, g] : groups) {
    operations += static_cast<std::size_t>(g.seqs);
    auto found = group_divergence(key, g, by_rank);
    if (found && (!first || before(*found, *first))) first = found;
  }
  std::optional<RouteCheck> routes;
  if (!a.routes.empty()) routes = check_routes(a, logs);
  bool ok = !first && !(routes && routes->first);
  std::vector<int> ranks;
  for (const RankLog& log : logs) ranks.push_back(log.rank);
  if (a.json) {
    Json j{{"ok", ok},
           {"exit_code", ok ? 0 : 1},
           {"ranks", ranks},
           {"runs", runs.size()},
           {"groups", groups.size()},
           {"operations", operations},
           {"records", limits.records},
           {"divergence", finding_json(first)}};
    if (routes) {
      j["routes"] = Json{{"pattern", routes->pattern},
                         {"checked", routes->checked},
                         {"difference", finding_json(routes->first)}};
    }
    out << dump_json(j) << "\n";
  } else {
    if (first) out << first->message << "\n";
    if (routes && routes->first) out << routes->first->message << "\n";
    if (ok) {
      auto n = [](std::size_t k, const char* what) {
        return std::to_string(k) + " " + what + (k == 1 ? "" : "s");
      };
      out << "hpref verify: " << n(ranks.size(), "rank log") << ", "
          << (runs.size() > 1 ? n(runs.size(), "run") + ", " : "") << n(groups.size(), "group")
          << ", " << n(operations, "operation") << (operations == 1 ? " agrees" : " agree");
      if (routes)
        out << "; " << routes->checked << " all_to_all_v records match the " << routes->pattern
            << " routes";
      out << "\n";
    }
  }
  out.flush();
  return ok ? 0 : 1;
}

}  // namespace

CLI::App* add_verify_command(CLI::App& app, VerifyArgs& a) {
  auto* v = app.add_subcommand(
      "verify",
      "Post-mortem of a job run in checked mode with HPREF_CHECKED_LOG=LOGDIR: lines up every "
      "LOGDIR/rank<R>.jsonl per run (a job that makes its default process group again), group and "
      "sequence number and prints the first divergence across "
      "ranks "
      "(another kind, root, reduce op, dtype or byte count; for all_to_all_v the first pair whose "
      "counts "
      "differ, in the checked mode's words; or a rank that never launched an operation the others "
      "logged), "
      "'first' meaning at the earliest line of the logs. With --routes, also every all_to_all_v's "
      "per-pair "
      "byte counts against the SPEC 7 routes of --boundaries. Exit codes: 0 everything agrees (one "
      "summary "
      "line), 1 a divergence or a route difference, 2 bad usage or a malformed log (named by file "
      "and line)");
  v->add_option("logdir", a.dir,
                "The HPREF_CHECKED_LOG directory (its rank<R>.jsonl files; others are ignored)")
      ->required();
  v->add_option(
       "--routes", a.routes,
       "Check every all_to_all_v against these SPEC 7 routes of a group of its size: window "
       "(sliding-window halos, SPEC 7.2, needs --window) or prefix (document prefixes, SPEC 7.4, "
       "needs "
       "--ratio); rank i must send input_splits[j] rows to member j and receive output_splits[j] "
       "rows "
       "from it (its own entry 0)")
      ->check(CLI::IsMember({"window", "prefix"}));
  v->add_option("--boundaries", a.boundaries,
                "With --routes: document boundaries, comma-separated, from 0 to local-length x "
                "group size, e.g. "
                "0,3,27,32")
      ->check(non_empty("boundary list"));
  // `each` runs once per value given: whether an option was given at all, 0 included.
  auto given = [](bool& flag) { return [&flag](const std::string&) { flag = true; }; };
  v->add_option("--local-length", a.local_length, "With --routes: rows each rank owns (L)")
      ->check(integer_of(a.local_length))
      ->each(given(a.has_local_length));
  v->add_option("--window", a.window, "With --routes window: the window length in rows")
      ->check(integer_of(a.window))
      ->each(given(a.has_window));
  v->add_option("--ratio", a.ratio, "With --routes prefix: the compression ratio, 1 or 2")
      ->check(integer_of(a.ratio))
      ->each(given(a.has_ratio));
  v->add_option(
       "--row-bytes", a.row_bytes,
       "With --routes: the bytes of one row (e.g. hidden size x element size). The logs hold byte "
       "counts "
       "only (no element size or row shape), so rows become bytes by this; required with --routes")
      ->check(integer_of(a.row_bytes))
      ->each(given(a.has_row_bytes));
  v->add_option(
       "--run", a.runs,
       "With --routes: check only this run's all_to_all_v (repeatable; default every run). "
       "A job that destroys its default process group and makes it again logs the groups "
       "of its k-th default group with \"run\": k (0, or no field, for the first); "
       "groups and seqs are per run")
      ->check(integer_of<std::int64_t>());
  v->add_option("--group", a.groups,
                "With --routes: check only this group's all_to_all_v (repeatable; default every "
                "group: a log "
                "whose other all-to-alls move other data, the payload exchange, needs it); "
                "--group and --seq that select no all_to_all_v are refused (exit 2)")
      ->check(integer_of<std::int64_t>());
  v->add_option("--seq", a.seqs,
                "With --routes: check only this sequence number's all_to_all_v (repeatable; "
                "default all: one "
                "--boundaries describes one step)")
      ->check(integer_of<std::int64_t>());
  v->add_flag(
      "--json", a.json,
      "Print one JSON object: ok, exit_code, ranks, runs, groups, operations, records, "
      "divergence (null or "
      "{type: mismatch|missing|members, run, group, seq, ranks, message}) and with --routes "
      "routes {pattern, "
      "checked, difference}; a usage error or malformed log as {ok: false, failure: usage, "
      "exit_code: 2, "
      "error: {kind, message}}");
  v->add_option("--max-line-bytes", a.max_line_bytes, "Refuse (exit 2) a log line longer than this")
      ->check(integer_of(a.max_line_bytes))
      ->capture_default_str();
  v->add_option("--max-records", a.max_records,
                "Refuse (exit 2) logs of more lines than this, all ranks together")
      ->check(integer_of(a.max_records))
      ->capture_default_str();
  v->add_option("--max-log-bytes", a.max_log_bytes,
                "Refuse (exit 2) logs of more bytes than this, all ranks together")
      ->check(integer_of(a.max_log_bytes))
      ->capture_default_str();
  return v;
}

int run_verify(const VerifyArgs& args, std::ostream& out) {
  try {
    return verify(args, out);
  } catch (const Error& e) {
    if (!args.json) throw;
    Json object = Json::object();
    return json_error(object, e, out);
  }
}

}  // namespace hpref::cli
