// The property test module (RapidCheck through Boost.Test). RC_PARAMS applies, e.g.
// RC_PARAMS="max_success=10000" for a long local run; see tests/README.md.
#define BOOST_TEST_DYN_LINK
#define BOOST_TEST_MODULE hpref_property
#include <boost/test/unit_test.hpp>
