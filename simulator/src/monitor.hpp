// The monitor: the calling process, which owns all scheduling state. It hands the baton
// to one rank at a time, matches collectives by (group, sequence), checks agreement,
// moves data, detects deadlocks and dead ranks, applies fault plans and writes the trace.
#pragma once

#include <sys/types.h>

#include <boost/interprocess/managed_shared_memory.hpp>
#include <map>
#include <string>
#include <vector>

#include "hpref/sim/cluster.hpp"
#include "shared.hpp"

namespace hpref::sim::detail {

class Monitor {
 public:
  Monitor(Control* control, boost::interprocess::managed_shared_memory& segment, int ranks,
          const Options& options, std::vector<pid_t> pids);
  RunResult run();

 private:
  enum class State { ready, blocked_wait, blocked_group, exited, dead };
  struct OpKey {
    int group;
    std::int64_t seq;
    auto operator<=>(const OpKey&) const = default;
  };
  struct Member {
    bool launched = false;
    bool consumed = false;
    std::uint64_t handle = 0;  // staged send data (0: none)
    std::uint64_t bytes = 0;
    std::vector<std::uint64_t> counts_in, counts_out;
    std::uint64_t launch_index = 0;  // the rank's k-th operation
  };
  struct Op {
    OpKind kind = OpKind::barrier;
    int root = -1, reduce_op = 0, dtype = 0, first = -1;
    std::uint64_t in_bytes = 0;
    std::vector<Member> members;
    bool complete = false, failed = false;
    Errc error = Errc::internal;
    std::string message;
    std::vector<int> error_ranks;
    std::uint64_t result = 0;  // all_reduce: the reduced bytes
    int unconsumed = 0;
  };
  struct GroupInfo {
    std::vector<int> ranks;
    std::string backend;
    std::vector<std::int64_t> next_seq;
    int index_of(int rank) const;
  };
  struct WorkRef {
    OpKey key;
    int member;
    int rank;
  };
  struct Rank {
    pid_t pid = -1;
    State state = State::ready;
    std::uint64_t waiting = 0;
    std::uint64_t launches = 0;
    std::uint64_t delay = 0;
    std::uint64_t stage = 0;  // a staging area handed out and not yet registered
    std::vector<OpKey> held;  // ops whose data it may still be copying
    RankOutcome outcome;
    std::vector<int> group_ranks;  // new_group arrival
    std::string group_backend;
    bool group_arrived = false;
    bool delay_fired = false;  // passed over at least once because of a delay fault
  };

  Slot& slot(int r) { return control_->slots[r]; }
  void serve(int r);
  bool await_wake(int r);
  void reap_others(int running);
  bool reap(int r);
  void kill_rank(int r, const std::string& how);
  int choose();
  void resume(int r);

  int launch_member(int r);
  void on_launch(int r);
  void on_staged(int r);
  void on_wait(int r);
  void on_new_group(int r);
  void on_finish(int r);
  void on_finish_staged(int r);

  void check_op(Op& op, const OpKey& key, int r);
  void complete(Op& op, const OpKey& key);
  void fail(Op& op, const OpKey& key, Errc code, const std::string& message, std::vector<int> ranks);
  void wake_waiters(const OpKey& key);
  std::vector<int> unlaunched(const Op& op, const GroupInfo& g) const;
  void fail_if_peers_gone(Op& op, const OpKey& key);
  void respond_wait(int r, std::uint64_t work);
  void respond_error(int r, Errc code, const std::string& message, int group, std::int64_t seq,
                     const std::vector<int>& ranks);
  void release(int r);
  void consume(const OpKey& key, int member);
  void gone(int r, const std::string& how);  // exited or dead: fail what needs it
  bool fail_group_if_peers_gone();
  void fail_group_creation(const std::string& message, Errc code);
  void deadlock();
  std::string waits_on(int r) const;
  std::string gone_text(const std::vector<int>& ranks) const;
  std::vector<int> gone_ranks(const std::vector<int>& ranks) const;
  std::uint64_t allocate(std::uint64_t bytes);
  void deallocate(std::uint64_t& handle);
  std::string describe(const Op& op) const;

  Control* control_;
  boost::interprocess::managed_shared_memory& segment_;
  char* base_;
  int n_;
  const Options& options_;
  SplitMix64 rng_;
  std::vector<Rank> ranks_;
  std::vector<GroupInfo> groups_;
  std::map<OpKey, Op> ops_;
  std::vector<WorkRef> works_;
  std::vector<std::string> trace_;
  std::uint64_t decisions_ = 0;
  int group_arrivals_ = 0;
  std::vector<bool> flip_fired_;  // per options_.faults index
  std::vector<std::string> unfired() const;
};

}  // namespace hpref::sim::detail
