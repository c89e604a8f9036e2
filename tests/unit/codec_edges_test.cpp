// Unit tests (Boost.Test) for codec_edges; suites are added by the coverage work of issue 10, section 4.
#include <boost/test/unit_test.hpp>
