// The shared segment's control block: one slot per rank through which a rank posts a
// request and reads the monitor's response. Only the rank holding the baton writes its
// slot; only the monitor allocates in the segment.
#pragma once

#include <semaphore.h>

#include <cstddef>
#include <cstdint>

#include "hpref/op_signature.hpp"

namespace hpref::sim::detail {

inline constexpr int kMaxRanks = 64;
inline constexpr std::size_t kMessageBytes = 16384;
inline constexpr std::size_t kNameBytes = 128;
// Send data up to this size travels in the slot itself: one round trip per launch.
inline constexpr std::size_t kInlineBytes = 4096;
// Send data up to this size goes into the rank's spare staging area (Slot::spare): one round
// trip per launch too. Larger launches ask for a staging area first (from the rank's pool,
// delivery.hpp): the round trip costs less than the copy, and a spare that large would be one
// more area per rank in rotation, each fresh page of it a fault (~4 us here). Measured
// 2026-12-01: spares for every size (from the rank's pool, or new while the segment stayed
// half free) cut 8 ranks x 1 MiB all_to_all_v from 56 to 35 switches an operation, yet made
// 256 KiB - 2 MiB per rank 5-10% slower (medians of 4 interleaved runs; 8 MiB even): the
// extra area in rotation per rank costs more in cache than the round trip it saves.
inline constexpr std::size_t kSpareBytes = 256 * 1024;

// An operation's signature in its wire form (write_signature over the group's size, at
// most kMaxRanks members: signature_wire_bytes(kMaxRanks), checked by the scheduler).
inline constexpr std::size_t kSignatureBytes = 8 * (6 + 2 * kMaxRanks);

enum class Req : std::int32_t {
  none,
  new_group,
  launch,
  launch_staged,
  wait,
  finish,
  finish_staged
};
// How a rank function ended: returned, threw an hpref::Error (its Errc travels), or threw
// anything else.
enum class Finish : std::int32_t { ok, error, exception };

// A copy a rank makes at wait(): bytes from a staged area into its output buffer.
struct Piece {
  std::uint64_t handle;  // segment handle of the staged area; 0: the rank's own send buffer
  std::uint64_t offset;  // within it
  std::uint64_t bytes;
  std::uint64_t dst;  // offset in the rank's output buffer
};

struct Slot {
  sem_t go;  // the monitor posts: your turn, your response is ready
  // ---- request (rank -> monitor)
  Req req;
  std::int32_t group;
  std::uint8_t signature[kSignatureBytes];
  std::int32_t nranks;
  std::int32_t ranks[kMaxRanks];
  char backend[kNameBytes];
  std::uint64_t work;         // wait: the work id
  std::uint64_t stage_bytes;  // launch / finish: bytes to stage
  std::uint64_t checksum;     // launch_staged: checksum of the staged bytes
  std::int32_t inline_data;   // launch_staged: the bytes are in `data` (not yet staged)
  std::int32_t in_spare;      // launch_staged: the bytes are in the spare area (below)
  unsigned char data[kInlineBytes];
  Finish finish;             // finish_staged: how the rank function ended
  std::int32_t finish_code;  // Finish::error: the Errc
  // ---- response (monitor -> rank)
  std::int32_t status;  // 0 ok, else an Errc value
  std::int32_t err_group;
  std::int64_t err_seq;
  std::int32_t err_nranks;
  std::int32_t err_ranks[kMaxRanks];
  char message[kMessageBytes];
  std::uint64_t handle;   // launch / finish: staging area; new_group: the group id
  std::uint64_t work_id;  // launch_staged: the new work
  std::int32_t npieces;
  Piece pieces[kMaxRanks];
  std::int64_t flip_byte;  // wait: flip this byte of what was received (-1: none)
  std::int32_t crashed;    // set by the rank just before its crash fault's SIGKILL
  // A staging area the monitor keeps for this rank's next launch (0: none): a launch whose
  // send data fits copies it here and launches in one round trip instead of two. Only the
  // monitor changes it, while the rank waits for its turn.
  std::uint64_t spare;
  std::uint64_t spare_bytes;
};

struct Control {
  sem_t wake;  // a rank posts: my request is in my slot
  std::int32_t nranks;
  Slot slots[kMaxRanks];
};

}  // namespace hpref::sim::detail
