// The simulator test module (Boost.Test).
#define BOOST_TEST_DYN_LINK
#define BOOST_TEST_MODULE hpref_sim
#include <boost/test/unit_test.hpp>
