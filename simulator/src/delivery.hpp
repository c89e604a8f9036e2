// Data (SPEC 9.3): the segment's buffers and what each wait delivers. Send data is staged
// at launch; an operation's buffers live until every member has consumed its share (copied
// it at its wait, or is gone); an all_reduce is reduced once, in member order. Only the
// monitor allocates in the segment. respond_error writes any error answer into a slot.
#pragma once

#include <boost/interprocess/managed_shared_memory.hpp>
#include <cstdint>
#include <map>
#include <vector>

#include "matcher.hpp"
#include "shared.hpp"

namespace hpref::sim::detail {

void respond_error(Slot& s, const CommError& e);

class Delivery {
 public:
  Delivery(boost::interprocess::managed_shared_memory& segment, std::size_t segment_bytes,
           Matcher& matcher, const Groups& groups, Control* control, int ranks);
  char* at(std::uint64_t handle) const { return base_ + handle; }
  // A staging area for rank r's next launch or outcome (0 bytes: none). CommError
  // comm_resource when the segment is full.
  std::uint64_t stage(int r, std::uint64_t bytes);
  std::uint64_t take_stage(int r);  // now the operation's
  void drop_stage(int r);           // and r's spare and pool: r is gone
  // Rank r's spare area (Slot::spare): use_spare makes it r's staging area for a launch of
  // `bytes` (false if r has none that large); refill_spare gives r one of at least `bytes`
  // for its next launch, if the segment has room (none is no error: that launch then asks
  // for a staging area first).
  bool use_spare(int r, std::uint64_t bytes);
  void refill_spare(int r, std::uint64_t bytes);
  // The `bytes` rank r staged (its outcome) as text; the area is freed.
  std::string take_text(int r, std::uint64_t bytes);
  // all_reduce: the members' data reduced in member order (CommError comm_resource).
  void reduce(Op& op);
  // The pieces of work `w`'s operation its rank copies, into `s`; the bytes received.
  std::uint64_t pieces(Slot& s, const Op& op, const WorkRef& w) const;
  // Rank r may copy from `w`'s buffers until its next request.
  void hold(int r, const WorkRef& w) { held_[static_cast<std::size_t>(r)].push_back(w); }
  void release(int r);  // r made its next request, or is gone
  // The member has copied its share or is gone; the last one frees the op's buffers.
  void consume(const OpKey& key, int member);
  void consume_all(int r);  // r is gone: its share of every operation

 private:
  std::uint64_t allocate(std::uint64_t bytes);  // drops every spare and pool before failing
  void* raw_allocate(std::uint64_t bytes);      // nullptr: no room (or past the segment)
  void set_spare(int r, std::uint64_t handle, std::uint64_t bytes);
  void deallocate(std::uint64_t& handle);
  // Rank r's pool: staging areas r wrote before, kept for its next launches instead of
  // freed. A page of the segment costs a fault in each process the first time it maps it
  // (~3.5 us for a fresh page here, ~1.5 us for one another process has written); an area
  // that goes back to the rank that writes it is mapped there once, and in its receivers
  // once. Freed areas went to whichever rank launched next: 8 ranks x 16 MiB all_to_all_v
  // took ~3570 faults per rank and launch (of 4096 pages), every launch, 43 ms per
  // operation; pooled, none after the first few operations, 20 ms. An area taken from
  // another rank's pool moves its faults, not ends them: a rank whose own areas were all
  // still held took one from a peer (~1 in 9 launches), which then lacked one, and so on
  // for as long as the run lasted (16 MiB on 8 ranks: ~2900 faults per operation, forever).
  // So a rank takes, in this order: its own; one it wrote before from any pool; a new one
  // while the segment has room; only then another rank's.
  struct Area {
    std::uint64_t handle, bytes;
  };
  struct AreaInfo {
    std::uint64_t bytes;
    std::uint64_t writers;  // bit r: rank r wrote it (its pages are mapped writable there)
  };
  // From `owner`'s pool the smallest area fitting `bytes`, among those r wrote if `written`.
  Area from_pool(int owner, int r, std::uint64_t bytes, bool written);
  // An area of at least `bytes` for rank r to write, in the order above; {0, 0} if the
  // segment has no room and `must` is false, CommError comm_resource if it is true.
  Area acquire(int r, std::uint64_t bytes, bool must);
  void to_pool(int r, std::uint64_t& handle);  // freed instead once r is gone
  void drop_pools();

  static constexpr std::size_t kPoolAreas = 4;  // per rank; beyond, the smallest is freed
  static constexpr std::size_t kAlign =
      64;  // staging areas: whole cache lines (hpref/detail/checksum.hpp)

  boost::interprocess::managed_shared_memory& segment_;
  char* base_;
  std::size_t segment_bytes_;
  Matcher& matcher_;
  const Groups& groups_;
  Control* control_;
  std::vector<std::uint64_t> stage_;                // per rank: handed out, not yet launched
  std::vector<std::uint64_t> spare_, spare_bytes_;  // per rank; the slots show copies
  std::vector<std::vector<Area>> pool_;             // per rank
  std::vector<bool> gone_;                          // per rank: drop_stage was called
  std::map<std::uint64_t, AreaInfo> areas_;         // handle -> its size and writers
  std::vector<std::vector<WorkRef>> held_;          // per rank
};

}  // namespace hpref::sim::detail
