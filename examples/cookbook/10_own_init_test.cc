// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 10: testing code that sets up its own communication.
//
// With options().init_distributed = false the ranks start without a
// communicator: the body is the code under test. The rank environment is
// in place (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), and store()
// is the test's rendezvous store, private to the test. LaunchMode::kExec
// re-executes the binary for each rank: use it when the code under test
// starts threads or processes, which a forked rank must not inherit half-way.
#include <disttest/comm/create.h>
#include <disttest/disttest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace {

// The code under test: a library's "init from the environment".
std::unique_ptr<disttest::Communicator> InitFromEnvironment(
    disttest::Store& store) {
  const disttest::RankEnv env = disttest::RankEnv::FromEnvironment();
  disttest::GlooOptions options;
  // This node's own address: loopback when every rank is here (as spawned
  // ranks are), else the hostname (under a launcher across nodes, binding
  // to MASTER_ADDR would be another node's address).
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const bool here =
      env.master_addr.rfind("127.", 0) == 0 || env.master_addr == "localhost";
  options.hostname = here ? env.master_addr : std::string(host);
  return disttest::CreateCommunicator(disttest::Backend::kGloo, store, env.rank,
                                      env.world_size, options);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "(unset)";
}

class OwnInit : public disttest::DistributedTest {
 protected:
  OwnInit() {
    options().init_distributed = false;
    options().launch = disttest::LaunchMode::kExec;
    // Its code reads RANK and WORLD_SIZE: each rank needs an environment of
    // its own, which threads (DISTTEST_LAUNCH=threads) do not have.
    options().process_only = true;
  }
};

DIST_TEST_F(OwnInit, InitFromTheEnvironmentConnectsEveryRank, 2, 3) {
  EXPECT_EQ(Env("RANK"), std::to_string(rank()));
  EXPECT_EQ(Env("WORLD_SIZE"), std::to_string(world_size()));
  std::unique_ptr<disttest::Communicator> mine = InitFromEnvironment(store());
  ASSERT_EQ(mine->rank(), rank());
  int sum = 1;
  mine->allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, world_size());
}

}  // namespace
