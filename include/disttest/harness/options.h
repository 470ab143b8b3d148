// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Options: how a distributed test is run. A fixture sets them in its
// constructor, which runs in the parent before any rank is spawned:
//
//   class Collectives : public disttest::DistributedTest {
//    protected:
//     Collectives() {
//       options().backend = disttest::Backend::kGloo;
//       options().launch = disttest::LaunchMode::kExec;
//       options().timeout = std::chrono::seconds(30);
//     }
//   };
//
// Environment overrides (read when the test starts): DISTTEST_TIMEOUT
// (seconds) replaces `timeout`; DISTTEST_GPUS replaces the GPUs found.
#ifndef DISTTEST_HARNESS_OPTIONS_H_
#define DISTTEST_HARNESS_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/gpu/assignment.h"
#include "disttest/launch/config.h"

namespace disttest {

// How a rank process comes to be.
enum class LaunchMode {
  // Daemonic: fork() of the test process. Fast; the rank inherits the
  // fixture as it was after SetUp(). The parent must not run threads.
  kFork,
  // Non-daemonic: fork() + exec() of the test binary itself, running only
  // this test as this rank (like gtest's "threadsafe" death tests). Slower,
  // safe with threads in the parent, and the rank may start processes.
  kExec,
  // The ranks are threads of one process forked for the test: each with
  // its own fixture object (constructed, set up, run, torn down and
  // destroyed in its thread), results, ledger and communicator; a crash or
  // a hang fails the test, not the run. What a thread does not have of its
  // own: the environment (no RANK or LOCAL_RANK: ask CurrentRank()),
  // globals and statics (one per process, shared by every rank), signals,
  // getpid(), the working directory, CUDA_VISIBLE_DEVICES. Fixtures that
  // need those set process_only (below). DISTTEST_LAUNCH=threads sets it
  // for every test of a run.
  kThreads,
  // The ranks are processes that MPI's mpiexec starts (Open MPI, MPICH;
  // found on PATH or named by MPIEXEC_EXECUTABLE, its flags from
  // DISTTEST_MPIEXEC_FLAGS), each running only this test as a launched
  // rank: for code that uses MPI (disttest::mpi_comm()) under a plain
  // ctest. Rank 0's report, per rank, comes back as the test's. Without an
  // mpiexec the test is skipped, saying so. DISTTEST_LAUNCH=mpiexec sets it
  // for every test of a run.
  kMpiexec,
};

// What a test is when some ranks skip and the others pass.
enum class SkipPolicy {
  kFailOnPartial,  // A failure that names the skipping ranks (default).
  kAllowPartial,   // Passes; the skips are printed.
};

struct Options {
  Backend backend = Backend::kGloo;
  LaunchMode launch = LaunchMode::kFork;
  // Whole-test deadline: spawning, rendezvous, body and exit of every rank;
  // each DistributedFixture run before the test gets it again.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // When false, ranks start without a communicator (comm() throws); for
  // tests of code that builds its own.
  bool init_distributed = true;
  SkipPolicy skip_policy = SkipPolicy::kFailOnPartial;
  // After a rank ends in anything but a pass (a failure, a crash, an early
  // exit), the others get this long to finish before they are killed: they
  // may be blocked in a collective that will never complete. After a skip
  // they get five times as long.
  std::chrono::milliseconds failure_grace = std::chrono::seconds(2);
  // Address the store listens on and the ranks' sockets bind to.
  std::string master_addr = "127.0.0.1";
  // Set: every rank builds launch()'s parallel groups (tensor, pipeline,
  // data, zero1) before the body, which reaches them through ctx(). A world
  // size the layout cannot split is skipped, saying why.
  std::optional<ParallelConfig> parallel;
  // The base seed of ctx() (launch()'s `seed`).
  std::uint64_t seed = 1024;
  // GPUs each rank owns; unset: 1 on NCCL, 0 on Gloo (kAuto: 1 when it
  // chooses NCCL). A rank with GPUs sees only those (see gpu_visibility) and
  // uses device 0; a world size that needs more GPUs than the machine has
  // is skipped, "needs 4 GPUs, found 2" (DISTTEST_REQUIRE_GPUS=1: failed).
  // A rank without GPUs keeps the CUDA_VISIBLE_DEVICES it inherited.
  std::optional<int> gpus_per_rank;
  // kOwnOnly: CUDA_VISIBLE_DEVICES holds only the rank's own GPUs.
  // kAllRotated: every GPU, the rank's own first (for tests that need CUDA
  // IPC between ranks' GPUs); see disttest/gpu/assignment.h.
  GpuVisibility gpu_visibility = GpuVisibility::kOwnOnly;
  // More ranks than GPUs run instead of skipping ("needs 4 GPUs, found 1"):
  // the ranks are placed round-robin on the GPUs there are, and where
  // ranks share a GPU NCCL is told so (before 2.30: each rank its own
  // NCCL_HOSTID, and NCCL connects them over sockets, for correctness, not
  // speed; 2.30 and later: NCCL_MULTI_RANK_GPU_ENABLE=1). A test of shared
  // GPUs says so in a note. DISTTEST_SHARE_GPUS=1 sets it for every test.
  // Rank threads cannot each have a host id: with NCCL before 2.30 such a
  // test runs as processes, with a note.
  bool share_gpus = false;
  // Keep the ranks (their processes and communicator) alive after a test
  // that every rank passed or skipped, and run the next test with the same
  // world size and options on them: a test then costs a dispatch through the
  // store instead of spawning and connecting. Each test gets a new fixture
  // object in every rank (constructor, SetUp(), SetUpRank(), body,
  // TearDownRank(), TearDown(), destructor; SetUp() and TearDown() also run
  // in the parent); what lives beyond it in the rank processes (globals,
  // the environment, the communicator) is shared with the tests before. A
  // test that fails, crashes, times out, skips on some ranks only, leaves
  // the communicator broken or leaves a thread running ends the pool, and
  // the next test starts fresh ranks. kFork only (kExec ranks are started per
  // test); not with DistributedFixtures, options().parallel or without a
  // communicator. DISTTEST_NO_REUSE=1 turns it off everywhere.
  bool reuse_workers = false;

  // Ranks that wait in a collective are compared while they wait (by the
  // parent, or through the store under a launcher), and end at once when
  // they entered it with different calls. false: for a test that makes
  // such calls on purpose and expects their CommError (on a communicator
  // without a host arena it comes at that communicator's timeout).
  // DISTTEST_COMPARE_CALLS=0 turns it off everywhere. The calls of a test
  // that ended are compared whatever this says.
  bool compare_calls = true;

  // The test's ranks must be processes (it uses the environment per rank,
  // signals, ExpectRankToEnd(), statics that each rank writes): launch
  // kThreads, set here or by DISTTEST_LAUNCH=threads, runs it as kFork
  // instead, with a one-line note.
  bool process_only = false;
};

const char* Name(LaunchMode mode);

}  // namespace disttest

#endif  // DISTTEST_HARNESS_OPTIONS_H_
