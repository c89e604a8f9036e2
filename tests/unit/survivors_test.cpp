// Tests written for mutants that survived the mutation run of issue 10 section 4
// (`./dev mutate --sample 400 --seed 2`, docs/verification.md "Mutation testing"): each
// case states the property the surviving mutant broke and checks it exactly.
#include <optional>
#include <string>
#include <vector>

#include "hpref/pickle.hpp"
#include "hpref/routes.hpp"
#include "hpref/topology.hpp"
#include "test_util.hpp"

using namespace hpref;
using V = std::vector<std::int64_t>;
using I = std::vector<Interval>;

BOOST_AUTO_TEST_SUITE(mutation_survivors)

// SPEC 3.1: rank_list holds each rank of the mesh exactly once. A list with a repeated
// rank and one entry too many has as many distinct ranks as the mesh; it is refused all
// the same (topology.mutant.469 compared the distinct count with `>` instead of `!=`).
BOOST_AUTO_TEST_CASE(rank_list_with_a_repeat_and_the_mesh_size_in_distinct_ranks_spec_3_1) {
  TopologyInputs in;
  in.mesh_shape = {2};
  in.mesh_dim_names = {"dp"};
  in.rank_list = {0, 1, 1};
  in.global_rank = 0;
  HPREF_CHECK_ERROR(DataTopology(in), Errc::topology_rank_list,
                    "rank_list of 3 ranks (2 distinct) does not exactly fill a mesh of 2 ranks");
}

// SPEC 7.1 (a): the owner-count refusal says how many entries P intervals need: P + 1
// (routes.mutant.305 printed P - 1).
BOOST_AUTO_TEST_CASE(owner_count_message_names_p_plus_one_spec_7_1) {
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{0, 4}, {4, 8}}, V{0, 4}), Errc::route_owner_count,
                    "owner_offsets has 2 entries but 2 intervals need 3");
  HPREF_CHECK_ERROR(interval_route(4, 0, I{{0, 4}}, V{0, 4, 8, 12}), Errc::route_owner_count,
                    "owner_offsets has 4 entries but 1 intervals need 2");
}

// SPEC 2.3: a refusal names the offending value shortened (repr cut at 60 characters and
// "..."), not in full, however large the pickle's arguments (pickle_reader.mutant.2788
// printed them whole).
BOOST_AUTO_TEST_CASE(newobj_refusal_names_long_arguments_shortened_spec_2_3) {
  std::string pickle =
      "\x80\x02"
      "chyper_parallel.distributed_data.schema\nSampleKey\n(";
  for (int i = 0; i < 30; ++i) pickle += "K\x01";
  pickle += "t\x81.";
  std::string args = "(";
  for (int i = 0; i < 19; ++i) args += "1, ";
  args += "1,...";  // the first 60 characters of (1, 1, ..., 1) with 30 ones
  HPREF_CHECK_ERROR(read_pickle(pickle), Errc::pickle_reduce,
                    "NEWOBJ of hyper_parallel.distributed_data.schema.SampleKey with arguments " +
                        args + " is refused");
}

BOOST_AUTO_TEST_SUITE_END()
