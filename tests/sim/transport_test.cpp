// Issue 5's scenarios on the simulator over many seeds: the data-plane transport, the
// model-parallel batch broadcast and the sequence dispatch (SPEC 3-8), their refusals,
// and crashes of a reader mid-exchange and of a constructor mid-broadcast.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include "hpref/scenarios/harness.hpp"
#include "hpref/sim/cluster.hpp"
#include "support.hpp"

using namespace hpref;
using namespace hpref::sim;
using namespace hpref::scenarios;
using hpref::sim::testing::describe;
using hpref::sim::testing::run_scenario;

namespace {

// Survivors of a crash of `dead` either finished or got a CommError naming it; nobody got
// wrong data (a scenario check) and the run ended.
void expect_clean_failure(const RunResult& r, int dead) {
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& o = r.outcomes[i];
    if (static_cast<int>(i) == dead) continue;
    if (o.status == RankOutcome::Status::ok) continue;
    BOOST_TEST(o.kind == "comm_peer_failed", describe(r));
    BOOST_TEST(o.message.find("rank " + std::to_string(dead)) != std::string::npos, describe(r));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sim_transports)

BOOST_AUTO_TEST_CASE(transports_and_dispatch_over_many_seeds) {
  for (const char* name : {"data_plane", "batch_broadcast", "dispatch"}) {
    for (int n = 1; n <= 8; ++n) {
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        auto r = run_scenario(name, n, seed * 101 + static_cast<std::uint64_t>(n));
        BOOST_TEST(r.failure() == Failure::none,
                   name << " ranks " << n << " seed " << seed << describe(r));
      }
    }
  }
}

// SPEC 9.1: on an accelerator world (the GPU check's) every group is accelerator-backed
// and refuses host buffers, so the scenarios it runs must place every buffer and tensor in
// the group's memory space; the simulator enforces that before a GPU ever runs them.
BOOST_AUTO_TEST_CASE(gpu_check_scenarios_on_an_accelerator_world) {
  for (int n = 1; n <= 4; ++n) {
    for (const Scenario* s :
         select({.kind = BackendKind::device, .ranks = n, .host_groups = false})) {
      auto r = run_scenario(s->name, n, 5, {}, "nccl");
      BOOST_TEST(r.failure() == Failure::none,
                 s->name << " ranks " << n << " on an nccl world" << describe(r));
    }
  }
}

// hpref demo's step as the registered scenario "demo": on one-rank, odd and even worlds
// every check passes and every rank ends with the same totals and data checksum.
BOOST_AUTO_TEST_CASE(demo_scenario_on_any_world) {
  for (int n : {1, 3, 4, 6}) {
    auto r = run_scenario("demo", n, 2);
    BOOST_TEST(r.failure() == Failure::none, "ranks " << n << describe(r));
    for (const auto& o : r.outcomes) BOOST_TEST(o.value == r.outcomes[0].value, describe(r));
  }
}

BOOST_AUTO_TEST_CASE(exchange_refuses_outside_targets_and_oversized_sizes) {
  for (int n = 2; n <= 6; ++n) {
    auto r = run_scenario("exchange_refusals", n, 1);
    BOOST_TEST(r.failure() == Failure::none, describe(r));  // the scenario checks each refusal
  }
}

// SPEC 5.2 (ours): one rank refuses, every rank returns an error and none waits in the
// byte exchange. The scenario checks each rank's error kind and message and that a small
// exchange still works afterwards; here the outcomes say who got which kind.
BOOST_AUTO_TEST_CASE(one_sender_refusing_is_agreed) {
  for (int n = 2; n <= 6; ++n) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      auto r = run_scenario("exchange_sender_refuses", n, seed);
      BOOST_TEST(r.failure() == Failure::none, describe(r));
      for (int i = 0; i < n && i < static_cast<int>(r.outcomes.size()); ++i) {
        std::string want = i == n - 1 ? "ok transport_size_limit" : "ok exchange_refused";
        BOOST_TEST(r.outcomes[static_cast<std::size_t>(i)].value == want,
                   "rank " << i << describe(r));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(receiver_refusing_an_announced_size_is_agreed) {
  for (int n = 3; n <= 6; ++n) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      auto r = run_scenario("exchange_receiver_refuses", n, seed);
      BOOST_TEST(r.failure() == Failure::none, describe(r));
      int receiver = 1 + static_cast<int>(seed % static_cast<std::uint64_t>(n - 1));
      for (int i = 0; i < n && i < static_cast<int>(r.outcomes.size()); ++i) {
        bool refuses = i == 0 || i == receiver;
        BOOST_TEST(r.outcomes[static_cast<std::size_t>(i)].value ==
                       (refuses ? "ok transport_size_limit" : "ok exchange_refused"),
                   "rank " << i << describe(r));
      }
    }
  }
}

// SPEC 4 (ours): a max_message_bytes mismatch is refused at construction on every rank,
// by the data-plane transport and by the model-parallel one.
BOOST_AUTO_TEST_CASE(max_message_bytes_mismatch_refused_on_every_rank) {
  for (const char* name : {"transport_limit_mismatch", "batch_limit_mismatch"}) {
    for (int n = 2; n <= 5; ++n) {
      auto r = run_scenario(name, n, 3);
      BOOST_TEST(r.failure() == Failure::none, name << describe(r));
      BOOST_TEST(r.outcomes.size() == static_cast<std::size_t>(n), name << describe(r));
    }
  }
}

// SPEC 4.1: unequal pickled sizes (the padding path).
BOOST_AUTO_TEST_CASE(object_all_gather_of_unequal_sizes) {
  for (int n = 1; n <= 6; ++n) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      auto r = run_scenario("object_all_gather_unequal", n, seed);
      BOOST_TEST(r.failure() == Failure::none, describe(r));
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_spec_mismatch_refused_on_every_rank) {
  auto r = run_scenario("batch_spec_mismatch", 4, 1);
  for (const auto& o : r.outcomes) {
    BOOST_TEST(o.kind == "transport_spec_mismatch", describe(r));
    BOOST_TEST(o.message.find("ranks [3]") != std::string::npos, describe(r));
  }
}

BOOST_AUTO_TEST_CASE(exchange_send_buffer_mutated_before_completion_caught) {
  auto r = run_scenario("exchange_mutated_send", 3, 1);
  BOOST_TEST(r.outcomes[0].kind == "comm_buffer_mutated", describe(r));
}

BOOST_AUTO_TEST_CASE(reader_crashing_mid_exchange) {
  // Seed 7 on 4 ranks: find a reader and crash it at each of its calls in turn.
  for (int call = 1; call <= 14; ++call) {
    for (int dead : {0, 1, 2, 3}) {
      auto r = run_scenario(
          "data_plane", 4, 7,
          {Fault::parse("crash:" + std::to_string(dead) + "@" + std::to_string(call))});
      BOOST_TEST_CONTEXT("crash:" << dead << "@" << call) { expect_clean_failure(r, dead); }
    }
  }
}

BOOST_AUTO_TEST_CASE(constructor_crashing_mid_broadcast) {
  for (int call = 1; call <= 20; ++call) {
    for (int dead : {0, 2, 5}) {
      auto r = run_scenario(
          "batch_broadcast", 6, 3,
          {Fault::parse("crash:" + std::to_string(dead) + "@" + std::to_string(call))});
      BOOST_TEST_CONTEXT("crash:" << dead << "@" << call) { expect_clean_failure(r, dead); }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
