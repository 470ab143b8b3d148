// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The child binary of the external-launcher self-tests: started once per
// rank by mpirun or tests/launched/local-launcher.sh, it runs DIST_TEST_F
// bodies in-process. launched_test.cc runs it and checks the one report.
// Nothing here is run on its own by ctest.
#include <disttest/comm/create.h>
#include <disttest/disttest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

class Launched : public disttest::DistributedTest {
 protected:
  Launched() { options().timeout = std::chrono::seconds(60); }
};

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Registered only on rank 1 when LAUNCHED_OUT_OF_STEP is set, and first:
// rank 1 then walks a test that rank 0 does not.
class OnlyOnRankOne : public Launched {
  void RunDistributedBody() override { comm().barrier(); }
};
bool IsRankOne() {
  try {
    return disttest::DetectLauncherEnv().rank == 1;
  } catch (const disttest::Error&) {
    return false;
  }
}
const bool kOutOfStep =
    !Env("LAUNCHED_OUT_OF_STEP").empty() && IsRankOne() &&
    disttest::internal::RegisterDistributedTest<Launched, OnlyOnRankOne>(
        "Launched", "AOnlyOnRankOne", __FILE__, __LINE__, {4});

DIST_TEST_F(Launched, Passes, 1, 2, 4) {
  int one = 1;
  comm().allreduce(&one, 1, disttest::ReduceOp::kSum);  // marker-sum
  EXPECT_EQ(one, world_size());
  // stderr: the stdout of ranks other than 0 is discarded.
  std::fprintf(stderr, "marker-body rank %d of %d\n", rank(), world_size());
  RecordProperty("marker-property", rank());
}

// A timeout one test sets on its communicator, which a launched process
// keeps for the next test of its size: that test starts with its own.
DIST_TEST_F(Launched, SetsATimeout, 2) {
  comm().set_timeout(std::chrono::seconds(31));
}
DIST_TEST_F(Launched, StartsWithItsOwnTimeout, 2) {
  EXPECT_NE(comm().timeout(), std::chrono::seconds(31))
      << "marker-launched-timeout";
  comm().barrier();
}

// What the launcher set, read before any test runs.
const std::string kLaunchedRank = Env("RANK");
const std::string kLaunchedWorldSize = Env("WORLD_SIZE");
const std::string kLaunchedLocalWorldSize = Env("LOCAL_WORLD_SIZE");

// The body sees its own test's rank environment, as a spawned rank does,
// and disttest::CurrentRank() is its test's rank.
DIST_TEST_F(Launched, SeesItsOwnRankEnvironment, 2) {
  const disttest::RankInfo& me = disttest::CurrentRank();
  EXPECT_EQ(me.rank, rank());
  EXPECT_EQ(me.world_size, 2);
  EXPECT_EQ(me.local_size, 2);
  EXPECT_EQ(me.comm, &comm());
  EXPECT_EQ(Env("RANK"), std::to_string(rank()));
  EXPECT_EQ(Env("WORLD_SIZE"), "2");
  EXPECT_EQ(Env("LOCAL_SIZE"), "2");
  EXPECT_EQ(Env("LOCAL_WORLD_SIZE"), "2");
}

// After a distributed test the launcher's variables are back, each as it
// was (torchrun's LOCAL_WORLD_SIZE too).
TEST(LaunchedAfterwards, TheLauncherEnvironmentIsBack) {
  EXPECT_EQ(disttest::CurrentRankOrNull(), nullptr);
  EXPECT_EQ(Env("RANK"), kLaunchedRank);
  EXPECT_EQ(Env("WORLD_SIZE"), kLaunchedWorldSize);
  EXPECT_EQ(Env("LOCAL_WORLD_SIZE"), kLaunchedLocalWorldSize);
}

DIST_TEST_F(Launched, FailsOnRank1, 4) {
  comm().barrier();
  EXPECT_NE(rank(), 1) << "marker-external-fail";
}

// A failure grace of 200 ms (600 ms under ASan), for the tests of what
// happens after it.
class LaunchedShortGrace : public Launched {
 protected:
  LaunchedShortGrace() {
    options().failure_grace = std::chrono::milliseconds(200);
  }
};

// Rank 1 fails and leaves the test while the others wait for it in a
// collective (before the timeout of 60 s).
DIST_TEST_F(LaunchedShortGrace, FailsOnRank1WhileTheOthersWait, 4) {
  ASSERT_NE(rank(), 1) << "marker-leaves-first";
  comm().barrier();  // marker-wait-for-rank-1
}

// Rank 1 fails at once; the others compute past the cut's earliest time
// (the failure grace, at least four heartbeats: 2 s), then return.
DIST_TEST_F(LaunchedShortGrace, FailsOnRank1WhileTheOthersCompute, 4) {
  ASSERT_NE(rank(), 1) << "marker-fails-while-others-compute";
  std::this_thread::sleep_for(std::chrono::seconds(3));  // The computation.
}

DIST_TEST_F(LaunchedShortGrace, PassesAfterwards, 4) { comm().barrier(); }

// Rank 2 dies and rank 3 fails and leaves at once (as a rank does whose
// connection to the dead one closed); ranks 0-1 wait in the barrier.
DIST_TEST_F(LaunchedShortGrace, DiesOnRank2AndRank3FailsAtOnce, 4) {
  if (rank() == 2) {
    std::fflush(nullptr);
    kill(getpid(), SIGKILL);
  }
  ASSERT_NE(rank(), 3) << "marker-fails-for-the-dead-one";
  comm().barrier();
}

DIST_TEST_F(Launched, SkipsEverywhere, 4) {
  GTEST_SKIP() << "marker-external-skip";
}

DIST_TEST_F(Launched, NeedsEight, 8) { ADD_FAILURE() << "ran with 8 ranks"; }

// A fixture at 2 ranks, before a test at 4.
class Shards : public disttest::DistributedFixture {
 public:
  Shards() : DistributedFixture(2) {}
  void Run() override {
    std::fprintf(stderr, "marker-shards-ran %d\n", rank());
    std::ofstream(dir() / ("shard-" + std::to_string(rank()))) << rank();
    comm().barrier();
  }
};

class LaunchedWithFixture : public Launched {
 protected:
  Shards& shards_ = UseFixture<Shards>();
};

DIST_TEST_F(LaunchedWithFixture, ReadsTheShards, 4) {
  EXPECT_TRUE(std::filesystem::exists(shards_.dir() / "shard-1"));
  comm().barrier();
}

// At 2 ranks only ranks 0 and 1 use the fixture's directory: across nodes
// (2 a node) it needs no shared TMPDIR.
DIST_TEST_F(LaunchedWithFixture, ReadsTheShardsOnTwo, 2) {
  EXPECT_TRUE(std::filesystem::exists(shards_.dir() / "shard-1"));
}

DIST_TEST_F(Launched, DiesOnRank2, 4) {
  if (rank() == 2) {
    std::fflush(nullptr);
    kill(getpid(), SIGKILL);
  }
  comm().barrier();
}

DIST_TEST_F(Launched, AfterTheDeath, 4) { comm().barrier(); }

// Rank 2 (LAUNCHED_FAILING_RANK) fails (or skips) outside its body, where
// LAUNCHED_FAILS_IN says: "constructor", "SetUp", "SetUp-fatal",
// "SetUp-skip", "TearDown" or "destructor". The run goes on with Next.
class LaunchedFixtureFails : public Launched {
 protected:
  LaunchedFixtureFails() { FailsIn("constructor"); }
  ~LaunchedFixtureFails() override { FailsIn("destructor"); }
  void SetUp() override {
    FailsIn("SetUp");
    if (Here("SetUp-fatal")) {
      FAIL() << "marker-SetUp-fatal on rank " << Failing();
    }
    if (Here("SetUp-skip")) {
      GTEST_SKIP() << "marker-SetUp-skip on rank " << Failing();
    }
  }
  void TearDown() override { FailsIn("TearDown"); }

 private:
  // The launcher's rank: rank() is -1 in a rank past the test's size.
  static int Failing() {
    const std::string r = Env("LAUNCHED_FAILING_RANK");
    return r.empty() ? 2 : std::atoi(r.c_str());
  }
  bool Here(const char* where) {
    return disttest::DetectLauncherEnv().rank == Failing() &&
           Env("LAUNCHED_FAILS_IN") == where;
  }
  void FailsIn(const char* where) {
    if (Here(where)) {
      ADD_FAILURE() << "marker-" << where << " on rank " << Failing();
    }
  }
};
DIST_TEST_F(LaunchedFixtureFails, Body, 4) { comm().barrier(); }
// On ranks 0 and 1 of the 4 launched.
DIST_TEST_F(LaunchedFixtureFails, BodyOfTwo, 2) { comm().barrier(); }
class LaunchedAfterTheFixture : public Launched {};

// NCCL's ranks need a GPU each: on a node without one, a failure that says
// so, not one in cudaSetDevice.
class LaunchedNccl : public Launched {
 protected:
  LaunchedNccl() { options().backend = disttest::Backend::kNccl; }
};
DIST_TEST_F(LaunchedNccl, NeedsAGpuPerRank, 4) {
  ADD_FAILURE() << "marker-nccl-ran-without-a-gpu";
}
DIST_TEST_F(LaunchedAfterTheFixture, Next, 4) { comm().barrier(); }

// Rank 3 calls a barrier that no other rank calls: they pass and leave,
// and its barrier can never complete.
DIST_TEST_F(Launched, OneMoreBarrierOnRank3, 4) {
  if (rank() == 3) comm().barrier();  // marker-one-more-barrier
}

// Rank 3 broadcasts where the others call a barrier, and every rank
// catches what its call throws once the calls are found to differ.
DIST_TEST_F(Launched, CaughtMismatchOfCalls, 4) {
  int x = 1;
  try {
    if (rank() == 3) {
      comm().broadcast(&x, 1, 0);
    } else {
      comm().barrier();
    }
  } catch (const disttest::CommError&) {
  }
}

// Rank 0 sends 8 floats where rank 1 receives 16, and both catch what
// their call throws once the two are found to differ.
DIST_TEST_F(Launched, CaughtMismatchOfMessages, 4) {
  std::vector<float> data(16, 1.0f);
  try {
    if (rank() == 0) {
      comm().send(data.data(), 8, 1, 3);  // marker-mismatched-send
    } else if (rank() == 1) {
      comm().recv(data.data(), 16, 0, 3);  // marker-mismatched-recv
    }
  } catch (const disttest::CommError&) {
  }
}

// Rank 2 posts 4 int32 where rank 3 posts a receive of 4 float32, and
// both wait for them: nothing catches what the waits throw.
DIST_TEST_F(Launched, MismatchOfRequests, 4) {
  std::vector<std::int32_t> sent(4, 7);
  std::vector<float> received(4, 0.0f);
  if (rank() == 2) {
    comm().isend(sent.data(), 4, 3, 5).wait();  // marker-mismatched-isend
  } else if (rank() == 3) {
    comm().irecv(received.data(), 4, 2, 5).wait();  // marker-mismatched-irecv
  }
}

// The controls: rank 0 passes and leaves after its broadcast while the
// others relay it to rank 3, slow (Gloo's tree); and ranks 0 and 1 pass
// and leave while rank 2 waits for rank 3,
// slow, in a collective of their pair: it completes.
DIST_TEST_F(Launched, BroadcastToASlowRank, 4) {
  if (rank() == 3) std::this_thread::sleep_for(std::chrono::seconds(3));
  int x = rank() == 0 ? 7 : 0;
  comm().broadcast(&x, 1, 0);
  EXPECT_EQ(x, 7);
}

DIST_TEST_F(Launched, PairWaitsForASlowPeer, 4) {
  std::unique_ptr<disttest::Communicator> pair = comm().split(rank() / 2);
  if (rank() < 2) return;
  if (rank() == 3) std::this_thread::sleep_for(std::chrono::seconds(3));
  int x = 1;
  pair->allreduce(&x, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(x, 2);
}

// Rank 2 calls exit(3) in its body; the others wait for it in a barrier.
DIST_TEST_F(Launched, ExitsOnRank2, 4) {
  if (rank() == 2) std::exit(3);
  comm().barrier();
}

// Rank 2 dies; once it is gone, rank 0 sends its launcher SIGTERM, as srun
// --kill-on-bad-exit ends a step once a task failed, before rank 2's
// silence reaches the heartbeat bound (which the driver scales up).
DIST_TEST_F(Launched, DiesOnRank2ThenTheLauncherEnds, 4) {
  if (rank() == 2) {
    store().set("dying", std::to_string(getpid()));
    std::fflush(nullptr);
    kill(getpid(), SIGKILL);
  }
  if (rank() == 0) {
    std::vector<char> v = store().get("dying");
    const std::string stat =
        "/proc/" + std::string(v.begin(), v.end()) + "/stat";
    // Gone, or a zombie its launcher has not reaped yet.
    for (;;) {
      std::ifstream in(stat);
      std::string line;
      if (!std::getline(in, line)) break;
      const auto paren = line.rfind(')');
      if (paren != std::string::npos && line.compare(paren, 3, ") Z") == 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(getppid(), SIGTERM);
  }
  comm().barrier();
}

// Under a launcher there is no host arena: ranks that reduce with
// different operators all return. Rank 0 fails the test from the ledgers
// that came with the verdicts.
DIST_TEST_F(Launched, ReduceOpsDifferButReturn, 4) {
  std::vector<float> v(8, rank() + 1.0f);
  const auto op =
      rank() < 2 ? disttest::ReduceOp::kSum : disttest::ReduceOp::kMax;
  comm().allreduce(v.data(), v.size(), op);  // marker-launched-mismatch
}

// The same on a communicator the test makes without a name, on store():
// known across the hosts by the keys its rendezvous uses.
DIST_TEST_F(Launched, ReduceOpsDifferOnAnUnnamedCommunicator, 4) {
  std::unique_ptr<disttest::Communicator> mine = disttest::CreateCommunicator(
      disttest::Backend::kGloo, store(), rank(), world_size(), {});
  std::vector<float> v(2, rank() + 1.0f);
  const auto op =
      rank() == 3 ? disttest::ReduceOp::kMin : disttest::ReduceOp::kSum;
  mine->allreduce(v.data(), v.size(), op);  // marker-launched-unnamed
}

// Ranks that wait in one collective entered with different operations:
// their side threads compare the calls through the store and end the run
// at once, not at the timeout of 60 s.
DIST_TEST_F(Launched, OperationsDifferAndWait, 4) {
  disttest::GlooOptions options;
  options.prefix = "live";
  std::unique_ptr<disttest::Communicator> live = disttest::CreateCommunicator(
      disttest::Backend::kGloo, store(), rank(), world_size(), options);
  std::vector<float> v(8, 1.0f), all(8 * world_size());
  const auto sum = disttest::ReduceOp::kSum;
  float* out = all.data();
  if (rank() != 3) {
    live->allreduce(v.data(), v.size(), sum);  // marker-live-allreduce
  } else {
    live->allgather(v.data(), out, v.size());  // marker-live-allgather
  }
}

// Every rank waits (ranks 0-2 in an allreduce, rank 3 in a receive that
// no rank sends) until the driver sends the launcher SIGTERM.
DIST_TEST_F(Launched, WaitsForSignal, 4) {
  std::printf("marker-waits-for-signal %d\n", rank());
  std::fflush(stdout);
  std::vector<float> v(8, 1.0f);
  const auto sum = disttest::ReduceOp::kSum;
  if (rank() == 3) {
    comm().recv(v.data(), v.size(), 0, /*tag=*/9);  // marker-signal-recv
  } else {
    comm().allreduce(v.data(), v.size(), sum);  // marker-signal-allreduce
  }
}

// Rank 1 in its own code, outside any operation, when the signal comes.
DIST_TEST_F(Launched, SleepsOnRank1UntilSignal, 4) {
  std::printf("marker-sleeps-for-signal %d\n", rank());
  std::fflush(stdout);
  while (rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  comm().barrier();
}

// After WaitsForSignal: skipped once a signal ended that one.
DIST_TEST_F(Launched, AfterTheSignal, 4) { comm().barrier(); }

// gtest's grammar under a launcher: each rank runs the parameter's test
// and the type's test in-process.
class LaunchedSweep : public Launched,
                      public ::testing::WithParamInterface<int> {};
DIST_TEST_P(LaunchedSweep, SumsTheParameter, 2, 4) {
  int sum = GetParam();
  comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, GetParam() * world_size());
  std::fprintf(stderr, "marker-param %d of %d: %d\n", rank(), world_size(),
               GetParam());
}
INSTANTIATE_TEST_SUITE_P(Values, LaunchedSweep, ::testing::Values(3, 7));

template <typename T>
class LaunchedTyped : public Launched {};
using LaunchedTypes = ::testing::Types<std::int64_t, float>;
DIST_TYPED_TEST_SUITE(LaunchedTyped, LaunchedTypes);
DIST_TYPED_TEST(LaunchedTyped, SumsInItsType, 4) {
  TypeParam sum = TypeParam(this->rank());
  this->comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, TypeParam(6));
  std::fprintf(stderr, "marker-typed %d: %zu bytes\n", this->rank(),
               sizeof(TypeParam));
}

class LaunchedShortTimeout : public Launched {
 protected:
  LaunchedShortTimeout() { options().timeout = std::chrono::seconds(3); }
};

DIST_TEST_F(LaunchedShortTimeout, HangsOnRank3, 4) {
  if (rank() == 3) {
    std::this_thread::sleep_for(std::chrono::seconds(120));  // marker-hang
  }
  comm().barrier();
}

// On the simulated cluster (tests/cluster/): where each rank runs, what
// its test's environment says, and the addresses of its TCP connections
// (the store's and Gloo's) once the communicator is up.
std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// "a.b.c.d:port" of a /proc/net/tcp address ("0B0012C6:7530").
std::string Ipv4(const std::string& hex) {
  const unsigned long addr = std::stoul(hex.substr(0, 8), nullptr, 16);
  const unsigned long port = std::stoul(hex.substr(9), nullptr, 16);
  return std::to_string(addr & 0xff) + "." + std::to_string(addr >> 8 & 0xff) +
         "." + std::to_string(addr >> 16 & 0xff) + "." +
         std::to_string(addr >> 24 & 0xff) + ":" + std::to_string(port);
}

// This process's established IPv4 connections, "local~remote" each.
std::string Connections() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd, ec).string();
    if (target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line, joined;
  std::getline(tcp, line);  // The heading.
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues, timer, retr, uid, probes,
        inode;
    fields >> sl >> local >> remote >> state >> queues >> timer >> retr >>
        uid >> probes >> inode;
    if (state != "01" || inodes.count(inode) == 0) continue;  // ESTABLISHED
    joined += (joined.empty() ? "" : " ") + Ipv4(local) + "~" + Ipv4(remote);
  }
  return joined;
}

DIST_TEST_F(Launched, WhereEachRankRuns, 4) {
  int one = 1;
  comm().allreduce(&one, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(one, 4);
  RecordProperty("host", HostName());
  RecordProperty("local_rank", Env("LOCAL_RANK"));
  RecordProperty("local_size", Env("LOCAL_SIZE"));
  RecordProperty("master", Env("MASTER_ADDR") + ":" + Env("MASTER_PORT"));
  RecordProperty("tcp", Connections());
}

// Runs until the driver takes a node's link down: a collective a second.
DIST_TEST_F(Launched, RunsUntilTheLinkGoes, 4) {
  for (int i = 0; i < 120; ++i) {
    int one = 1;
    comm().allreduce(&one, 1, disttest::ReduceOp::kSum);
    if (i == 0) {
      std::fprintf(stderr, "marker-link-test-runs %d\n", rank());
      std::fflush(stderr);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

DIST_TEST_F(Launched, AfterTheLinkWent, 4) { comm().barrier(); }

// Waits (at most 60 s) for the file LAUNCHED_PROBE_DONE names: meanwhile
// the cluster test connects to the job's store from outside the job.
DIST_TEST_F(Launched, WaitsForTheProbe, 4) {
  if (rank() == 0) {
    std::fprintf(stderr, "marker-probe-now\n");
    std::fflush(stderr);
  }
  const std::string done = Env("LAUNCHED_PROBE_DONE");
  for (int i = 0; i < 600 && !std::filesystem::exists(done); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(std::filesystem::exists(done)) << done;
  comm().barrier();
}

}  // namespace
