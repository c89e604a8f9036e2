// `hpref route`: tables, the send matrix and the batch ops.
#include "hpref/cli/route.hpp"

#include <charconv>
#include <cstdio>
#include <sstream>

#include "hpref/cli/batch.hpp"
#include "hpref/error.hpp"

namespace hpref::cli {
namespace {

// `j`, the value of field `name`, as an int64; Error invalid_request otherwise.
std::int64_t int_value(const Json& j, const char* name) {
  if (auto v = json_as_int64(j)) return *v;
  throw Error(Errc::invalid_request, std::string("\"") + name +
                                         "\" must be an int64 JSON integer, got " +
                                         shortened(dump_json(j), 80));
}

std::int64_t int_field(const Json& request, const char* name) {
  return int_value(required_field(request, name), name);
}

std::vector<std::int64_t> int_list(const Json& j, const char* name) {
  if (!j.is_array()) {
    throw Error(Errc::invalid_request,
                std::string("\"") + name + "\" must be an array of integers");
  }
  std::vector<std::int64_t> out;
  out.reserve(j.size());
  for (const Json& e : j) out.push_back(int_value(e, name));
  return out;
}

std::vector<Interval> interval_list(const Json& j) {
  if (!j.is_array())
    throw Error(Errc::invalid_request, "\"intervals\" must be an array of [start, end]");
  std::vector<Interval> out;
  for (const Json& pair : j) {
    if (!pair.is_array() || pair.size() != 2) {
      throw Error(Errc::invalid_request,
                  "each interval must be [start, end], got " + shortened(dump_json(pair), 80));
    }
    auto v = int_list(pair, "intervals");
    out.push_back({v[0], v[1]});
  }
  return out;
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// The table's text without the padding its last column leaves at the end of each line.
std::string without_trailing_spaces(const std::string& table) {
  std::string out;
  out.reserve(table.size());
  for (char c : table) {
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
    }
    out.push_back(c);
  }
  return out;
}

// Adds `n` to `total`, a sum of the send matrix (rows sent overlap: it is not bounded by a
// shard); Error route_overflow naming `what` ("total", "row total of rank 2") and both terms
// when the sum is beyond int64.
void add_to_total(std::int64_t& total, std::int64_t n, const char* what, std::size_t rank) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(total, n, &sum)) {
    std::string name = rank == static_cast<std::size_t>(-1)
                           ? std::string(what)
                           : std::string(what) + " of rank " + std::to_string(rank);
    throw Error(Errc::route_overflow, "send-matrix " + name + " = " + std::to_string(total) +
                                          " + " + std::to_string(n) + " is beyond int64");
  }
  total = sum;
}

}  // namespace

Json route_to_json(const Route& r) {
  return Json{{"local_length", r.local_length},   {"global_start", r.global_start},
              {"global_end", r.global_end},       {"local_output_start", r.local_output_start},
              {"send_offsets", r.send_offsets},   {"input_splits", r.input_splits},
              {"output_splits", r.output_splits}, {"needs_exchange", r.needs_exchange}};
}

Json handle_route_request(const Json& request) {
  const Json& op = required_field(request, "op");
  if (!op.is_string()) throw Error(Errc::invalid_request, "\"op\" must be a string");
  const std::string& name = op.get_ref<const std::string&>();
  Route route;
  if (name == "interval_route") {
    auto intervals = interval_list(required_field(request, "intervals"));
    std::vector<std::int64_t> owners;
    auto it = request.find("owner_offsets");
    bool has_owners = it != request.end() && !it->is_null();
    if (has_owners) owners = int_list(*it, "owner_offsets");
    route = interval_route(
        int_field(request, "local_length"), int_field(request, "rank"), intervals,
        has_owners ? std::optional<std::span<const std::int64_t>>(owners) : std::nullopt);
  } else if (name == "sliding_window_route") {
    auto b = int_list(required_field(request, "boundaries"), "boundaries");
    route = sliding_window_route(b, int_field(request, "local_length"), int_field(request, "size"),
                                 int_field(request, "rank"), int_field(request, "window"));
  } else if (name == "document_prefix_route") {
    auto b = int_list(required_field(request, "boundaries"), "boundaries");
    route = document_prefix_route(b, int_field(request, "local_length"), int_field(request, "size"),
                                  int_field(request, "rank"), int_field(request, "ratio"));
  } else {
    throw Error(Errc::invalid_request,
                "unknown op \"" + name +
                    "\" (route ops: interval_route, sliding_window_route, document_prefix_route)");
  }
  return Json{{"ok", true}, {"route", route_to_json(route)}};
}

namespace {

// The first line of a document-prefix table (ratio > 0): its rows are compressed blocks.
std::string block_note(std::int64_t ratio) {
  if (ratio <= 0) return {};
  return "rows are compressed blocks of " + std::to_string(ratio) +
         (ratio == 1 ? " token" : " tokens") + " (SPEC 7.3): every count below is in blocks\n";
}

}  // namespace

std::string route_table(const Route& r, std::int64_t rank, std::int64_t ratio) {
  std::ostringstream out;
  out << block_note(ratio);
  out << "rank " << rank << " of " << r.send_offsets.size() << ": owns " << r.local_length
      << " rows; assembles interval [" << r.global_start << ", " << r.global_end
      << ") = " << (r.global_end - r.global_start) << " rows, own shard at output row "
      << r.local_output_start << "; needs_exchange " << (r.needs_exchange ? "true" : "false")
      << "\n";
  out << pad("peer", 6) << pad("sends", 8) << pad("from local row", 16) << pad("receives", 9)
      << "\n";
  for (std::size_t p = 0; p < r.send_offsets.size(); ++p) {
    bool self = static_cast<std::int64_t>(p) == rank;
    out << pad(std::to_string(p) + (self ? "*" : ""), 6)
        << pad(std::to_string(r.input_splits[p]), 8)
        << pad(r.input_splits[p] ? std::to_string(r.send_offsets[p]) : "-", 16)
        << pad(std::to_string(r.output_splits[p]), 9) << "\n";
  }
  out << "(* = this rank; sends are rows of the local shard, receives arrive in peer order "
         "around the own shard)\n";
  return without_trailing_spaces(out.str());
}

std::string send_matrix_table(const std::vector<Route>& routes, std::int64_t ratio) {
  std::size_t peers = routes.size();
  std::size_t width = 6;
  for (const Route& r : routes) {
    for (std::int64_t n : r.input_splits) width = std::max(width, std::to_string(n).size() + 2);
  }
  std::ostringstream out;
  out << block_note(ratio);
  out << "rows sent: row = sender, column = receiver (" << peers << " ranks; needs_exchange "
      << (peers && routes[0].needs_exchange ? "true" : "false") << ")\n";
  out << pad("from\\to", 9);
  for (std::size_t p = 0; p < peers; ++p) out << pad(std::to_string(p), width);
  out << pad("total", width) << "\n";
  std::vector<std::int64_t> column(peers, 0);
  std::int64_t all = 0;
  for (std::size_t r = 0; r < peers; ++r) {
    out << pad(std::to_string(r), 9);
    std::int64_t row = 0;
    for (std::size_t p = 0; p < peers; ++p) {
      std::int64_t n = routes[r].input_splits[p];
      out << pad(r == p ? "." : std::to_string(n), width);
      add_to_total(row, n, "row total", r);
      add_to_total(column[p], n, "column total", p);
    }
    add_to_total(all, row, "total", static_cast<std::size_t>(-1));
    out << pad(std::to_string(row), width) << "\n";
  }
  out << pad("total", 9);
  for (std::size_t p = 0; p < peers; ++p) out << pad(std::to_string(column[p]), width);
  out << pad(std::to_string(all), width) << "\n";
  out << pad("interval", 9);
  for (const Route& r : routes) {
    out << pad(std::to_string(r.global_start) + ":" + std::to_string(r.global_end), width);
  }
  out << "\n";
  return without_trailing_spaces(out.str());
}

std::vector<std::int64_t> parse_int_list(const std::string& text, const char* what) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string_view item(text.data() + start, end - start);
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size() || item.empty()) {
      throw Error(Errc::invalid_argument, std::string(what) + ": '" + std::string(item) + "' in '" +
                                              text + "' is not an int64");
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

std::vector<Interval> parse_interval_list(const std::string& text) {
  std::vector<Interval> out;
  if (text.empty()) return out;
  // Every item, an empty one too ("0:4," is refused as "0,6," is by parse_int_list).
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    auto colon = item.find(':');
    std::vector<std::int64_t> s, e;
    if (colon != std::string::npos && item.find(':', colon + 1) == std::string::npos) {
      try {  // a bad number is named with its item and the whole list, below
        s = parse_int_list(item.substr(0, colon), "--intervals start");
        e = parse_int_list(item.substr(colon + 1), "--intervals end");
      } catch (const Error&) {
        s.clear();
      }
    }
    if (s.size() != 1 || e.size() != 1) {
      throw Error(Errc::invalid_argument, "--intervals: '" + item + "' in '" + text +
                                              "' is not start:end of two int64s (e.g. 0:7,5:10)");
    }
    out.push_back({s[0], e[0]});
    start = end + 1;
  }
  return out;
}

}  // namespace hpref::cli
