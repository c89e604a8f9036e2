// The scheduler's loop (see scheduler.hpp).
#include "scheduler.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace hpref::sim::detail {
namespace {

std::int64_t clock_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1000 * 1000 * 1000 + t.tv_nsec;
}

std::string how_died(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status)) + " without reporting";
  }
  return "vanished";
}

}  // namespace

Scheduler::Scheduler(Control* control, boost::interprocess::managed_shared_memory& segment,
                     int ranks, const Options& options, std::vector<pid_t> pids)
    : control_(control),
      n_(ranks),
      options_(options),
      rng_(options.seed),
      ranks_(static_cast<std::size_t>(ranks)),
      trace_(options.keep_trace),
      faults_(options.faults, ranks, options.seed),
      groups_(ranks, options.world_backend),
      matcher_(groups_),
      delivery_(segment, options.segment_bytes, matcher_, groups_, control, ranks) {
  HPREF_CHECK_EQ(signature_wire_bytes(kMaxRanks), kSignatureBytes);
  for (int r = 0; r < n_; ++r) ranks_[r].pid = pids[r];
}

// ---------------------------------------------------------------------------------------
// The loop: pick a runnable rank with the seeded generator, serve it until it yields.

RunResult Scheduler::run() {
  for (;;) {
    // Waiting ranks die only from outside; look for that now and then (every kReapNs, on
    // the clock await_wake reads anyway: one waitpid per rank every 16 turns was ~8 of
    // them per 8-rank operation), and always before declaring a deadlock.
    if (now_ns_ - reaped_ns_ >= kReapNs) {
      reap_others(-1);
      reaped_ns_ = now_ns_;
    }
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
  result.trace = trace_.take();
  result.trace_hash = trace_.hash();
  result.trace_lines = trace_.count();
  result.decisions = decisions_;
  std::vector<bool> crashed(ranks_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    crashed[r] = slot(static_cast<int>(r)).crashed != 0;
  result.unfired_faults = faults_.unfired(result.outcomes, crashed);
  return result;
}

// A ready rank drawn with the generator; ranks under a delay fault only if no other is.
// The lists are members, refilled each turn: no allocation per decision.
int Scheduler::choose() {
  ready_.clear();
  undelayed_.clear();
  for (int r = 0; r < n_; ++r) {
    if (ranks_[r].state != State::ready) continue;
    ready_.push_back(r);
    if (!faults_.delayed(r)) undelayed_.push_back(r);
  }
  const std::vector<int>& pool = undelayed_.empty() ? ready_ : undelayed_;
  int pick = pool[rng_.next() % pool.size()];
  ++decisions_;
  if (undelayed_.size() != ready_.size()) {  // only delayed ranks have a delay to spend
    for (int r : ready_) {
      if (r != pick) faults_.passed_over(r);
    }
  }
  return pick;
}

void Scheduler::serve(int r) {
  sem_post(&slot(r).go);
  for (;;) {
    if (!await_wake(r)) return;
    delivery_.release(r);
    switch (slot(r).req) {
      case Req::launch:  // the same rank then stages its data
      case Req::finish:
        on_stage(r);
        break;
      case Req::launch_staged:
        on_staged(r);
        return;
      case Req::wait:
        on_wait(r);
        return;
      case Req::new_group:
        on_new_group(r);
        return;
      case Req::finish_staged:
        on_finish_staged(r);
        return;
      default:
        kill_rank(r, "sent an unknown request and was killed");
        return;
    }
    sem_post(&slot(r).go);
  }
}

// Waits for rank r's request; false if r died (or overran its turn and was killed). One
// clock reading per wait (monotonic: the deadline, the turn's start and run()'s reaping
// clock).
bool Scheduler::await_wake(int r) {
  constexpr std::int64_t kSecond = 1000 * 1000 * 1000;
  constexpr std::int64_t kTickNs = 20 * 1000 * 1000;
  std::int64_t start = clock_ns();
  now_ns_ = start;
  for (;;) {
    std::int64_t due = now_ns_ + kTickNs;
    timespec deadline{static_cast<time_t>(due / kSecond), static_cast<long>(due % kSecond)};
    if (sem_clockwait(&control_->wake, CLOCK_MONOTONIC, &deadline) == 0) return true;
    if (errno != ETIMEDOUT && errno != EINTR) throw Error(Errc::internal, "sem_clockwait failed");
    if (options_.on_turn_tick) options_.on_turn_tick(r);
    now_ns_ = clock_ns();
    if (int status = 0; collected(r, status)) {
      // Gone since the wait timed out. Its last act may have been its report (finish()
      // posts finish_staged, then exits at once: a slow staging, or a coverage dump, spans a
      // tick): the outcome is whole, so it is served as on any other turn (on_finish_staged
      // finds the rank collected). Any other request of a dead rank is dropped.
      if (sem_trywait(&control_->wake) == 0 && slot(r).req == Req::finish_staged) return true;
      gone(r, how_died(status));
      return drop_stale_wake();
    }
    reap_others(r);
    reaped_ns_ = now_ns_;
    if (now_ns_ - start > std::int64_t{options_.turn_timeout_ms} * 1000 * 1000) {
      kill_rank(r, "held the baton for more than " + std::to_string(options_.turn_timeout_ms) +
                       " ms without reaching a scheduling point, and was killed");
      return drop_stale_wake();
    }
  }
}

// Rank r, found dead after a wait for its request timed out, may have posted the request
// in between (and been killed then): only the rank holding the baton posts `wake`, so with
// r collected nobody else can, and a post left there would be taken for the next rank's
// request. False, for await_wake.
bool Scheduler::drop_stale_wake() {
  while (sem_trywait(&control_->wake) == 0) {
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Liveness.

// Ranks other than the running one can only die from outside (they wait for the baton).
void Scheduler::reap_others(int running) {
  for (int r = 0; r < n_; ++r) {
    if (r != running && !is_gone(r)) reap(r);
  }
}

// If rank r has died, records it (gone() marks it dead); true then.
bool Scheduler::reap(int r) {
  int status = 0;
  if (!collected(r, status)) return false;
  gone(r, how_died(status));
  return true;
}

// Whether rank r's process has ended: collected now, its wait status in `status`.
bool Scheduler::collected(int r, int& status) {
  return waitpid(ranks_[r].pid, &status, WNOHANG) == ranks_[r].pid;
}

// Kills rank r, collects it and records it as dead for `how`.
void Scheduler::kill_rank(int r, const std::string& how) {
  kill(ranks_[r].pid, SIGKILL);
  waitpid(ranks_[r].pid, nullptr, 0);
  gone(r, how);
}

// A rank that exited or died: every operation that needs it fails, so nobody waits forever.
void Scheduler::gone(int r, const std::string& how) {
  Rank& rk = ranks_[r];
  bool dead = !how.empty();
  if (!is_gone(r)) ++gone_count_;
  if (dead) {
    rk.outcome = {RankOutcome::Status::died, "", "", "rank " + std::to_string(r) + " " + how, {}};
    trace_.died(r);
  }
  rk.state = dead ? State::dead : State::exited;
  delivery_.drop_stage(r);
  delivery_.release(r);
  for (auto& [key, op] : matcher_.ops()) {
    int m = groups_.member_index(key.group, r);
    if (m >= 0 && op.open() && !op.members[static_cast<std::size_t>(m)].launched) {
      advance(key);  // fails: r itself is among the missing
    }
  }
  delivery_.consume_all(r);  // its share of every op it never consumed
  if (groups_.arrivals() > 0) fail_group_if_peers_gone();  // fails: r itself is gone
}

bool Scheduler::is_gone(int r) const {
  return ranks_[r].state == State::exited || ranks_[r].state == State::dead;
}

// Of `ranks`, those that are gone, dead ones first (into `gone` if given): "rank 2, which
// died" or "ranks [2, 4], which died, and rank 0, which exited"; "" if none is gone.
std::string Scheduler::gone_text(const std::vector<int>& ranks, std::vector<int>* gone) const {
  std::vector<int> died, exited;
  for (int r : ranks) {
    if (ranks_[r].state == State::dead) died.push_back(r);
    if (ranks_[r].state == State::exited) exited.push_back(r);
  }
  if (gone != nullptr) {
    *gone = died;
    gone->insert(gone->end(), exited.begin(), exited.end());
  }
  auto part = [](const std::vector<int>& v, const char* verb) {
    if (v.empty()) return std::string();
    return (v.size() == 1 ? "rank " + std::to_string(v[0]) : "ranks " + rank_list_text(v)) +
           ", which " + verb;
  };
  std::string a = part(died, "died"), b = part(exited, "exited");
  return a.empty() ? b : b.empty() ? a : a + ", and " + b;
}

std::string Scheduler::waits_on(int r) const {
  const Rank& rk = ranks_[r];
  std::string who = "rank " + std::to_string(r);
  if (rk.state == State::blocked_group) {
    return who + " waits in new_group #" + std::to_string(groups_.next_id());
  }
  const WorkRef& w = matcher_.work(rk.waiting);
  const Op& op = matcher_.op(w.key);
  return who + " waits on " + Matcher::describe(op) + " group " + std::to_string(w.key.group) +
         " seq " + std::to_string(w.key.seq) + " (not launched by ranks " +
         rank_list_text(matcher_.unlaunched(op, w.key.group)) + ")";
}

// Nothing can run but someone waits: a deadlock, reported at once to every waiting rank.
void Scheduler::deadlock() {
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
  for (int r : blocked) {
    (ranks_[r].state == State::blocked_group ? in_new_group : elsewhere).push_back(r);
  }
  bool skipped_new_group = !in_new_group.empty() && !elsewhere.empty();
  Errc code = skipped_new_group ? Errc::comm_mismatch : Errc::comm_deadlock;
  std::string message;
  if (skipped_new_group) {
    trace_.skipped_new_group(groups_.next_id(), blocked);
    message = "collective mismatch: ranks " + rank_list_text(in_new_group) + " are in new_group #" +
              std::to_string(groups_.next_id()) +
              ", a world collective every rank calls in the same order, but ranks " +
              rank_list_text(elsewhere) + " went past it (a skipped or reordered new_group); " +
              what;
  } else {
    trace_.deadlock(blocked);
    message = "deadlock: no rank can run; " + what;
  }
  for (int r : blocked) {
    int group = -1;
    std::int64_t seq = -1;
    if (ranks_[r].state == State::blocked_wait) {
      const WorkRef& w = matcher_.work(ranks_[r].waiting);
      group = w.key.group;
      seq = w.key.seq;
      matcher_.waited(std::exchange(ranks_[r].waiting, 0));
    }
    respond_error(slot(r), CommError(code, message, group, seq, blocked));
    ranks_[r].state = State::ready;
  }
  groups_.clear_arrivals();
}

// ---------------------------------------------------------------------------------------
// Requests.

// r's member index in the group its launch names, or -1 after answering r with comm_usage.
int Scheduler::launch_member(int r) {
  Slot& s = slot(r);
  int m = groups_.member_index(s.group, r);
  if (m < 0) {
    respond_error(s, CommError(Errc::comm_usage,
                               "rank " + std::to_string(r) + " launched on group " +
                                   std::to_string(s.group) + ", which it is not a member of",
                               s.group, -1, {r}));
  }
  return m;
}

// Stages r's data; false after answering r with comm_resource.
bool Scheduler::stage(int r) {
  Slot& s = slot(r);
  try {
    s.handle = delivery_.stage(r, s.stage_bytes);
    return true;
  } catch (const CommError& e) {
    respond_error(s, CommError(e.code(), e.what(), s.group, -1, {r}));
    return false;
  }
}

// launch (when the data does not fit in the slot) and finish: a staging area.
void Scheduler::on_stage(int r) {
  slot(r).status = 0;
  if (slot(r).req == Req::finish || launch_member(r) >= 0) stage(r);
}

void Scheduler::on_staged(int r) {
  Slot& s = slot(r);
  ranks_[r].state = State::ready;
  // Checked here too: sends of up to kInlineBytes (empty ones included) travel in the slot
  // and skip on_stage.
  int m = launch_member(r);
  if (m < 0) return;
  if (s.inline_data && s.stage_bytes > 0) {
    if (!stage(r)) return;
    std::memcpy(delivery_.at(s.handle), s.data, s.stage_bytes);
  } else if (s.in_spare && !delivery_.use_spare(r, s.stage_bytes)) {
    kill_rank(r, "launched from a spare staging area it was not given, and was killed");
    return;
  }
  const GroupInfo& g = groups_[s.group];
  s.status = 0;
  s.work_id = matcher_.launch(r, s.group, m, read_signature(s.signature, g.group.size()),
                              delivery_.take_stage(r), ++ranks_[r].launches);
  OpKey key = matcher_.work(s.work_id).key;
  trace_.launch(r, key.group, key.seq, matcher_.op(key).sigs[static_cast<std::size_t>(m)],
                s.checksum);
  // Its next launch of as many bytes will need one round trip, not two (the spare comes
  // from r's pool of areas it wrote before when one fits: no fresh pages).
  if (!s.inline_data && s.stage_bytes <= kSpareBytes) delivery_.refill_spare(r, s.stage_bytes);
  advance(key);
  // Members already gone will never consume their share (this may free the op: last).
  for (std::size_t i = 0; i < g.group.ranks().size(); ++i) {
    if (is_gone(g.group.ranks()[i])) delivery_.consume(key, static_cast<int>(i));
  }
}

void Scheduler::on_wait(int r) {
  Slot& s = slot(r);
  ranks_[r].state = State::ready;
  const WorkRef* w = matcher_.work(s.work, r);
  if (w == nullptr) {
    respond_error(
        s, CommError(Errc::comm_usage, "rank " + std::to_string(r) + " waited on an unknown work",
                     -1, -1, {r}));
  } else if (matcher_.op(w->key).open()) {
    ranks_[r].waiting = s.work;
    ranks_[r].state = State::blocked_wait;
  } else {
    respond_wait(r, s.work);
  }
}

void Scheduler::on_new_group(int r) {
  Slot& s = slot(r);
  groups_.arrive(r, {s.ranks, s.ranks + s.nranks}, s.backend);
  ranks_[r].state = State::blocked_group;
  if (fail_group_if_peers_gone() || groups_.arrivals() < n_) return;
  if (auto message = groups_.disagreement()) {
    fail_group_creation(*message, Errc::comm_mismatch);
    return;
  }
  int id = groups_.create(trace_);
  for (int p = 0; p < n_; ++p) {
    slot(p).status = 0;
    slot(p).handle = static_cast<std::uint64_t>(id);
    ranks_[p].state = State::ready;
  }
}

void Scheduler::on_finish_staged(int r) {
  Slot& s = slot(r);
  Rank& rk = ranks_[r];
  std::string text = delivery_.take_text(r, s.status == 0 ? s.stage_bytes : 0);
  std::optional<Errc> code;
  if (s.status != 0) {
    code = Errc::comm_resource;
    text = "the rank's outcome did not fit in the segment";
  } else if (s.finish == Finish::error) {
    code = static_cast<Errc>(s.finish_code);
  }
  if (s.status == 0 && s.finish == Finish::ok) {
    rk.outcome = {RankOutcome::Status::ok, text, "", "", {}};
  } else {
    std::string kind = code ? std::string(errc_name(*code)) : "exception";
    rk.outcome = {RankOutcome::Status::error, "", kind, text, code};
  }
  trace_.exit(r, rk.outcome.status == RankOutcome::Status::ok, rk.outcome.kind);
  // Collected if it has exited already; otherwise when the run ends (Session), which kills
  // a rank still there: one stopped (SIGSTOP) between its report and its exit must not
  // hold the run, whose outcome it has given.
  waitpid(rk.pid, nullptr, WNOHANG);
  gone(r, "");
}

// ---------------------------------------------------------------------------------------
// Operations and groups.

// After a launch or a death: an open operation fails when a member that has not launched
// it is gone, and completes once all have (agreement, then all_reduce's reduction); the
// ranks waiting on a settled one get their answer and run again.
void Scheduler::advance(const OpKey& key) {
  Op& op = matcher_.op(key);
  if (op.open()) fail_if_peers_gone(op, key);
  if (op.open() &&
      std::all_of(op.members.begin(), op.members.end(),
                  [](const Member& x) { return x.launched; }) &&
      matcher_.agree(op, key)) {
    try {
      delivery_.reduce(op);
      op.complete = true;
    } catch (const CommError& e) {
      matcher_.fail(op, key, e.code(), e.what(), {});
    }
  }
  if (op.open()) return;
  for (int peer : groups_[key.group].group.ranks()) {
    Rank& rk = ranks_[peer];
    if (rk.state == State::blocked_wait && matcher_.work(rk.waiting).key == key) {
      respond_wait(peer, rk.waiting);
      rk.state = State::ready;
    }
  }
}

// Fails `op` with comm_peer_failed if a rank that has not launched it is gone.
void Scheduler::fail_if_peers_gone(Op& op, const OpKey& key) {
  if (gone_count_ == 0) return;  // the common case: nothing to look for, nothing to build
  std::vector<int> gone;
  std::string who = gone_text(matcher_.unlaunched(op, key.group), &gone);
  if (who.empty()) return;
  matcher_.fail(op, key, Errc::comm_peer_failed,
                Matcher::describe(op) + " on group " + std::to_string(key.group) + " seq " +
                    std::to_string(key.seq) + " needs " + who + " before joining it",
                std::move(gone));
}

void Scheduler::respond_wait(int r, std::uint64_t work) {
  WorkRef w = matcher_.work(work);  // a copy: the table may forget it now
  matcher_.waited(work);
  const Op& op = matcher_.op(w.key);
  Slot& s = slot(r);
  ranks_[r].waiting = 0;
  delivery_.hold(r, w);  // consumed once r makes its next request
  if (op.error) {
    respond_error(s, *op.error);
    return;
  }
  s.status = 0;
  std::uint64_t received = delivery_.pieces(s, op, w);
  std::uint64_t k = op.members[static_cast<std::size_t>(w.member)].launch_index;
  s.flip_byte = faults_.flip(r, k, received, w.key.group, w.key.seq, trace_);
}

// new_group is a world collective (group 0 holds the world): it fails for every arrived
// rank once any rank is gone. True if it failed.
bool Scheduler::fail_group_if_peers_gone() {
  if (gone_count_ == 0) return false;
  std::string who = gone_text(groups_[0].group.ranks(), nullptr);
  if (who.empty()) return false;
  fail_group_creation(
      "new_group #" + std::to_string(groups_.next_id()) + " is a world collective but " + who,
      Errc::comm_peer_failed);
  return true;
}

void Scheduler::fail_group_creation(const std::string& message, Errc code) {
  for (int p = 0; p < n_; ++p) {
    if (!groups_.arrived(p)) continue;
    respond_error(slot(p), CommError(code, message, -1, groups_.next_id(), {}));
    if (ranks_[p].state == State::blocked_group) ranks_[p].state = State::ready;
  }
  groups_.clear_arrivals();
}

}  // namespace hpref::sim::detail
