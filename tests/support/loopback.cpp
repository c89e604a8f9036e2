// The loopback world of loopback.hpp: one mutex and condition variable, a table of
// operations keyed by (group, sequence), and a count of running ranks for deadlock
// detection (a rank blocked in wait() or finished is not running).
#include "loopback.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

namespace hpref::test {
namespace {

enum class Kind { all_gather, broadcast, all_reduce, all_to_all_v, barrier };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_gather:
      return "all_gather";
    case Kind::broadcast:
      return "broadcast";
    case Kind::all_reduce:
      return "all_reduce";
    case Kind::all_to_all_v:
      return "all_to_all_v";
    case Kind::barrier:
      return "barrier";
  }
  return "?";
}

struct Launch {
  Kind kind = Kind::barrier;
  std::vector<std::uint8_t> in;  // copied at launch
  MutableBuffer out;
  std::vector<std::size_t> in_counts, out_counts;
  int root = -1;
  DType dtype = DType::int64;
  ReduceOp op = ReduceOp::sum;
};

Launch make(Kind kind, std::vector<std::uint8_t> in, MutableBuffer out) {
  Launch l;
  l.kind = kind;
  l.in = std::move(in);
  l.out = out;
  return l;
}

struct Op {
  std::vector<int> ranks;
  std::vector<std::optional<Launch>> members;
  std::size_t launched = 0;
  int blocked = 0;  // members blocked in wait()
  bool done = false;
  Errc error_code = Errc::comm_mismatch;
  std::string error;
};

struct World {
  explicit World(int n, std::string backend) : size(n), backend(std::move(backend)), running(n) {}
  int size;
  std::string backend;
  std::mutex mu;
  std::condition_variable cv;
  int running;
  bool deadlock = false;
  std::map<std::pair<int, std::int64_t>, Op> ops;
  std::map<int, std::vector<int>> groups;

  // With the lock held: nobody runs but some wait on an unfinished operation.
  void check_deadlock() {
    if (running > 0) return;
    for (auto& [key, op] : ops) {
      if (!op.done && op.blocked > 0) {
        deadlock = true;
        cv.notify_all();
        return;
      }
    }
  }
};

std::string list(const std::vector<int>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// Moves the data of a fully launched operation, or records why it cannot.
void execute(Op& op) {
  std::size_t n = op.members.size();
  const Launch& first = *op.members[0];
  for (std::size_t i = 1; i < n; ++i) {
    const Launch& m = *op.members[i];
    if (m.kind != first.kind || m.root != first.root || m.dtype != first.dtype ||
        m.op != first.op) {
      op.error = std::string("member 0 launched ") + kind_name(first.kind) + " but member " +
                 std::to_string(i) + " launched " + kind_name(m.kind) +
                 " (or another root, op or dtype)";
      return;
    }
  }
  auto fail = [&](const std::string& why) { op.error = why; };
  switch (first.kind) {
    case Kind::barrier:
      return;
    case Kind::all_gather: {
      std::size_t s = first.in.size();
      for (std::size_t i = 0; i < n; ++i) {
        if (op.members[i]->in.size() != s || op.members[i]->out.bytes != n * s) {
          return fail("all_gather sizes disagree at member " + std::to_string(i));
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          if (s)
            std::memcpy(static_cast<std::uint8_t*>(op.members[j]->out.data) + i * s,
                        op.members[i]->in.data(), s);
        }
      }
      return;
    }
    case Kind::broadcast: {
      auto it = std::find(op.ranks.begin(), op.ranks.end(), first.root);
      if (it == op.ranks.end())
        return fail("broadcast root " + std::to_string(first.root) + " is not a member");
      const auto& src = op.members[static_cast<std::size_t>(it - op.ranks.begin())]->in;
      for (std::size_t j = 0; j < n; ++j) {
        if (op.members[j]->out.bytes != src.size())
          return fail("broadcast sizes disagree at member " + std::to_string(j));
      }
      for (std::size_t j = 0; j < n; ++j) {
        if (!src.empty()) std::memcpy(op.members[j]->out.data, src.data(), src.size());
      }
      return;
    }
    case Kind::all_reduce: {
      std::vector<std::uint8_t> acc = first.in;
      std::size_t count = acc.size() / element_size(first.dtype);
      for (std::size_t i = 1; i < n; ++i) {
        if (op.members[i]->in.size() != acc.size())
          return fail("all_reduce sizes disagree at member " + std::to_string(i));
        reduce_into(first.dtype, first.op, acc.data(), op.members[i]->in.data(), count);
      }
      for (std::size_t j = 0; j < n; ++j) {
        if (!acc.empty()) std::memcpy(op.members[j]->out.data, acc.data(), acc.size());
      }
      return;
    }
    case Kind::all_to_all_v: {
      for (std::size_t i = 0; i < n; ++i) {
        const Launch& m = *op.members[i];
        if (m.in_counts.size() != n || m.out_counts.size() != n) {
          return fail("all_to_all_v member " + std::to_string(i) +
                      " gave counts for another group size");
        }
        for (std::size_t j = 0; j < n; ++j) {
          if (m.in_counts[j] != op.members[j]->out_counts[i]) {
            return fail("all_to_all_v member " + std::to_string(i) + " sends " +
                        std::to_string(m.in_counts[j]) + " bytes to member " + std::to_string(j) +
                        " which receives " + std::to_string(op.members[j]->out_counts[i]));
          }
        }
        if (std::accumulate(m.in_counts.begin(), m.in_counts.end(), std::size_t{0}) > m.in.size() ||
            std::accumulate(m.out_counts.begin(), m.out_counts.end(), std::size_t{0}) >
                m.out.bytes) {
          op.error_code = Errc::comm_usage;
          return fail("all_to_all_v member " + std::to_string(i) + "'s counts exceed its buffers");
        }
      }
      for (std::size_t j = 0; j < n; ++j) {  // receiver j, in member order
        std::size_t at = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const Launch& src = *op.members[i];
          std::size_t from = std::accumulate(src.in_counts.begin(),
                                             src.in_counts.begin() + static_cast<std::ptrdiff_t>(j),
                                             std::size_t{0});
          std::size_t bytes = src.in_counts[j];
          if (bytes)
            std::memcpy(static_cast<std::uint8_t*>(op.members[j]->out.data) + at,
                        src.in.data() + from, bytes);
          at += bytes;
        }
      }
      return;
    }
  }
}

class LoopbackWork : public Work::State {
 public:
  LoopbackWork(World& w, std::pair<int, std::int64_t> key) : w_(w), key_(key) {}
  void wait() override {
    std::unique_lock lock(w_.mu);
    Op& op = w_.ops.at(key_);
    if (!op.done) {
      ++op.blocked;
      --w_.running;
      w_.check_deadlock();
      w_.cv.wait(lock, [&] { return op.done || w_.deadlock; });
      if (!op.done) {  // deadlock: this rank goes on (to throw), so it runs again
        --op.blocked;
        ++w_.running;
        std::vector<int> missing;
        for (std::size_t i = 0; i < op.members.size(); ++i) {
          if (!op.members[i]) missing.push_back(op.ranks[i]);
        }
        throw CommError(Errc::comm_deadlock,
                        "loopback deadlock: group " + std::to_string(key_.first) + " seq " +
                            std::to_string(key_.second) + " waits for ranks " + list(missing) +
                            " that never launched it",
                        key_.first, key_.second, missing);
      }
    }
    if (!op.error.empty()) {
      throw CommError(op.error_code,
                      "group " + std::to_string(key_.first) + " seq " +
                          std::to_string(key_.second) + ": " + op.error,
                      key_.first, key_.second, op.ranks);
    }
  }

 private:
  World& w_;
  std::pair<int, std::int64_t> key_;
};

class LoopbackComm : public Communicator {
 public:
  LoopbackComm(World& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_.size; }
  std::string world_backend() const override { return "loopback"; }
  Group world() const override {
    std::vector<int> all(static_cast<std::size_t>(w_.size));
    std::iota(all.begin(), all.end(), 0);
    return Group(0, std::move(all), w_.backend, rank_);
  }
  Group new_group(std::span<const int> ranks, const std::string& backend) override {
    std::vector<int> sorted(ranks.begin(), ranks.end());
    std::sort(sorted.begin(), sorted.end());
    int id = ++groups_made_;
    {
      std::lock_guard lock(w_.mu);
      auto [it, fresh] = w_.groups.emplace(id, sorted);
      if (!fresh && it->second != sorted) {
        throw CommError(Errc::comm_mismatch, "new_group " + std::to_string(id) + ": rank " +
                                                 std::to_string(rank_) + " asked for " +
                                                 list(sorted) + ", another rank for " +
                                                 list(it->second));
      }
    }
    return Group(id, std::move(sorted), backend, rank_);
  }
  Work all_gather(const Group& g, ConstBuffer in, MutableBuffer out) override {
    Launch l = make(Kind::all_gather, copy(g, in), checked(g, out));
    return launch(g, std::move(l));
  }
  Work broadcast(const Group& g, MutableBuffer buffer, int root) override {
    Launch l = make(Kind::broadcast, copy(g, buffer), buffer);
    l.root = root;
    return launch(g, std::move(l));
  }
  Work all_reduce(const Group& g, MutableBuffer buffer, DType dtype, ReduceOp op) override {
    Launch l = make(Kind::all_reduce, copy(g, buffer), buffer);
    l.dtype = dtype;
    l.op = op;
    return launch(g, std::move(l));
  }
  using Communicator::all_to_all_v;
  Work all_to_all_v(const Group& g, ConstBuffer in, std::span<const std::size_t> in_counts,
                    std::span<const std::size_t> in_displs, MutableBuffer out,
                    std::span<const std::size_t> out_counts) override {
    std::vector<std::uint8_t> bytes = copy(g, in);
    if (!in_displs.empty()) {  // the blocks packed here, in member order
      std::vector<std::uint8_t> packed;
      for (std::size_t i = 0; i < in_counts.size(); ++i) {
        if (in_displs.size() != in_counts.size() ||
            (in_counts[i] &&
             (in_displs[i] > bytes.size() || in_counts[i] > bytes.size() - in_displs[i]))) {
          throw CommError(Errc::comm_usage, "all_to_all_v's block for member " + std::to_string(i) +
                                                " is outside its send buffer");
        }
        if (in_counts[i] == 0) continue;
        auto from = bytes.begin() + static_cast<std::ptrdiff_t>(in_displs[i]);
        packed.insert(packed.end(), from, from + static_cast<std::ptrdiff_t>(in_counts[i]));
      }
      bytes = std::move(packed);
    }
    Launch l = make(Kind::all_to_all_v, std::move(bytes), checked(g, out));
    l.in_counts.assign(in_counts.begin(), in_counts.end());
    l.out_counts.assign(out_counts.begin(), out_counts.end());
    return launch(g, std::move(l));
  }
  Work barrier(const Group& g) override { return launch(g, Launch{}); }

 private:
  void check_space(const Group& g, MemorySpace s) const {
    if (!g.is_member()) {
      throw CommError(Errc::comm_usage, "rank " + std::to_string(rank_) +
                                            " is not a member of group " + std::to_string(g.id()));
    }
    if (s != g.memory()) {
      throw CommError(Errc::comm_memory_space, "group " + std::to_string(g.id()) + " (" +
                                                   g.backend() +
                                                   ") refuses a buffer in the other memory space");
    }
  }
  std::vector<std::uint8_t> copy(const Group& g, ConstBuffer in) const {
    check_space(g, in.space);
    const auto* p = static_cast<const std::uint8_t*>(in.data);
    return std::vector<std::uint8_t>(p, p + in.bytes);
  }
  MutableBuffer checked(const Group& g, MutableBuffer out) const {
    check_space(g, out.space);
    return out;
  }
  Work launch(const Group& g, Launch l) {
    if (!g.is_member()) {
      throw CommError(Errc::comm_usage, "rank " + std::to_string(rank_) +
                                            " is not a member of group " + std::to_string(g.id()));
    }
    std::int64_t seq = seq_[g.id()]++;
    std::pair<int, std::int64_t> key{g.id(), seq};
    std::lock_guard lock(w_.mu);
    Op& op = w_.ops[key];
    if (op.members.empty()) {
      op.ranks = g.ranks();
      op.members.resize(op.ranks.size());
    }
    op.members[static_cast<std::size_t>(g.index())] = std::move(l);
    if (++op.launched == op.members.size()) {
      execute(op);
      op.done = true;
      w_.running += op.blocked;  // the waiters run again (counted now, not when they wake)
      op.blocked = 0;
      w_.cv.notify_all();
    }
    return Work(std::make_shared<LoopbackWork>(w_, key));
  }

  World& w_;
  int rank_;
  int groups_made_ = 0;
  std::map<int, std::int64_t> seq_;
};

}  // namespace

std::vector<std::exception_ptr> run_loopback(int ranks,
                                             const std::function<void(Communicator&)>& fn,
                                             const std::string& backend) {
  World world(ranks, backend);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      LoopbackComm comm(world, r);
      try {
        fn(comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
      std::lock_guard lock(world.mu);
      --world.running;
      world.check_deadlock();
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::string describe(const std::exception_ptr& e) {
  if (!e) return "ok";
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return std::string(err.kind()) + ": " + err.what();
  } catch (const std::exception& err) {
    return std::string("std::exception: ") + err.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace hpref::test
