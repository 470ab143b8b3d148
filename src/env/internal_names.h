// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The variables the harness sets in a rank's environment for itself: its
// protocol with the ranks, not knobs (those are disttest/env/names.h). A
// process a test starts never sees them: a rank removes them.
//
//   const char* queue = std::getenv(env::kInternalResultQueue);
#ifndef DISTTEST_SRC_ENV_INTERNAL_NAMES_H_
#define DISTTEST_SRC_ENV_INTERNAL_NAMES_H_

namespace disttest::env {

// Full gtest name ("Suite.Name/2ranks") of the test this process runs as a
// rank. Its presence makes DistributedTest run the body instead of spawning.
inline constexpr char kInternalChildTest[] = "DISTTEST_INTERNAL_CHILD_TEST";
// The test's parameter as the test process's gtest prints it
// (TestInfo::value_param(); "fnv1a:<hex>" past 4 KiB): a re-executed rank's
// gtest made its parameters again, and runs only where they agree.
inline constexpr char kInternalChildParam[] = "DISTTEST_INTERNAL_CHILD_PARAM";
// Token the rank presents to the test's store (a new one per test), so that
// a stray connection to the port cannot read or write the rendezvous.
inline constexpr char kInternalStoreToken[] = "DISTTEST_INTERNAL_STORE_TOKEN";
// Name of the shared-memory queue this rank reports its results into.
inline constexpr char kInternalResultQueue[] = "DISTTEST_INTERNAL_RESULT_QUEUE";
// Index of the DistributedFixture (in the order the test declared them)
// that this process runs as a rank, instead of the test body.
inline constexpr char kInternalChildFixture[] =
    "DISTTEST_INTERNAL_CHILD_FIXTURE";
// The test's fixture directories, one per line, in declaration order.
inline constexpr char kInternalFixtureDirs[] = "DISTTEST_INTERNAL_FIXTURE_DIRS";
// The backend the parent chose ("gloo" or "nccl"), which Backend::kAuto
// resolves to; a rank that sees only its own GPU could not choose alike.
inline constexpr char kInternalBackend[] = "DISTTEST_INTERNAL_BACKEND";
// Rank threads' CUDA devices, one a rank ("0,0,1"): places in the
// process's CUDA_VISIBLE_DEVICES, which lists every rank's GPUs once.
inline constexpr char kInternalThreadDevices[] =
    "DISTTEST_INTERNAL_THREAD_DEVICES";
// Set in pooled ranks (options().reuse_workers): after its test the rank
// waits for the next one instead of leaving.
inline constexpr char kInternalPool[] = "DISTTEST_INTERNAL_POOL";
// The descriptor of the ranks' host arena (src/comm/host_arena.h),
// kept open across exec.
inline constexpr char kInternalArenaFd[] = "DISTTEST_INTERNAL_ARENA_FD";
// The memfd of the ranks' collective ledgers, kept across exec.
inline constexpr char kInternalLedgerFd[] = "DISTTEST_INTERNAL_LEDGER_FD";
// The port of the harness's own store (token-protected): MASTER_PORT is
// left to the code under test, which may serve its own store there.
inline constexpr char kInternalStorePort[] = "DISTTEST_INTERNAL_STORE_PORT";
// The write end of the parent's "results ready" pipe, kept open across exec:
// a rank writes a byte after each result it queues, so that the parent
// drains the queue at once instead of on its next tick.
inline constexpr char kInternalResultsReadyFd[] =
    "DISTTEST_INTERNAL_RESULTS_READY_FD";
// The kExec zygote's end of its socket to the parent, and the parent's pid
// (harness/spawn/zygote.h).
inline constexpr char kInternalZygoteFd[] = "DISTTEST_INTERNAL_ZYGOTE_FD";
inline constexpr char kInternalZygoteParent[] =
    "DISTTEST_INTERNAL_ZYGOTE_PARENT";
// For the self-tests: set (to 1) when the zygote starts, it forks the rank
// of its first message, then exits before it answers.
inline constexpr char kInternalZygoteDieBeforeAnswer[] =
    "DISTTEST_INTERNAL_ZYGOTE_DIE_BEFORE_ANSWER";

}  // namespace disttest::env

#endif  // DISTTEST_SRC_ENV_INTERNAL_NAMES_H_
