// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DistributedTest and DIST_TEST_F: a GoogleTest test whose body runs once in
// every rank, each rank its own process.
//
//   class Collectives : public disttest::DistributedTest {};
//
//   DIST_TEST_F(Collectives, AllReduceSums, 1, 2, 4) {  // one test per size
//     std::vector<float> v(8, float(rank() + 1));
//     comm().allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
//     EXPECT_EQ(v[0], world_size() * (world_size() + 1) / 2.0f);
//   }
//
// Each world size is its own gtest test, named "AllReduceSums/4ranks", so
// --gtest_filter='Collectives.AllReduceSums/4ranks' runs just that one.
// Without sizes a test runs at the fixture's kDefaultWorldSize (2); a
// fixture may declare its own `static constexpr int kDefaultWorldSize = 4;`.
//
// Where each piece runs:
//   parent (the gtest process): the fixture's constructor (set options()
//     there), SetUp() and TearDown(); spawning, supervision and the verdict.
//   every rank: a fixture of its own (constructor, SetUp()), SetUpRank(),
//     the body, TearDownRank(), then its destructor, in kFork and kExec
//     mode alike. TearDown() never runs in a rank, except in pooled ranks
//     (options().reuse_workers), which run it too, and in a re-executed
//     rank after a fatal failure or skip in SetUp() (gtest runs it). A
//     test with
//     DistributedFixtures (or parameters that print alike) runs a forked
//     rank on a copy of the parent's fixture after SetUp(), never
//     destroyed there.
//   a ::testing::Environment: SetUp() has run for every rank (a re-executed
//     one runs it at its start), TearDown() runs in the parent only: see
//     InRank() below.
// Every gtest assertion and GTEST_SKIP() works in a rank; results are
// re-raised in the parent at their file:line as "[rank r/N] ...".
//
// Sweeps are gtest's grammar with a world size: DIST_TEST_P with gtest's
// INSTANTIATE_TEST_SUITE_P ("Counts/Sweep.AllReduces/4ranks/1"), and
// DIST_TYPED_TEST_SUITE/DIST_TYPED_TEST ("Typed/0.Sums/4ranks"); see
// distributed_param_test.h and distributed_typed_test.h (which come with
// this header).
//
// A DistributedFixture (distributed_fixture.h) runs its own ranks before the
// test's, at its own world size; UseFixture<F>() declares one.
//
// Fork caveat: in kFork mode the gtest process forks, so it must not be
// running threads of its own at that point; use LaunchMode::kExec otherwise.
#ifndef DISTTEST_DISTRIBUTED_TEST_H_
#define DISTTEST_DISTRIBUTED_TEST_H_

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/distributed_fixture.h"
#include "disttest/env/rank_env.h"
#include "disttest/harness/options.h"
#include "disttest/launch/launch.h"
#include "disttest/rendezvous/store.h"

namespace disttest {

namespace internal {
struct TestAccess;
struct FixtureAccess;
// The world size of the test object this thread makes now (its registered
// one, set by the factory around the constructor, so that rank() and
// world_size() answer right in it); 0 outside a factory.
int WorldSizeBeingMade();
class MakingWorldSize {
 public:
  explicit MakingWorldSize(int world_size);
  ~MakingWorldSize();
  MakingWorldSize(const MakingWorldSize&) = delete;
  MakingWorldSize& operator=(const MakingWorldSize&) = delete;

 private:
  int before_;
};
}  // namespace internal

// How a rank is expected to end, for a test of what its survivors see:
//   ExpectRankToEnd(2, disttest::RankEnd::KilledBy(SIGKILL));
//   ExpectRankToEnd(1, disttest::RankEnd::ExitsWith(3));
class RankEnd {
 public:
  static RankEnd KilledBy(int signal) { return RankEnd(true, signal); }
  static RankEnd ExitsWith(int status) { return RankEnd(false, status); }
  bool by_signal() const { return by_signal_; }
  int value() const { return value_; }  // The signal, or the exit status.

 private:
  RankEnd(bool by_signal, int value) : by_signal_(by_signal), value_(value) {}
  bool by_signal_;
  int value_;
};

class DistributedTest : public ::testing::Test {
 public:
  // World size of a DIST_TEST_F written without sizes.
  static constexpr int kDefaultWorldSize = 2;

  // gtest's, answered for this rank in a rank: what its test has reported
  // so far (gtest's own see none of it, as it goes to the test process);
  // elsewhere, gtest's answer. They hide ::testing::Test's:
  //   FillShards();                   // a helper with ASSERT_s
  //   if (HasFatalFailure()) return;
  static bool HasFatalFailure();
  static bool HasNonfatalFailure();
  static bool HasFailure();
  static bool IsSkipped();

 protected:
  DistributedTest() = default;

  // How this test runs; set it in the fixture's constructor.
  Options& options() { return options_; }
  const Options& options() const { return options_; }

  // In a rank: this rank's identity, from its constructor to its
  // destructor. In the parent (and under a launcher in a process past the
  // test's size, in a thread no rank runs, in a DistributedFixture's ranks)
  // rank() and local_rank() are -1 and the sizes are the test's.
  int rank() const;
  int world_size() const;
  int local_rank() const;
  int local_size() const;

  // The rank's communicator. Throws disttest::Error outside a rank or when
  // options().init_distributed is false.
  Communicator& comm();

  // The test's store (keys are private to this test), also when
  // options().init_distributed is false: for tests that build their own
  // communicator or pass small values between ranks. Throws disttest::Error
  // outside a rank.
  //   auto mine = disttest::CreateCommunicator(disttest::Backend::kGloo,
  //                                            store(), rank(), world_size(),
  //                                            {});
  Store& store();

  // launch()'s view of this rank when options().parallel is set: the
  // parallel groups, local rank and size, seeds (launch/launch.h):
  //   ctx().group(disttest::ParallelMode::kTensor).allreduce(...);
  // Throws disttest::Error when options().parallel is not set or outside a
  // rank.
  Context& ctx();

  // Fault tolerance tests (spawned ranks only, not under an external
  // launcher). ExpectRankToEnd, called in any rank before the end it
  // announces, makes that end of rank `rank` no failure: it must then end
  // so before its verdict (a rank that ends another way, or finishes the
  // test, fails naming both), and its peers are not ended after it but go
  // on, to check what they see:
  //   DIST_TEST_F(Faults, SurvivorsSeeTheLostRank, 4) {
  //     ExpectRankToEnd(2, disttest::RankEnd::KilledBy(SIGKILL));
  //     if (rank() == 0) SignalRank(2, SIGKILL);
  //     if (rank() == 2) pause();
  //     EXPECT_THROW(comm().barrier(), disttest::CommError);
  //   }
  // SignalRank sends `signal` to rank `rank`'s process. Both throw
  // disttest::Error naming the problem (a rank out of range, an exit status
  // disttest uses itself, a rank not started, outside a rank, under an
  // external launcher).
  void ExpectRankToEnd(int rank, RankEnd end);
  void SignalRank(int rank, int signal);

  // Run in every rank around the body (SetUp()/TearDown() run in the
  // parent). A fatal failure or skip in SetUpRank() skips the body;
  // TearDownRank() always runs.
  virtual void SetUpRank() {}
  virtual void TearDownRank() {}

  // Declares a DistributedFixture that runs, at its own world size, before
  // every test of this fixture; call it in a member initialiser:
  //   SavedShards& shards_ = UseFixture<SavedShards>();
  // The fixture object lives as long as the test object.
  template <typename F, typename... Args>
  F& UseFixture(Args&&... args) {
    static_assert(std::is_base_of_v<DistributedFixture, F>,
                  "UseFixture<F>: F must derive from disttest::"
                  "DistributedFixture");
    auto fixture = std::make_unique<F>(std::forward<Args>(args)...);
    F& ref = *fixture;
    AddFixture(std::move(fixture), typeid(F));
    return ref;
  }

 private:
  friend struct internal::TestAccess;
  friend struct internal::FixtureAccess;
  void TestBody() final;
  // The DIST_TEST_F body.
  virtual void RunDistributedBody() = 0;
  void AddFixture(std::unique_ptr<DistributedFixture> fixture,
                  const std::type_info& type);

  Options options_;
  // Parent's view; in the constructor, the factory's.
  int registered_world_size_ = internal::WorldSizeBeingMade() > 0
                                   ? internal::WorldSizeBeingMade()
                                   : kDefaultWorldSize;
  const char* file_ = "";
  int line_ = 0;
  // Set when DIST_TEST_F itself is wrong (a world size listed twice): the
  // test fails saying so instead of running.
  std::string registration_error_;
  // In the child of a "threadsafe" death test: a rank alone, no peers.
  bool death_test_child_ = false;
  const RankEnv* rank_env_ = nullptr;  // Set only in a rank.
  Communicator* comm_ = nullptr;       // Set only in a rank.
  Store* store_ = nullptr;             // Set only in a rank.
  Context* ctx_ = nullptr;             // Set only in a rank.
  std::vector<std::unique_ptr<DistributedFixture>> fixtures_;
};

// A DistributedTest with a parameter, for DIST_TEST_P:
//   class Sweep : public disttest::DistributedTestWithParam<std::size_t> {};
//   DIST_TEST_P(Sweep, AllReduces, 2, 4) { ... GetParam() ... }
//   INSTANTIATE_TEST_SUITE_P(Counts, Sweep, ::testing::Values(0, 1, 1 << 20));
template <typename T>
class DistributedTestWithParam : public DistributedTest,
                                 public ::testing::WithParamInterface<T> {};

// Whether this process is a rank that disttest started for a test (forked,
// re-executed or pooled); false in the test process, and in a process that
// a launcher (torchrun, srun, mpirun) started. For a ::testing::Environment:
// its SetUp() has run for every rank, in every mode (a re-executed rank is a
// process of its own and runs it at its start, as gtest does in any test
// process; forked and pooled ranks are copies of the test process, made
// after it), and its TearDown() runs in the test process only, never in a
// rank. One whose SetUp() makes something outside the process (a file, a
// server) makes it once per re-executed rank, and nothing ends it there:
//   void SetUp() override {
//     if (disttest::InRank()) return;  // the test process's is enough
//     ...
//   }
bool InRank();

}  // namespace disttest

#include "disttest/internal/registration.h"

#endif  // DISTTEST_DISTRIBUTED_TEST_H_
