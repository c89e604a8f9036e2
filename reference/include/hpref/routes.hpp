// Sequence dispatch routes (SPEC 7): which rows each context-parallel rank sends to and
// receives from every peer so that it can assemble the interval of the global sequence
// bank it needs. Pure and deterministic: every rank computes every route without
// communication, so they can be property-tested by the million.
//
// Compressed documents (SPEC 7.3, our definition): with ratio r, document d (raw tokens
// [b_d, b_{d+1})) has floor((b_{d+1} - b_d) / r) complete blocks; block j covers raw
// tokens [b_d + j r, b_d + (j+1) r). A block belongs to the rank holding its last raw
// token. compressed_document_offsets(b, r) are the prefix sums of the block counts (D+1
// entries from 0); compressed_owner_offsets(b, r, L)[p], p = 0..size with size =
// b.back() / L, counts the blocks whose last raw token is < p L. Trailing tokens of a
// document shorter than a block belong to no block.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hpref {

struct Interval {
  std::int64_t start = 0;
  std::int64_t end = 0;
  bool operator==(const Interval&) const = default;
};

// SPEC 7.1: the fields every rank's dispatch needs.
struct Route {
  std::int64_t local_length = 0;  // rows this rank owns
  std::int64_t global_start = 0;  // this rank's interval [global_start, global_end)
  std::int64_t global_end = 0;
  std::int64_t local_output_start = 0;      // where the own shard sits in the assembled output
  std::vector<std::int64_t> send_offsets;   // per peer: first local row sent to it
  std::vector<std::int64_t> input_splits;   // per peer: rows sent to it
  std::vector<std::int64_t> output_splits;  // per peer: rows received from it
  bool needs_exchange = false;              // the same on every rank

  // (send_offsets[p], input_splits[p]) per peer p, self included (count 0); as many pairs
  // as the shorter of the two tables (the original's zip).
  std::vector<std::pair<std::int64_t, std::int64_t>> owner_ranges() const;
  // The shape every route satisfies: P >= 1 peers in every table, non-negative values,
  // send ranges inside the owner shard (offset 0 when nothing is sent), no exchange
  // unless needs_exchange, an interval that holds the own shard and what is received
  // (global_end - global_start == local_length + sum(output_splits), no int64 overflow),
  // 0 <= local_output_start <= sum(output_splits). problem().empty().
  bool is_valid() const;
  // Why the route is not valid, in one sentence naming the bad field and value, or empty
  // when is_valid(). With self >= 0 (this rank's index in the route) also: self is one of
  // the peers, its own entries are 0, and local_output_start equals the rows received
  // from ranks before it (what dispatch assembles by, SPEC 8.1).
  std::string problem(std::int64_t self = -1) const;
  bool operator==(const Route&) const = default;
};

// SPEC 7.1. owner_offsets defaults to p * local_length (P+1 entries). Throws Error with
// one kind per check, in the SPEC's order: route_owner_count, route_no_intervals,
// route_owner_start, route_rank, route_owner_order, route_interval, route_local_length
// (and route_overflow for products beyond int64).
Route interval_route(std::int64_t local_length, std::int64_t rank,
                     std::span<const Interval> intervals,
                     std::optional<std::span<const std::int64_t>> owner_offsets = std::nullopt);

// SPEC 7.2: document-local sliding-window halos. Errors route_arguments (naming which
// argument), route_boundaries, then those of interval_route.
Route sliding_window_route(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                           std::int64_t size, std::int64_t rank, std::int64_t window);

// SPEC 7.4: document-prefix (main KV) routes over compressed documents, ratio 1 or 2.
Route document_prefix_route(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                            std::int64_t size, std::int64_t rank, std::int64_t ratio);

// SPEC 7.3 (see the header comment). `boundaries` must start at 0 and not decrease, ratio
// and local_length must be positive (Error route_arguments / route_boundaries otherwise);
// compressed_owner_offsets refuses more than kMaxRoutePeers shards (boundaries.back() /
// local_length) with Error route_too_large, before allocating.
std::vector<std::int64_t> compressed_document_offsets(std::span<const std::int64_t> boundaries,
                                                      std::int64_t ratio);
std::vector<std::int64_t> compressed_owner_offsets(std::span<const std::int64_t> boundaries,
                                                   std::int64_t ratio, std::int64_t local_length);

// The largest `size` the window and prefix planners accept: their tables take O(size)
// memory (about 64 bytes a rank); beyond it Error route_too_large, before allocating.
inline constexpr std::int64_t kMaxRoutePeers = std::int64_t{1} << 20;
// The most ranks the all-ranks planners below accept: their tables take O(P^2) memory
// (24 bytes per rank pair); beyond it Error route_too_large, before allocating.
inline constexpr std::int64_t kMaxAllRoutesPeers = 2048;

// All ranks' routes of one configuration (index = rank), sharing the O(P + D) work of
// intervals and owners; each route then costs O(P).
std::vector<Route> interval_routes(
    std::int64_t local_length, std::span<const Interval> intervals,
    std::optional<std::span<const std::int64_t>> owner_offsets = std::nullopt);
std::vector<Route> sliding_window_routes(std::span<const std::int64_t> boundaries,
                                         std::int64_t local_length, std::int64_t size,
                                         std::int64_t window);
std::vector<Route> document_prefix_routes(std::span<const std::int64_t> boundaries,
                                          std::int64_t local_length, std::int64_t size,
                                          std::int64_t ratio);
// The same into `out` (resized to `size` routes), reusing the memory of the routes it
// holds: a planner called every step with the same P writes its O(P^2) tables into warm
// memory instead of fresh pages (at P = 1024 those are 24 MiB, whose first touch costs more
// than planning). Every check runs before `out` is touched: on an error it is unchanged.
void interval_routes(std::int64_t local_length, std::span<const Interval> intervals,
                     std::optional<std::span<const std::int64_t>> owner_offsets,
                     std::vector<Route>& out);
void sliding_window_routes(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                           std::int64_t size, std::int64_t window, std::vector<Route>& out);
void document_prefix_routes(std::span<const std::int64_t> boundaries, std::int64_t local_length,
                            std::int64_t size, std::int64_t ratio, std::vector<Route>& out);

// The intervals the window and prefix routes give every peer (SPEC 7.2, 7.4), after the
// same argument checks; used by the planners above and by tests.
std::vector<Interval> sliding_window_intervals(std::span<const std::int64_t> boundaries,
                                               std::int64_t local_length, std::int64_t size,
                                               std::int64_t window);

}  // namespace hpref
