// The unit test module (Boost.Test, dynamically linked).
#define BOOST_TEST_DYN_LINK
#define BOOST_TEST_MODULE hpref_unit
#include <boost/test/unit_test.hpp>
