// The scheduler: the monitor process's loop, which decides who runs next. It hands the
// baton to one rank at a time (a ready rank drawn with the seeded generator), serves that
// rank's requests with the other parts (groups, matcher, delivery, faults, trace), notices
// dead ranks, and reports a deadlock when nobody can run but someone waits.
#pragma once

#include <sys/types.h>

#include <boost/interprocess/managed_shared_memory.hpp>
#include <string>
#include <vector>

#include "delivery.hpp"
#include "faults.hpp"
#include "groups.hpp"
#include "hpref/sim/cluster.hpp"
#include "matcher.hpp"
#include "shared.hpp"
#include "trace.hpp"

namespace hpref::sim::detail {

class Scheduler {
 public:
  Scheduler(Control* control, boost::interprocess::managed_shared_memory& segment, int ranks,
            const Options& options, std::vector<pid_t> pids);
  RunResult run();

 private:
  enum class State { ready, blocked_wait, blocked_group, exited, dead };
  struct Rank {
    pid_t pid = -1;
    State state = State::ready;
    std::uint64_t waiting = 0;   // blocked_wait: the work id
    std::uint64_t launches = 0;  // operations launched so far
    RankOutcome outcome;
  };

  Slot& slot(int r) { return control_->slots[r]; }
  // The loop and the baton.
  int choose();
  void serve(int r);
  bool await_wake(int r);
  bool drop_stale_wake();
  // Liveness.
  void reap_others(int running);
  bool reap(int r);
  bool collected(int r, int& status);
  void kill_rank(int r, const std::string& how);
  void gone(int r, const std::string& how);  // exited ("") or died (how): fail what needs it
  bool is_gone(int r) const;
  std::string gone_text(const std::vector<int>& ranks, std::vector<int>* gone) const;
  void deadlock();
  std::string waits_on(int r) const;
  // Requests.
  int launch_member(int r);
  bool stage(int r);
  void on_stage(int r);
  void on_staged(int r);
  void on_wait(int r);
  void on_new_group(int r);
  void on_finish_staged(int r);
  // Operations and groups.
  void advance(const OpKey& key);
  void fail_if_peers_gone(Op& op, const OpKey& key);
  void respond_wait(int r, std::uint64_t work);
  bool fail_group_if_peers_gone();
  void fail_group_creation(const std::string& message, Errc code);

  Control* control_;
  int n_;
  const Options& options_;
  SplitMix64 rng_;
  std::vector<Rank> ranks_;
  std::uint64_t decisions_ = 0;
  std::vector<int> ready_, undelayed_;  // choose()'s lists, kept to reuse their storage
  int gone_count_ = 0;                  // ranks exited or dead
  // CLOCK_MONOTONIC as await_wake last read it, and when the waiting ranks were last
  // looked at for deaths (every kReapNs at most).
  static constexpr std::int64_t kReapNs = 1000 * 1000;
  std::int64_t now_ns_ = 0, reaped_ns_ = -kReapNs;
  Trace trace_;
  FaultPlan faults_;
  Groups groups_;
  Matcher matcher_;
  Delivery delivery_;
};

}  // namespace hpref::sim::detail
