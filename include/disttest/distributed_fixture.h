// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DistributedFixture: a set-up that runs distributed, at its own world size,
// before a test; what it leaves for the test goes through dir(), a temporary
// directory that the fixture's ranks and the test's ranks share and that is
// removed when the test ends.
//
//   class SavedShards : public disttest::DistributedFixture {
//    public:
//     SavedShards() : DistributedFixture(/*world_size=*/2) {}
//     void Run() override {  // in each of its 2 ranks
//       std::ofstream(dir() / fmt::format("shard-{}", rank())) << rank();
//       comm().barrier();
//     }
//   };
//
//   class Checkpoint : public disttest::DistributedTest {
//    protected:
//     SavedShards& shards_ = UseFixture<SavedShards>();
//   };
//
//   DIST_TEST_F(Checkpoint, LoadsEveryShard, 1, 4) {  // SavedShards ran first
//     EXPECT_TRUE(std::filesystem::exists(shards_.dir() / "shard-1"));
//   }
//
// For every test of the fixture (every world size), the parent creates the
// directory, runs Run() in world_size() ranks with the test's options, and
// only when every rank passed spawns the test. A failure or crash of the
// fixture fails the test and is labelled "[SavedShards rank r/2]"; a
// fixture whose ranks all skip skips the test. Several fixtures run in the
// order the test declared them. In the test's ranks a fixture object offers
// only dir(); rank(), world_size() and comm() belong to its own ranks.
#ifndef DISTTEST_DISTRIBUTED_FIXTURE_H_
#define DISTTEST_DISTRIBUTED_FIXTURE_H_

#include <filesystem>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/env/rank_env.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

namespace internal {
struct FixtureAccess;
}

class DistributedFixture {
 public:
  explicit DistributedFixture(int world_size) : world_size_(world_size) {}
  virtual ~DistributedFixture() = default;
  DistributedFixture(const DistributedFixture&) = delete;
  DistributedFixture& operator=(const DistributedFixture&) = delete;

  // Runs in every rank of the fixture. gtest assertions and GTEST_SKIP()
  // work as in a DIST_TEST_F body, and so do these (this rank's results so
  // far; DistributedTest's are the same).
  virtual void Run() = 0;
  static bool HasFatalFailure();
  static bool HasNonfatalFailure();
  static bool HasFailure();
  static bool IsSkipped();

  // The directory shared with the test; empty before the test starts.
  const std::filesystem::path& dir() const { return dir_; }

  // The fixture's own size, and (in its ranks) this rank.
  int world_size() const { return world_size_; }
  int rank() const;
  // The communicator of the fixture's ranks; throws disttest::Error
  // elsewhere.
  Communicator& comm();
  // The store of the fixture's ranks (see DistributedTest::store()).
  Store& store();

  // "SavedShards": how messages and logs name the fixture.
  const std::string& name() const { return name_; }

 private:
  friend struct internal::FixtureAccess;

  int world_size_;
  std::string name_;
  std::filesystem::path dir_;
  const RankEnv* rank_env_ = nullptr;  // Set only in the fixture's ranks.
  Communicator* comm_ = nullptr;
  Store* store_ = nullptr;
};

}  // namespace disttest

#endif  // DISTTEST_DISTRIBUTED_FIXTURE_H_
