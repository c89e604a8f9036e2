// The collective scenarios: a random program of every collective checked against values
// each rank can regenerate, and one small broken program per detection (SPEC 9.2-9.3).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "hpref/scenarios/scenario.hpp"
#include "hpref/splitmix64.hpp"

namespace hpref::scenarios {
namespace {

enum class Kind { all_gather, broadcast, all_reduce, all_to_all_v, barrier };
const char* kind_name(Kind k) {
  const char* names[] = {"all_gather", "broadcast", "all_reduce", "all_to_all_v", "barrier"};
  return names[static_cast<int>(k)];
}

struct Step {
  Kind kind;
  int group;  // index into the program's groups (0 = world)
  int root = 0;
  DType dtype = DType::int64;
  ReduceOp op = ReduceOp::sum;
  std::size_t bytes = 0;                         // all_gather, broadcast, all_reduce
  std::vector<std::vector<std::size_t>> counts;  // all_to_all_v: [from member][to member]
};

struct Program {
  std::vector<std::vector<int>> groups;  // world first
  std::vector<Step> steps;
  std::vector<int> windows;  // steps launched together before their waits
};

std::size_t pick_bytes(SplitMix64& g) {
  std::uint64_t r = g.next() % 10;
  if (r < 2) return 0;
  if (r < 8) return 1 + g.next() % 64;
  return 1 + g.next() % 4096;
}

// The same program on every rank: drawn from the seed alone.
Program make_program(std::uint64_t seed, int ranks, std::vector<Kind> kinds) {
  SplitMix64 g(seed ^ 0x70a6a11dULL);
  Program p;
  std::vector<int> world(static_cast<std::size_t>(ranks));
  std::iota(world.begin(), world.end(), 0);
  p.groups.push_back(world);
  for (int k = 0; k < 2; ++k) {
    std::vector<int> members;
    for (int r = 0; r < ranks; ++r) {
      if (g.next() % 2) members.push_back(r);
    }
    if (members.empty())
      members.push_back(static_cast<int>(g.next() % static_cast<std::uint64_t>(ranks)));
    p.groups.push_back(members);
  }
  int n = 8 + static_cast<int>(g.next() % 8);
  for (int i = 0; i < n; ++i) {
    Step s;
    s.kind = kinds[g.next() % kinds.size()];
    s.group = static_cast<int>(g.next() % p.groups.size());
    const auto& members = p.groups[static_cast<std::size_t>(s.group)];
    s.root = members[g.next() % members.size()];
    DType types[] = {DType::int32, DType::int64, DType::float32, DType::float64};
    s.dtype = types[g.next() % 4];
    s.op = static_cast<ReduceOp>(g.next() % 3);
    s.bytes = pick_bytes(g);
    if (s.kind == Kind::all_reduce) s.bytes = s.bytes / 8 * 8;  // whole elements of any dtype
    s.counts.assign(members.size(), std::vector<std::size_t>(members.size()));
    for (auto& row : s.counts) {
      for (auto& c : row) c = g.next() % 4 == 0 ? 0 : g.next() % 200;
    }
    p.steps.push_back(std::move(s));
  }
  for (int done = 0; done < n;) {
    int w = std::min(n - done, 1 + static_cast<int>(g.next() % 3));
    p.windows.push_back(w);
    done += w;
  }
  return p;
}

// What member `m` of a step's group sends (regenerable by every rank).
std::vector<std::uint8_t> sent(std::uint64_t seed, const Step& s, int step, int m,
                               std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    out[i] =
        data_byte(seed, static_cast<std::uint64_t>(step) * 64 + static_cast<std::uint64_t>(m), i);
  }
  if (s.kind == Kind::all_reduce && (s.dtype == DType::float32 || s.dtype == DType::float64)) {
    // Small integral floats: exact sums in any order, so the check does not depend on it.
    std::size_t es = element_size(s.dtype);
    for (std::size_t i = 0; i + es <= bytes; i += es) {
      if (es == 4) {
        float f = static_cast<float>(out[i] % 100);
        std::memcpy(&out[i], &f, 4);
      } else {
        double d = static_cast<double>(out[i] % 100);
        std::memcpy(&out[i], &d, 8);
      }
    }
  }
  return out;
}

std::size_t row_sum(const std::vector<std::size_t>& row) {
  return std::accumulate(row.begin(), row.end(), std::size_t{0});
}

struct Pending {
  int step;
  Work work;
  std::vector<std::uint8_t> in, out;  // must live until wait
};

std::string expect_equal(const std::vector<std::uint8_t>& got,
                         const std::vector<std::uint8_t>& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "byte " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
    }
  }
  return "";
}

// What the rank with member index m must hold after the step.
std::vector<std::uint8_t> expected(std::uint64_t seed, const Step& s, int step, int m,
                                   int members) {
  std::vector<std::uint8_t> out;
  switch (s.kind) {
    case Kind::all_gather:
      for (int i = 0; i < members; ++i) {
        auto part = sent(seed, s, step, i, s.bytes);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    case Kind::broadcast:
      return sent(seed, s, step, s.root, s.bytes);  // root is a member index here
    case Kind::all_reduce: {
      out = sent(seed, s, step, 0, s.bytes);
      for (int i = 1; i < members; ++i) {
        auto part = sent(seed, s, step, i, s.bytes);
        reduce_into(s.dtype, s.op, out.data(), part.data(), s.bytes / element_size(s.dtype));
      }
      return out;
    }
    case Kind::all_to_all_v:
      for (int i = 0; i < members; ++i) {
        auto all = sent(seed, s, step, i, row_sum(s.counts[static_cast<std::size_t>(i)]));
        std::size_t off = 0;
        for (int j = 0; j < m; ++j)
          off += s.counts[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
        std::size_t n = s.counts[static_cast<std::size_t>(i)][static_cast<std::size_t>(m)];
        out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(off),
                   all.begin() + static_cast<std::ptrdiff_t>(off + n));
      }
      return out;
    case Kind::barrier:
      return out;
  }
  return out;
}

std::string run_program(Communicator& comm, const ScenarioContext& ctx, std::vector<Kind> kinds,
                        bool planted_bug = false) {
  Program p = make_program(ctx.seed, comm.size(), std::move(kinds));
  std::vector<Group> groups = {comm.world()};
  for (std::size_t k = 1; k < p.groups.size(); ++k)
    groups.push_back(comm.new_group(p.groups[k], comm.world_backend()));
  SplitMix64 mine(ctx.seed * 31 + static_cast<std::uint64_t>(comm.rank()) +
                  1);  // per-rank wait order
  std::uint64_t digest = 0xcbf29ce484222325ULL;
  int step = 0;
  for (int window : p.windows) {
    std::vector<Pending> pending;
    for (int w = 0; w < window; ++w, ++step) {
      Step s = p.steps[static_cast<std::size_t>(step)];
      const Group& g = groups[static_cast<std::size_t>(s.group)];
      if (!g.is_member()) continue;
      int m = g.index();
      MemorySpace sp = g.memory();
      Pending pd{step, {}, {}, {}};
      switch (s.kind) {
        case Kind::all_gather:
          pd.in = sent(ctx.seed, s, step, m, s.bytes);
          pd.out.resize(s.bytes * static_cast<std::size_t>(g.size()));
          pd.work = comm.all_gather(g, {pd.in.data(), pd.in.size(), sp},
                                    {pd.out.data(), pd.out.size(), sp});
          break;
        case Kind::broadcast: {
          int root_member = g.index_of(s.root);
          pd.out = m == root_member ? sent(ctx.seed, s, step, m, s.bytes)
                                    : std::vector<std::uint8_t>(s.bytes);
          pd.work = comm.broadcast(g, {pd.out.data(), pd.out.size(), sp}, s.root);
          break;
        }
        case Kind::all_reduce:
          pd.out = sent(ctx.seed, s, step, m, s.bytes);
          pd.work = comm.all_reduce(g, {pd.out.data(), pd.out.size(), sp}, s.dtype, s.op);
          break;
        case Kind::all_to_all_v: {
          auto row = s.counts[static_cast<std::size_t>(m)];
          std::vector<std::size_t> in_counts = row, out_counts;
          for (std::size_t i = 0; i < s.counts.size(); ++i)
            out_counts.push_back(s.counts[i][static_cast<std::size_t>(m)]);
          if (planted_bug) {  // the bug explore must find: a rare edge case sends one byte too many
            std::size_t mirror = s.counts.size() - 1 - static_cast<std::size_t>(m);
            bool edge =
                in_counts[mirror] == 0 && s.counts[mirror][static_cast<std::size_t>(m)] == 0 &&
                row_sum(in_counts) % 7 == 3 && step >= 8 && mirror != static_cast<std::size_t>(m);
            if (edge) in_counts[mirror] = 1;
          }
          pd.in = sent(ctx.seed, s, step, m, row_sum(in_counts));
          pd.out.resize(row_sum(out_counts));
          if (step % 3 != 1) {
            pd.work = comm.all_to_all_v(g, {pd.in.data(), pd.in.size(), sp}, in_counts,
                                        {pd.out.data(), pd.out.size(), sp}, out_counts);
            break;
          }
          // Every third step the blocks go out from displacements: in reverse member order,
          // three bytes of 0xee before each (not sent: a gap the wait does not check).
          std::vector<std::size_t> displs(in_counts.size());
          std::vector<std::uint8_t> scattered;
          for (std::size_t j = in_counts.size(), at = row_sum(in_counts); j-- > 0;) {
            at -= in_counts[j];
            scattered.insert(scattered.end(), 3, 0xee);
            displs[j] = scattered.size();
            auto from = pd.in.begin() + static_cast<std::ptrdiff_t>(at);
            scattered.insert(scattered.end(), from,
                             from + static_cast<std::ptrdiff_t>(in_counts[j]));
          }
          pd.in = std::move(scattered);
          pd.work = comm.all_to_all_v(g, {pd.in.data(), pd.in.size(), sp}, in_counts, displs,
                                      {pd.out.data(), pd.out.size(), sp}, out_counts);
          break;
        }
        case Kind::barrier:
          pd.work = comm.barrier(g);
          break;
      }
      pending.push_back(std::move(pd));
    }
    // Wait in this rank's own random order.
    for (std::size_t i = pending.size(); i > 1; --i)
      std::swap(pending[i - 1], pending[mine.next() % i]);
    for (Pending& pd : pending) {
      pd.work.wait();
      Step s = p.steps[static_cast<std::size_t>(pd.step)];
      const Group& g = groups[static_cast<std::size_t>(s.group)];
      if (s.kind == Kind::broadcast) s.root = g.index_of(s.root);
      auto want = expected(ctx.seed, s, pd.step, g.index(), g.size());
      std::string diff = expect_equal(pd.out, want);
      check(diff.empty(), std::string(kind_name(s.kind)) + " step " + std::to_string(pd.step) +
                              " on rank " + std::to_string(comm.rank()) + ": " + diff);
      digest = fnv1a64(pd.out.data(), pd.out.size(), digest);
    }
  }
  char text[64];
  std::snprintf(text, sizeof text, "ok steps=%d digest=%016llx", step,
                static_cast<unsigned long long>(digest));
  return text;
}

// ---- the broken programs, one per detection ----------------------------------------------

std::string mismatch_kind(Communicator& c, const ScenarioContext&) {
  std::int64_t v = 1;
  if (c.rank() == 0) {
    c.barrier(c.world()).wait();
  } else {
    c.all_reduce(c.world(), {&v, 8, c.world().memory()}, DType::int64, ReduceOp::sum).wait();
  }
  return "unreachable";
}

std::string mismatch_root(Communicator& c, const ScenarioContext&) {
  std::int64_t v = 1;
  c.broadcast(c.world(), {&v, 8, c.world().memory()}, c.rank() == 0 ? 0 : 1).wait();
  return "unreachable";
}

std::string mismatch_count(Communicator& c, const ScenarioContext&) {
  std::vector<std::uint8_t> in(c.rank() == 0 ? 8 : 16),
      out(in.size() * static_cast<std::size_t>(c.size()));
  c.all_gather(c.world(), {in.data(), in.size(), c.world().memory()},
               {out.data(), out.size(), c.world().memory()})
      .wait();
  return "unreachable";
}

std::string mismatch_reduce(Communicator& c, const ScenarioContext&) {
  std::int64_t v = 1;
  c.all_reduce(c.world(), {&v, 8, c.world().memory()}, DType::int64,
               c.rank() == 0 ? ReduceOp::max : ReduceOp::sum)
      .wait();
  return "unreachable";
}

std::string a2av_asymmetric(Communicator& c, const ScenarioContext&) {
  auto n = static_cast<std::size_t>(c.size());
  std::vector<std::size_t> in_counts(n, 4), out_counts(n, 4);
  if (c.rank() == 1) out_counts[0] = 3;  // rank 0 sends 4 bytes to rank 1, which expects 3
  std::vector<std::uint8_t> in(4 * n), out(4 * n);
  c.all_to_all_v(c.world(), {in.data(), in.size(), c.world().memory()}, in_counts,
                 {out.data(), out.size(), c.world().memory()}, out_counts)
      .wait();
  return "unreachable";
}

// Rank 1 expects 4 of the 6 bytes rank 0 sends it: a mismatch the simulator and checked mode
// refuse. Unchecked over MPI with max_count 4, the 2 bytes beyond it go as a point-to-point
// tail nobody receives; the next all_to_all_v between the two must still get its own bytes
// (it got the stale tail: one tag served every operation's tails).
std::string a2av_short_receive(Communicator& c, const ScenarioContext&) {
  auto n = static_cast<std::size_t>(c.size());
  auto exchange = [&](std::size_t expected, std::uint8_t first) {
    std::vector<std::size_t> in_counts(n, 0), out_counts(n, 0);
    if (c.rank() == 0) in_counts[1] = 6;
    if (c.rank() == 1) out_counts[0] = expected;
    std::vector<std::uint8_t> in(6), out(6, 0);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(first + i);
    MemorySpace sp = c.world().memory();
    c.all_to_all_v(c.world(), {in.data(), in.size(), sp}, in_counts, {out.data(), out.size(), sp},
                   out_counts)
        .wait();
    return out;
  };
  exchange(4, 0xe0);
  auto out = exchange(6, 0x40);
  if (c.rank() == 1) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      check(out[i] == 0x40 + i, "the exchange after the short receive got byte " +
                                    std::to_string(out[i]) + " at " + std::to_string(i) +
                                    ", not its own " + std::to_string(0x40 + i));
    }
  }
  return "the next exchange got its own bytes";
}

std::string new_group_mismatch(Communicator& c, const ScenarioContext&) {
  std::vector<int> ranks = {0};
  if (c.rank() != 0) ranks.push_back(1);
  c.new_group(ranks, c.world_backend());
  return "unreachable";
}

// Rank 1 skips a new_group the others make, then every rank enters a barrier on the world:
// in checked mode the new_group is the world's next operation, so the barrier meets it.
std::string new_group_skipped(Communicator& c, const ScenarioContext&) {
  if (c.rank() != 1) c.new_group(c.world().ranks(), c.world_backend());
  c.barrier(c.world()).wait();
  return "unreachable";
}

// all_to_all_v whose output is its send buffer: every rank gets each peer's block. The
// simulator reads the send buffer at launch; MPI forbids the aliasing, so its backend
// receives beside the buffer and copies in after wait()'s send-buffer check (checked mode
// took the received bytes for a mutation).
std::string all_to_all_v_in_place(Communicator& c, const ScenarioContext& ctx) {
  auto n = static_cast<std::size_t>(c.size());
  std::size_t block = 1 + ctx.seed % 24;
  auto byte = [&](std::size_t from, std::size_t at) {
    return static_cast<std::uint8_t>((from * 37 + at * 11 + ctx.seed) & 0xff);
  };
  std::vector<std::uint8_t> buf(block * n);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = byte(static_cast<std::size_t>(c.rank()), i);
  std::vector<std::size_t> counts(n, block);
  MemorySpace sp = c.world().memory();
  c.all_to_all_v(c.world(), {buf.data(), buf.size(), sp}, counts, {buf.data(), buf.size(), sp},
                 counts)
      .wait();
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t k = 0; k < block; ++k) {
      check(buf[j * block + k] == byte(j, static_cast<std::size_t>(c.rank()) * block + k),
            "rank " + std::to_string(c.rank()) + ": byte " + std::to_string(k) + " from rank " +
                std::to_string(j) + " is wrong");
    }
  }
  return "ok blocks of " + std::to_string(block) + " bytes";
}

std::string deadlock_cycle(Communicator& c, const ScenarioContext&) {
  std::vector<int> all(static_cast<std::size_t>(c.size()));
  std::iota(all.begin(), all.end(), 0);
  Group a = c.new_group(all, c.world_backend());
  Group b = c.new_group(all, c.world_backend());
  if (c.rank() == 0) {
    c.barrier(a).wait();
    c.barrier(b).wait();
  } else {
    c.barrier(b).wait();
    c.barrier(a).wait();
  }
  return "unreachable";
}

std::string rank_exits_early(Communicator& c, const ScenarioContext&) {
  if (c.rank() == 0) return "left early";
  c.barrier(c.world()).wait();
  return "unreachable";
}

std::string mutated_send_buffer(Communicator& c, const ScenarioContext&) {
  std::vector<std::int64_t> v(4, c.rank());
  Work w = c.all_reduce(c.world(), {v.data(), 32, c.world().memory()}, DType::int64, ReduceOp::sum);
  if (c.rank() == 0) v[2] = 99;  // a bug: the buffer is still the collective's
  w.wait();
  return "unreachable";
}

std::string host_buffer_on_accelerator(Communicator& c, const ScenarioContext&) {
  std::vector<int> all(static_cast<std::size_t>(c.size()));
  std::iota(all.begin(), all.end(), 0);
  Group g = c.new_group(all, "nccl");
  std::int64_t v = 1;
  c.all_reduce(g, {&v, 8, MemorySpace::host}, DType::int64, ReduceOp::sum).wait();
  return "unreachable";
}

// SPEC 9.1: members are reduced in group order, so float sums are bitwise reproducible on
// every backend. Values of very different magnitudes make any other order visible.
std::string all_reduce_order(Communicator& c, const ScenarioContext& ctx) {
  const std::size_t count = 64;
  auto values = [&](int member, auto zero) {
    using T = decltype(zero);
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i) {
      int exponent = static_cast<int>((static_cast<std::size_t>(member) * 7 + i) % 17) - 8;
      double x = (1.0 + data_byte(ctx.seed, 900 + static_cast<std::uint64_t>(member), i) / 256.0);
      for (int e = 0; e < (exponent < 0 ? -exponent : exponent); ++e)
        x = exponent < 0 ? x / 1000 : x * 1000;
      v[i] = static_cast<T>((i + static_cast<std::size_t>(member)) % 2 ? -x : x);
    }
    return v;
  };
  std::uint64_t digest = 0xcbf29ce484222325ULL;
  auto run = [&](auto zero, DType dtype) {
    using T = decltype(zero);
    auto mine = values(c.rank(), zero);
    c.all_reduce(c.world(), {mine.data(), count * sizeof(T), c.world().memory()}, dtype,
                 ReduceOp::sum)
        .wait();
    auto want = values(0, zero);
    for (int m = 1; m < c.size(); ++m) {
      auto theirs = values(m, zero);
      reduce_into(dtype, ReduceOp::sum, want.data(), theirs.data(), count);
    }
    check(std::memcmp(mine.data(), want.data(), count * sizeof(T)) == 0,
          std::string(dtype_name(dtype)) + " all_reduce on rank " + std::to_string(c.rank()) +
              " is not the group-order sum bit for bit");
    digest = fnv1a64(mine.data(), count * sizeof(T), digest);
  };
  run(float{}, DType::float32);
  run(double{}, DType::float64);
  char text[48];
  std::snprintf(text, sizeof text, "ok digest=%016llx", static_cast<unsigned long long>(digest));
  return text;
}

// Pairs of ranks exchange on their own groups: the interleaving is free, so the schedule
// (and the trace) depends on the seed while every result does not.
std::string free_interleaving(Communicator& c, const ScenarioContext&) {
  std::vector<Group> pairs;
  for (int r = 0; r < c.size(); r += 2) {
    std::vector<int> members = {r};
    if (r + 1 < c.size()) members.push_back(r + 1);
    pairs.push_back(c.new_group(members, c.world_backend()));
  }
  const Group& mine = pairs[static_cast<std::size_t>(c.rank() / 2)];
  std::int64_t total = 0;
  for (int round = 0; round < 6; ++round) {
    std::int64_t v = round + c.rank();
    c.all_reduce(mine, {&v, 8, c.world().memory()}, DType::int64, ReduceOp::sum).wait();
    total += v;
  }
  return "ok total=" + std::to_string(total);
}

std::vector<Scenario> collective_scenarios() {
  auto program = [](std::vector<Kind> kinds) {
    return
        [kinds](Communicator& c, const ScenarioContext& ctx) { return run_program(c, ctx, kinds); };
  };
  std::vector<Kind> all = {Kind::all_gather, Kind::broadcast, Kind::all_reduce, Kind::all_to_all_v,
                           Kind::barrier};
  std::vector<Scenario> out;
  out.push_back({.name = "collectives",
                 .description = "every collective on the world and two random subgroups, random "
                                "sizes, several outstanding, waited in per-rank random orders, "
                                "checked",
                 .fn = program(all)});
  for (Kind k : all) {
    out.push_back({.name = kind_name(k),
                   .description = std::string("random ") + kind_name(k) + " operations, checked",
                   .fn = program({k})});
  }
  out.push_back({.name = "all_reduce_order",
                 .description = "float all_reduce sums of values of very different magnitudes "
                                "equal the group-order sum bit for bit (SPEC 9.1)",
                 .fn = all_reduce_order});
  out.push_back({.name = "free_interleaving",
                 .description = "pairs of ranks reduce on their own groups (the schedule depends "
                                "on the seed, the results do not)",
                 .fn = free_interleaving});
  out.push_back({.name = "all_to_all_v_in_place",
                 .description = "all_to_all_v whose output is its send buffer: each peer's block "
                                "arrives whole",
                 .fn = all_to_all_v_in_place});
  // Found by exploring the simulator's schedules.
  out.push_back({.name = "planted_bug",
                 .description = "BROKEN on purpose: an all_to_all_v edge case sends a byte too "
                                "many for some seeds; `hpref sim explore` must find one",
                 .fn =
                     [](Communicator& c, const ScenarioContext& ctx) {
                       return run_program(c, ctx, {Kind::all_to_all_v}, true);
                     },
                 .min_ranks = 2,
                 .on_simulator = Expect::mismatch,
                 .simulator_only = true});
  // on_device: what MPI in checked mode with a short deadline reports instead (none: the
  // detection is the simulator's own, and the scenario runs there only).
  auto broken = [&out](const char* name, const char* what, ScenarioFn fn, int min_ranks,
                       Expect on_simulator, Expect on_device) {
    out.push_back({.name = name,
                   .description = std::string("BROKEN on purpose: ") + what,
                   .fn = std::move(fn),
                   .min_ranks = min_ranks,
                   .on_simulator = on_simulator,
                   .on_device = on_device,
                   .simulator_only = on_device == Expect::none});
  };
  using enum Expect;
  broken("mismatch_kind", "rank 0 calls barrier where the others call all_reduce", mismatch_kind, 2,
         mismatch, mismatch);
  broken("mismatch_root", "broadcast roots disagree", mismatch_root, 2, mismatch, mismatch);
  broken("mismatch_count", "all_gather byte counts disagree", mismatch_count, 2, mismatch,
         mismatch);
  broken("mismatch_reduce", "all_reduce ops disagree", mismatch_reduce, 2, mismatch, mismatch);
  broken("a2av_asymmetric", "all_to_all_v counts i->j and j<-i disagree", a2av_asymmetric, 2,
         mismatch, mismatch);
  broken("a2av_short_receive", "rank 1 expects 4 of the 6 bytes rank 0 sends it, then an exchange",
         a2av_short_receive, 2, mismatch, mismatch);
  broken("new_group_mismatch", "ranks create different groups in the same new_group",
         new_group_mismatch, 2, mismatch, mismatch);
  broken("new_group_skipped", "rank 1 skips a new_group the others make, then all enter a barrier",
         new_group_skipped, 2, mismatch, mismatch);
  broken("deadlock_cycle", "barriers on two groups in opposite orders", deadlock_cycle, 2, deadlock,
         timeout);
  broken("rank_exits_early", "rank 0 returns while the others enter a barrier", rank_exits_early, 2,
         peer_failure, timeout);
  broken("mutated_send_buffer", "rank 0 writes its all_reduce buffer before waiting",
         mutated_send_buffer, 1, check_failed, none);
  broken("host_buffer_on_accelerator", "a host buffer on an nccl group", host_buffer_on_accelerator,
         1, check_failed, check_failed);
  return out;
}

const Registration registered(1, collective_scenarios());

}  // namespace

}  // namespace hpref::scenarios
