// What every transport shares: the deadline poll, the failed state, the messages.
#include "hpref/device/transport.hpp"

#include <sched.h>

#include <chrono>
#include <cstring>
#include <numeric>

namespace hpref::device {

std::string op_text(const OpContext& op) {
  return std::string(op_kind_name(op.kind)) + " on group " + std::to_string(op.group) + " " +
         rank_list_text(op.ranks) + " seq " + std::to_string(op.seq) + " on rank " +
         std::to_string(op.rank);
}

Transport::Transport(const char* name, const char* after_failure, int rank, int size,
                     std::int64_t timeout_ms)
    : name_(name),
      after_failure_(after_failure),
      rank_(rank),
      world_(static_cast<std::size_t>(size)),
      timeout_ms_(timeout_ms) {
  std::iota(world_.begin(), world_.end(), 0);
}

bool Transport::host_memory(const void*) const { return true; }

void Transport::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void Transport::idle() { sched_yield(); }  // oversubscribed ranks share cores

void Transport::poll(const OpContext& op, const std::function<bool()>& done,
                     const std::string& what) {
  // Saturated: now + a timeout of centuries (a "no timeout" of INT64_MAX ms) overflowed the
  // clock's nanoseconds into a deadline already past.
  using Clock = std::chrono::steady_clock;
  auto now = Clock::now();
  auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  auto deadline = timeout_ms_ >= room.count() ? Clock::time_point::max()
                                              : now + std::chrono::milliseconds(timeout_ms_);
  for (unsigned spin = 0;; ++spin) {
    if (done()) return;
    if ((spin & 31) == 31 && Clock::now() > deadline) {
      fail(Errc::comm_timeout,
           (what.empty() ? op_text(op) : what) + " did not complete within " +
               std::to_string(timeout_ms_) +
               " ms: a member is missing, dead or running other operations; " + after_failure_ +
               " (SPEC 9.2)",
           op);
    }
    if (spin >= 64) idle();
  }
}

void Transport::fail(Errc code, const std::string& message, const OpContext& op) {
  if (!failed_) failure_ = code;
  failed_ = true;
  abort();
  throw CommError(code, message, op.group, op.seq,
                  std::vector<int>(op.ranks.begin(), op.ranks.end()));
}

}  // namespace hpref::device
