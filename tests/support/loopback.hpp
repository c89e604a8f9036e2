// A deterministic in-process world for tests (SPEC 9.1 semantics without processes): each
// rank runs fn on its own thread with its own hpref::Communicator; operations on a group
// match by per-rank sequence number, are checked for agreement (kind, root, op, dtype,
// counts; all-to-all-v send i->j must equal receive j<-i) and move their data when the
// last member launches (send data is copied at launch). A wait that can never complete
// (every live rank is blocked or finished) is a comm_deadlock CommError naming the group,
// the sequence number and the ranks that did not launch: a test never hangs.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "hpref/communicator.hpp"

namespace hpref::test {

// Runs fn on `ranks` loopback ranks (world backend "loopback", host memory; a backend
// name with "nccl" makes accelerator groups). Returns each rank's exception, null if fn
// returned.
std::vector<std::exception_ptr> run_loopback(int ranks,
                                             const std::function<void(Communicator&)>& fn,
                                             const std::string& backend = "loopback");

// The kind and message of an exception_ptr ("ok" when null, "kind: message" for an
// hpref::Error), for test diagnostics.
std::string describe(const std::exception_ptr& e);

}  // namespace hpref::test
