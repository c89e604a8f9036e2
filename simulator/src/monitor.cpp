// The monitor's loop (see monitor.hpp).
#include "monitor.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "rank_comm.hpp"

namespace hpref::sim::detail {
namespace {

std::string how_died(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status)) + " without reporting";
  return "vanished";
}

void copy_message(char* dst, const std::string& text) {
  std::string shown = text;
  if (shown.size() >= kMessageBytes) shown = shown.substr(0, kMessageBytes - 40) + " ... (message shortened)";
  std::memcpy(dst, shown.c_str(), shown.size() + 1);
}

}  // namespace

int Monitor::GroupInfo::index_of(int rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

Monitor::Monitor(Control* control, boost::interprocess::managed_shared_memory& segment, int ranks,
                 const Options& options, std::vector<pid_t> pids)
    : control_(control), segment_(segment), base_(static_cast<char*>(segment.get_address())),
      n_(ranks), options_(options), rng_(options.seed), ranks_(static_cast<std::size_t>(ranks)) {
  for (int r = 0; r < n_; ++r) ranks_[r].pid = pids[r];
  GroupInfo world;
  for (int r = 0; r < n_; ++r) world.ranks.push_back(r);
  world.backend = options.world_backend;
  world.next_seq.assign(static_cast<std::size_t>(n_), 0);
  groups_.push_back(std::move(world));
  for (const Fault& f : options.faults) {
    if (f.kind == Fault::Kind::delay && f.rank >= 0 && f.rank < n_) ranks_[f.rank].delay += f.at;
  }
}

std::uint64_t Monitor::allocate(std::uint64_t bytes) {
  if (bytes == 0) return 0;
  void* p = segment_.allocate(bytes, std::nothrow);
  if (p == nullptr) {
    throw CommError(Errc::comm_resource, "the simulator segment has no room for " + std::to_string(bytes) +
                                             " more bytes; raise Options::segment_bytes (now " +
                                             std::to_string(options_.segment_bytes) + ")");
  }
  return static_cast<std::uint64_t>(static_cast<char*>(p) - base_);
}

void Monitor::deallocate(std::uint64_t& handle) {
  if (handle != 0) segment_.deallocate(base_ + handle);
  handle = 0;
}

// ---------------------------------------------------------------------------------------
// The loop: pick a runnable rank with the seeded generator, serve it until it yields.

RunResult Monitor::run() {
  for (std::uint64_t turn = 0;; ++turn) {
    // Waiting ranks die only from outside; look for that now and then, and always before
    // declaring a deadlock.
    if (turn % 16 == 0) reap_others(-1);
    bool any_ready = false;
    for (const Rank& r : ranks_) any_ready |= r.state == State::ready;
    if (!any_ready) {
      reap_others(-1);
      bool still_blocked = false;
      for (const Rank& r : ranks_) {
        still_blocked |= r.state == State::blocked_wait || r.state == State::blocked_group;
        any_ready |= r.state == State::ready;
      }
      if (any_ready) continue;
      if (!still_blocked) break;
      deadlock();
      continue;
    }
    serve(choose());
  }
  RunResult result;
  for (Rank& r : ranks_) result.outcomes.push_back(r.outcome);
  result.trace = std::move(trace_);
  result.trace_hash = trace_hash(result.trace);
  result.decisions = decisions_;
  result.unfired_faults = unfired();
  return result;
}

// Faults of the plan that never took effect, each with why (SPEC 9.3: none is ignored silently).
std::vector<std::string> Monitor::unfired() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < options_.faults.size(); ++i) {
    const Fault& f = options_.faults[i];
    const Rank& rk = ranks_[static_cast<std::size_t>(f.rank)];
    switch (f.kind) {
      case Fault::Kind::crash:
        if (rk.outcome.status != RankOutcome::Status::died) {
          out.push_back(f.str() + ": rank " + std::to_string(f.rank) + " never reached call " +
                        std::to_string(f.at));
        }
        break;
      case Fault::Kind::flip:
        if (i >= flip_fired_.size() || !flip_fired_[i]) {
          out.push_back(f.str() + ": rank " + std::to_string(f.rank) + " received no payload" +
                        (f.byte >= 0 ? " reaching byte " + std::to_string(f.byte) : std::string()) +
                        " from its collective " + std::to_string(f.at));
        }
        break;
      case Fault::Kind::delay:
        if (f.at > 0 && !rk.delay_fired) {
          out.push_back(f.str() + ": rank " + std::to_string(f.rank) +
                        " was never passed over while another rank was ready");
        }
        break;
    }
  }
  return out;
}

int Monitor::choose() {
  std::vector<int> ready, undelayed;
  for (int r = 0; r < n_; ++r) {
    if (ranks_[r].state != State::ready) continue;
    ready.push_back(r);
    if (ranks_[r].delay == 0) undelayed.push_back(r);
  }
  const std::vector<int>& pool = undelayed.empty() ? ready : undelayed;
  int pick = pool[rng_.next() % pool.size()];
  ++decisions_;
  for (int r : ready) {
    if (r != pick && ranks_[r].delay > 0) {
      --ranks_[r].delay;
      ranks_[r].delay_fired = true;
    }
  }
  return pick;
}

void Monitor::resume(int r) { sem_post(&slot(r).go); }

void Monitor::serve(int r) {
  resume(r);
  for (;;) {
    if (!await_wake(r)) return;
    release(r);
    switch (slot(r).req) {
      case Req::launch: on_launch(r); resume(r); continue;  // the same rank stages its data
      case Req::finish: on_finish(r); resume(r); continue;
      case Req::launch_staged: on_staged(r); return;
      case Req::wait: on_wait(r); return;
      case Req::new_group: on_new_group(r); return;
      case Req::finish_staged: on_finish_staged(r); return;
      default: kill_rank(r, "sent an unknown request and was killed"); return;
    }
  }
}

// Waits for rank r's request; false if r died (or overran its turn and was killed).
bool Monitor::await_wake(int r) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 20 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000L;
    }
    if (sem_timedwait(&control_->wake, &deadline) == 0) return true;
    if (errno != ETIMEDOUT && errno != EINTR) throw Error(Errc::internal, "sem_timedwait failed");
    if (reap(r)) return false;
    reap_others(r);
    auto held = std::chrono::steady_clock::now() - start;
    if (held > std::chrono::milliseconds(options_.turn_timeout_ms)) {
      kill_rank(r, "held the baton for more than " + std::to_string(options_.turn_timeout_ms) +
                       " ms without reaching a scheduling point, and was killed");
      return false;
    }
  }
}

// Ranks other than the running one can only die from outside (they wait for the baton).
void Monitor::reap_others(int running) {
  for (int r = 0; r < n_; ++r) {
    if (r == running || ranks_[r].state == State::exited || ranks_[r].state == State::dead) continue;
    reap(r);
  }
}

// If rank r has died, records it (gone() marks it dead); true then.
bool Monitor::reap(int r) {
  int status = 0;
  if (waitpid(ranks_[r].pid, &status, WNOHANG) != ranks_[r].pid) return false;
  gone(r, how_died(status));
  return true;
}

// Kills rank r, collects it and records it as dead for `how`.
void Monitor::kill_rank(int r, const std::string& how) {
  kill(ranks_[r].pid, SIGKILL);
  waitpid(ranks_[r].pid, nullptr, 0);
  gone(r, how);
}

// ---------------------------------------------------------------------------------------
// Requests.

// r's member index in the group its launch names, or -1 after answering r with comm_usage.
int Monitor::launch_member(int r) {
  Slot& s = slot(r);
  int m = s.group < 0 || static_cast<std::size_t>(s.group) >= groups_.size()
              ? -1
              : groups_[static_cast<std::size_t>(s.group)].index_of(r);
  if (m < 0) {
    respond_error(r, Errc::comm_usage, "rank " + std::to_string(r) + " launched on group " +
                                           std::to_string(s.group) + ", which it is not a member of",
                  s.group, -1, {r});
  }
  return m;
}

void Monitor::on_launch(int r) {
  Slot& s = slot(r);
  s.status = 0;
  if (launch_member(r) < 0) return;
  try {
    ranks_[r].stage = allocate(s.stage_bytes);
    s.handle = ranks_[r].stage;
  } catch (const CommError& e) {
    respond_error(r, e.code(), e.what(), s.group, -1, {r});
  }
}

void Monitor::on_staged(int r) {
  Slot& s = slot(r);
  // Checked here too: sends of up to kInlineBytes (empty ones included) travel in the slot
  // and skip on_launch.
  int m = launch_member(r);
  if (m < 0) {
    ranks_[r].state = State::ready;
    return;
  }
  if (s.inline_data && s.stage_bytes > 0) {
    try {
      ranks_[r].stage = allocate(s.stage_bytes);
    } catch (const CommError& e) {
      respond_error(r, e.code(), e.what(), s.group, -1, {r});
      ranks_[r].state = State::ready;
      return;
    }
    std::memcpy(base_ + ranks_[r].stage, s.data, s.stage_bytes);
  }
  GroupInfo& g = groups_[static_cast<std::size_t>(s.group)];
  OpKey key{s.group, g.next_seq[static_cast<std::size_t>(m)]++};
  auto [it, fresh] = ops_.try_emplace(key);
  Op& op = it->second;
  if (fresh) {
    op.members.resize(g.ranks.size());
    op.unconsumed = static_cast<int>(g.ranks.size());
  }
  Member& me = op.members[static_cast<std::size_t>(m)];
  me.launched = true;
  me.handle = ranks_[r].stage;
  ranks_[r].stage = 0;
  me.bytes = s.stage_bytes;
  me.counts_in.assign(s.counts_in, s.counts_in + g.ranks.size());
  me.counts_out.assign(s.counts_out, s.counts_out + g.ranks.size());
  me.launch_index = ++ranks_[r].launches;
  std::ostringstream line;
  line << "r" << r << " g" << key.group << " s" << key.seq << " " << op_kind_name(s.kind)
       << " bytes=" << s.in_bytes << "/" << s.out_bytes;
  if (s.kind == OpKind::broadcast) line << " root=" << s.root;
  if (s.kind == OpKind::all_reduce) line << " op=" << s.reduce_op << " dtype=" << s.dtype;
  if (s.kind == OpKind::all_to_all_v) {
    line << " in=" << rank_list_text(std::vector<int>(me.counts_in.begin(), me.counts_in.end()))
         << " out=" << rank_list_text(std::vector<int>(me.counts_out.begin(), me.counts_out.end()));
  }
  char sum[24];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(s.checksum));
  line << " sum=" << sum;
  trace_.push_back(line.str());
  works_.push_back({key, m, r});
  s.status = 0;
  s.work_id = works_.size();
  if (!op.failed) {
    if (op.first < 0) {
      op.first = r;
      op.kind = s.kind;
      op.root = s.root;
      op.reduce_op = s.reduce_op;
      op.dtype = s.dtype;
      op.in_bytes = s.in_bytes;
    } else {
      check_op(op, key, r);
    }
  }
  if (!op.failed && !op.complete) fail_if_peers_gone(op, key);
  if (!op.failed && !op.complete &&
      std::all_of(op.members.begin(), op.members.end(), [](const Member& x) { return x.launched; })) {
    complete(op, key);
  }
  ranks_[r].state = State::ready;
  // Members already gone will never consume their share (this may free the op: last).
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    State st = ranks_[g.ranks[i]].state;
    if (st == State::exited || st == State::dead) consume(key, static_cast<int>(i));
  }
}

void Monitor::check_op(Op& op, const OpKey& key, int r) {
  Slot& s = slot(r);
  auto signature = [](OpKind kind, int root, int reduce_op, int dtype, std::uint64_t bytes) {
    OpSignature sig;
    sig.kind = kind;
    sig.root = root;
    sig.op = static_cast<ReduceOp>(reduce_op);
    sig.dtype = static_cast<DType>(dtype);
    sig.bytes = bytes;
    return sig;
  };
  OpSignature first = signature(op.kind, op.root, op.reduce_op, op.dtype, op.in_bytes);
  OpSignature mine = signature(s.kind, s.root, s.reduce_op, s.dtype, s.in_bytes);
  if (!same_call(first, mine)) {
    fail(op, key, Errc::comm_mismatch,
         "collective mismatch on group " + std::to_string(key.group) + " seq " + std::to_string(key.seq) +
             ": rank " + std::to_string(op.first) + " launched " + first.str() + " but rank " + std::to_string(r) +
             " launched " + mine.str(),
         {op.first, r});
  }
}

void Monitor::complete(Op& op, const OpKey& key) {
  const GroupInfo& g = groups_[static_cast<std::size_t>(key.group)];
  if (op.kind == OpKind::all_to_all_v) {
    std::vector<OpSignature> members(g.ranks.size());
    for (std::size_t i = 0; i < g.ranks.size(); ++i) {
      members[i].kind = OpKind::all_to_all_v;
      members[i].counts_in = op.members[i].counts_in;
      members[i].counts_out = op.members[i].counts_out;
    }
    if (auto bad = a2av_disagreement(members)) {
      auto [i, j] = *bad;
      auto ui = static_cast<std::size_t>(i), uj = static_cast<std::size_t>(j);
      fail(op, key, Errc::comm_mismatch,
           "all_to_all_v counts disagree on group " + std::to_string(key.group) + " seq " + std::to_string(key.seq) +
               ": rank " + std::to_string(g.ranks[ui]) + " sends " + std::to_string(op.members[ui].counts_in[uj]) +
               " bytes to rank " + std::to_string(g.ranks[uj]) + ", which expects " +
               std::to_string(op.members[uj].counts_out[ui]),
           {g.ranks[ui], g.ranks[uj]});
      return;
    }
  }
  if (op.kind == OpKind::all_reduce && op.in_bytes > 0) {
    try {
      op.result = allocate(op.in_bytes);
    } catch (const CommError& e) {
      fail(op, key, e.code(), e.what(), {});
      return;
    }
    auto dtype = static_cast<DType>(op.dtype);
    std::memcpy(base_ + op.result, base_ + op.members[0].handle, op.in_bytes);
    for (std::size_t i = 1; i < op.members.size(); ++i) {
      reduce_into(dtype, static_cast<ReduceOp>(op.reduce_op), base_ + op.result, base_ + op.members[i].handle,
                  op.in_bytes / element_size(dtype));
    }
  }
  op.complete = true;
  wake_waiters(key);
}

void Monitor::fail(Op& op, const OpKey& key, Errc code, const std::string& message, std::vector<int> ranks) {
  op.failed = true;
  op.error = code;
  op.message = message;
  op.error_ranks = std::move(ranks);
  wake_waiters(key);
}

// The ranks blocked waiting on `key`'s operation get their answer and run again.
void Monitor::wake_waiters(const OpKey& key) {
  for (int peer : groups_[static_cast<std::size_t>(key.group)].ranks) {
    Rank& rk = ranks_[peer];
    if (rk.state == State::blocked_wait && works_[rk.waiting - 1].key == key) {
      respond_wait(peer, rk.waiting);
      rk.state = State::ready;
    }
  }
}

// The group ranks that have not launched `op` yet, in group order.
std::vector<int> Monitor::unlaunched(const Op& op, const GroupInfo& g) const {
  std::vector<int> missing;
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    if (!op.members[i].launched) missing.push_back(g.ranks[i]);
  }
  return missing;
}

// Fails `op` with comm_peer_failed if a rank that has not launched it is gone.
void Monitor::fail_if_peers_gone(Op& op, const OpKey& key) {
  std::vector<int> missing = unlaunched(op, groups_[static_cast<std::size_t>(key.group)]);
  std::string who = gone_text(missing);
  if (who.empty()) return;
  fail(op, key, Errc::comm_peer_failed,
       describe(op) + " on group " + std::to_string(key.group) + " seq " + std::to_string(key.seq) + " needs " + who +
           " before joining it",
       gone_ranks(missing));
}

void Monitor::on_wait(int r) {
  Slot& s = slot(r);
  if (s.work == 0 || s.work > works_.size() || works_[s.work - 1].rank != r) {
    respond_error(r, Errc::comm_usage, "rank " + std::to_string(r) + " waited on an unknown work", -1, -1, {r});
    ranks_[r].state = State::ready;
    return;
  }
  const WorkRef& w = works_[s.work - 1];
  const Op& op = ops_.at(w.key);
  if (op.complete || op.failed) {
    respond_wait(r, s.work);
    ranks_[r].state = State::ready;
  } else {
    ranks_[r].waiting = s.work;
    ranks_[r].state = State::blocked_wait;
  }
}

void Monitor::respond_error(int r, Errc code, const std::string& message, int group, std::int64_t seq,
                            const std::vector<int>& ranks) {
  Slot& s = slot(r);
  s.status = static_cast<std::int32_t>(code);
  copy_message(s.message, message);
  s.err_group = group;
  s.err_seq = seq;
  s.err_nranks = static_cast<std::int32_t>(std::min<std::size_t>(ranks.size(), kMaxRanks));
  std::copy(ranks.begin(), ranks.begin() + s.err_nranks, s.err_ranks);
  s.npieces = 0;
}

void Monitor::respond_wait(int r, std::uint64_t work) {
  const WorkRef& w = works_[work - 1];
  Op& op = ops_.at(w.key);
  Slot& s = slot(r);
  ranks_[r].waiting = 0;
  ranks_[r].held.push_back(w.key);  // consumed once r makes its next request
  if (op.failed) {
    respond_error(r, op.error, op.message, w.key.group, w.key.seq, op.error_ranks);
    return;
  }
  s.status = 0;
  s.npieces = 0;
  s.flip_byte = -1;
  const GroupInfo& g = groups_[static_cast<std::size_t>(w.key.group)];
  auto add = [&](std::uint64_t handle, std::uint64_t offset, std::uint64_t bytes, std::uint64_t dst) {
    s.pieces[s.npieces++] = {handle, offset, bytes, dst};
  };
  std::uint64_t received = 0;
  switch (op.kind) {
    case OpKind::all_gather:
      for (std::size_t i = 0; i < op.members.size(); ++i) add(op.members[i].handle, 0, op.in_bytes, i * op.in_bytes);
      received = op.in_bytes * op.members.size();
      break;
    case OpKind::broadcast:
      if (op.root != r) {
        add(op.members[static_cast<std::size_t>(g.index_of(op.root))].handle, 0, op.in_bytes, 0);
        received = op.in_bytes;
      }
      break;
    case OpKind::all_reduce:
      add(op.result, 0, op.in_bytes, 0);
      received = op.in_bytes;
      break;
    case OpKind::all_to_all_v: {
      std::size_t m = static_cast<std::size_t>(w.member);
      std::uint64_t dst = 0;
      for (std::size_t i = 0; i < op.members.size(); ++i) {
        const Member& from = op.members[i];
        std::uint64_t offset = 0;
        for (std::size_t j = 0; j < m; ++j) offset += from.counts_in[j];
        add(from.handle, offset, from.counts_in[m], dst);
        dst += from.counts_in[m];
      }
      received = dst;
      break;
    }
    case OpKind::barrier: break;
  }
  std::uint64_t k = op.members[static_cast<std::size_t>(w.member)].launch_index;
  flip_fired_.resize(options_.faults.size(), false);
  for (std::size_t i = 0; i < options_.faults.size(); ++i) {
    const Fault& f = options_.faults[i];
    if (f.kind != Fault::Kind::flip || f.rank != r || f.at != k || received == 0) continue;
    if (f.byte >= 0 && static_cast<std::uint64_t>(f.byte) >= received) {
      // Past the payload: nothing is flipped, and the trace and the result say so.
      trace_.push_back("r" + std::to_string(r) + " flip byte " + std::to_string(f.byte) + " of g" +
                       std::to_string(w.key.group) + " s" + std::to_string(w.key.seq) +
                       " not applied: past the " + std::to_string(received) + " received bytes");
      continue;
    }
    flip_fired_[i] = true;
    if (f.byte >= 0) {
      s.flip_byte = f.byte;
    } else {
      SplitMix64 pick(options_.seed ^ (0x5eedf11bULL + static_cast<std::uint64_t>(r) * 131 + k));
      s.flip_byte = static_cast<std::int64_t>(pick.next() % received);
    }
    trace_.push_back("r" + std::to_string(r) + " flip byte " + std::to_string(s.flip_byte) + " of g" +
                     std::to_string(w.key.group) + " s" + std::to_string(w.key.seq));
  }
}

void Monitor::release(int r) {
  Rank& rk = ranks_[r];
  for (const OpKey& key : rk.held) consume(key, groups_[static_cast<std::size_t>(key.group)].index_of(r));
  rk.held.clear();
}

void Monitor::consume(const OpKey& key, int member) {
  auto it = ops_.find(key);
  if (it == ops_.end()) return;
  Op& op = it->second;
  Member& me = op.members[static_cast<std::size_t>(member)];
  if (me.consumed) return;
  me.consumed = true;
  if (--op.unconsumed > 0) return;
  for (Member& x : op.members) deallocate(x.handle);
  deallocate(op.result);
  ops_.erase(it);
}

void Monitor::on_new_group(int r) {
  Slot& s = slot(r);
  Rank& rk = ranks_[r];
  rk.group_ranks.assign(s.ranks, s.ranks + s.nranks);
  rk.group_backend = s.backend;
  rk.group_arrived = true;
  rk.state = State::blocked_group;
  ++group_arrivals_;
  if (fail_group_if_peers_gone()) return;
  if (group_arrivals_ < n_) return;
  const Rank& first = ranks_[0];
  for (int p = 1; p < n_; ++p) {
    if (ranks_[p].group_ranks != first.group_ranks || ranks_[p].group_backend != first.group_backend) {
      fail_group_creation("new_group #" + std::to_string(groups_.size()) + " mismatch: rank 0 asked for " +
                              rank_list_text(first.group_ranks) + " on " + first.group_backend + " but rank " +
                              std::to_string(p) + " asked for " + rank_list_text(ranks_[p].group_ranks) + " on " +
                              ranks_[p].group_backend,
                          Errc::comm_mismatch);
      return;
    }
  }
  GroupInfo g;
  g.ranks = first.group_ranks;
  g.backend = first.group_backend;
  g.next_seq.assign(g.ranks.size(), 0);
  int id = static_cast<int>(groups_.size());
  trace_.push_back("new_group " + std::to_string(id) + " ranks=" + rank_list_text(g.ranks) + " backend=" + g.backend);
  groups_.push_back(std::move(g));
  for (int p = 0; p < n_; ++p) {
    Slot& ps = slot(p);
    ps.status = 0;
    ps.handle = static_cast<std::uint64_t>(id);
    ranks_[p].group_arrived = false;
    ranks_[p].state = State::ready;
  }
  group_arrivals_ = 0;
}

// new_group is a world collective (groups_[0] holds the world, ranks 0..n-1): it fails for
// every arrived rank once any rank is gone. True if it failed.
bool Monitor::fail_group_if_peers_gone() {
  std::string who = gone_text(groups_[0].ranks);
  if (who.empty()) return false;
  fail_group_creation("new_group #" + std::to_string(groups_.size()) + " is a world collective but " + who,
                      Errc::comm_peer_failed);
  return true;
}

void Monitor::fail_group_creation(const std::string& message, Errc code) {
  for (int p = 0; p < n_; ++p) {
    if (!ranks_[p].group_arrived) continue;
    respond_error(p, code, message, -1, static_cast<std::int64_t>(groups_.size()), {});
    ranks_[p].group_arrived = false;
    if (ranks_[p].state == State::blocked_group) ranks_[p].state = State::ready;
  }
  group_arrivals_ = 0;
}

void Monitor::on_finish(int r) {
  Slot& s = slot(r);
  s.status = 0;
  try {
    ranks_[r].stage = allocate(s.stage_bytes);
    s.handle = ranks_[r].stage;
  } catch (const CommError& e) {
    s.status = static_cast<std::int32_t>(e.code());
  }
}

void Monitor::on_finish_staged(int r) {
  Slot& s = slot(r);
  Rank& rk = ranks_[r];
  std::string text = s.status == 0 && rk.stage ? std::string(base_ + rk.stage, s.stage_bytes) : std::string();
  deallocate(rk.stage);
  if (s.status != 0) text = "comm_resource\nthe rank's outcome did not fit in the segment";
  bool ok = s.outcome_status == 0 && s.status == 0;
  if (ok) {
    rk.outcome = {RankOutcome::Status::ok, text, "", ""};
  } else {
    auto nl = text.find('\n');
    rk.outcome = {RankOutcome::Status::error, "", text.substr(0, nl),
                  nl == std::string::npos ? std::string() : text.substr(nl + 1)};
  }
  trace_.push_back("r" + std::to_string(r) + (ok ? " exit ok" : " exit error " + rk.outcome.kind));
  waitpid(rk.pid, nullptr, 0);
  gone(r, "");
  rk.state = State::exited;
}

// Of `ranks`, those that are gone, dead ones first: "rank 2, which died" or "ranks [2, 4],
// which died, and rank 0, which exited"; "" if none is gone.
std::string Monitor::gone_text(const std::vector<int>& ranks) const {
  std::vector<int> died, exited;
  for (int r : ranks) {
    if (ranks_[r].state == State::dead) died.push_back(r);
    if (ranks_[r].state == State::exited) exited.push_back(r);
  }
  auto part = [](const std::vector<int>& v, const char* verb) {
    if (v.empty()) return std::string();
    return (v.size() == 1 ? "rank " + std::to_string(v[0]) : "ranks " + rank_list_text(v)) + ", which " + verb;
  };
  std::string a = part(died, "died"), b = part(exited, "exited");
  return a.empty() ? b : b.empty() ? a : a + ", and " + b;
}

std::vector<int> Monitor::gone_ranks(const std::vector<int>& ranks) const {
  std::vector<int> out;
  for (int r : ranks) {
    if (ranks_[r].state == State::dead) out.push_back(r);
  }
  for (int r : ranks) {
    if (ranks_[r].state == State::exited) out.push_back(r);
  }
  return out;
}

// A rank that exited or died: every operation that needs it fails, so nobody waits forever.
void Monitor::gone(int r, const std::string& how) {
  Rank& rk = ranks_[r];
  bool dead = !how.empty();
  if (dead) {
    rk.outcome = {RankOutcome::Status::died, "", "", "rank " + std::to_string(r) + " " + how};
    trace_.push_back("r" + std::to_string(r) + " died");
  }
  rk.state = dead ? State::dead : State::exited;
  deallocate(rk.stage);
  release(r);
  for (auto& [key, op] : ops_) {
    const GroupInfo& g = groups_[static_cast<std::size_t>(key.group)];
    int m = g.index_of(r);
    if (m < 0 || op.failed || op.complete || op.members[static_cast<std::size_t>(m)].launched) continue;
    fail_if_peers_gone(op, key);  // fails: r itself is among the missing
  }
  // Its share of every op it never consumed is released.
  std::vector<OpKey> keys;
  for (auto& [key, op] : ops_) keys.push_back(key);
  for (const OpKey& key : keys) {
    int m = groups_[static_cast<std::size_t>(key.group)].index_of(r);
    if (m >= 0) consume(key, m);
  }
  if (group_arrivals_ > 0) fail_group_if_peers_gone();  // fails: r itself is gone
}

std::string Monitor::describe(const Op& op) const {
  return op.first < 0 ? std::string("an operation") : std::string(op_kind_name(op.kind));
}

std::string Monitor::waits_on(int r) const {
  const Rank& rk = ranks_[r];
  if (rk.state == State::blocked_group) return "rank " + std::to_string(r) + " waits in new_group #" + std::to_string(groups_.size());
  const WorkRef& w = works_[rk.waiting - 1];
  const Op& op = ops_.at(w.key);
  const GroupInfo& g = groups_[static_cast<std::size_t>(w.key.group)];
  return "rank " + std::to_string(r) + " waits on " + describe(op) + " group " + std::to_string(w.key.group) +
         " seq " + std::to_string(w.key.seq) + " (not launched by ranks " + rank_list_text(unlaunched(op, g)) + ")";
}

// Nothing can run but someone waits: a deadlock, reported at once to every waiting rank.
void Monitor::deadlock() {
  std::vector<int> blocked;
  std::string what;
  for (int r = 0; r < n_; ++r) {
    State st = ranks_[r].state;
    if (st != State::blocked_wait && st != State::blocked_group) continue;
    blocked.push_back(r);
    what += (what.empty() ? "" : "; ") + waits_on(r);
  }
  // new_group is a world collective (SPEC 9.1): ranks stuck in it while others wait on an
  // operation instead means some rank skipped or reordered a new_group - a mismatch of the
  // world's collective order, not a deadlock of the program's own making.
  std::vector<int> in_new_group, elsewhere;
  for (int r : blocked) (ranks_[r].state == State::blocked_group ? in_new_group : elsewhere).push_back(r);
  bool skipped_new_group = !in_new_group.empty() && !elsewhere.empty();
  Errc code = skipped_new_group ? Errc::comm_mismatch : Errc::comm_deadlock;
  std::string message;
  if (skipped_new_group) {
    trace_.push_back("mismatch new_group #" + std::to_string(groups_.size()) + " " + rank_list_text(blocked));
    message = "collective mismatch: ranks " + rank_list_text(in_new_group) + " are in new_group #" +
              std::to_string(groups_.size()) + ", a world collective every rank calls in the same order, "
              "but ranks " + rank_list_text(elsewhere) + " went past it (a skipped or reordered new_group); " + what;
  } else {
    trace_.push_back("deadlock " + rank_list_text(blocked));
    message = "deadlock: no rank can run; " + what;
  }
  for (int r : blocked) {
    int group = -1;
    std::int64_t seq = -1;
    if (ranks_[r].state == State::blocked_wait) {
      const WorkRef& w = works_[ranks_[r].waiting - 1];
      group = w.key.group;
      seq = w.key.seq;
      ranks_[r].waiting = 0;
    }
    respond_error(r, code, message, group, seq, blocked);
    ranks_[r].group_arrived = false;
    ranks_[r].state = State::ready;
  }
  group_arrivals_ = 0;
}

}  // namespace hpref::sim::detail
