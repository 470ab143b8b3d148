// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The names of every environment variable disttest reads or writes, in one
// place. Rank variables keep torchrun's names, so code under test that reads
// RANK or WORLD_SIZE works the same under disttest, torchrun and DeepSpeed.
//
//   const char* rank = std::getenv(disttest::env::kRank);
#ifndef DISTTEST_ENV_NAMES_H_
#define DISTTEST_ENV_NAMES_H_

namespace disttest::env {

// --- The rank environment, set in every rank process. ---
// Host of the rendezvous store (an IPv4/IPv6 literal or a host name).
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
// TCP port of the rendezvous store.
inline constexpr char kMasterPort[] = "MASTER_PORT";
// Global rank, 0 <= RANK < WORLD_SIZE.
inline constexpr char kRank[] = "RANK";
// Rank among the processes of this node.
inline constexpr char kLocalRank[] = "LOCAL_RANK";
// Number of ranks in the job.
inline constexpr char kWorldSize[] = "WORLD_SIZE";
// Number of ranks on this node (DeepSpeed's name; torchrun's is
// LOCAL_WORLD_SIZE, which disttest sets too).
inline constexpr char kLocalSize[] = "LOCAL_SIZE";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";

// --- The harness's own knobs (environment variables only, so that any
// main() and any launcher pass them through unchanged). ---
// "fork" or "exec": the launch mode of every spawned test of the run,
// whatever its options().launch (on CI, say, every test as exec'd ranks).
// Unset or empty: each test's own.
inline constexpr char kLaunch[] = "DISTTEST_LAUNCH";
// LaunchMode::kMpiexec: more flags for mpiexec ("--mca btl self,tcp").
inline constexpr char kMpiexecFlags[] = "DISTTEST_MPIEXEC_FLAGS";
// Per-test timeout in seconds (a positive number); overrides
// options().timeout.
inline constexpr char kTimeout[] = "DISTTEST_TIMEOUT";
// A positive factor (at most 100) for every deadline of disttest's: the
// test's timeout (DISTTEST_TIMEOUT's too), the failure grace, a launched
// rank's heartbeat bound and its report waits. Unset: 1, or what a slow
// build sets itself (3 under AddressSanitizer, 5 under ThreadSanitizer or
// MemorySanitizer, 20 under valgrind).
inline constexpr char kTimeoutScale[] = "DISTTEST_TIMEOUT_SCALE";
// Keeps NCCL_DEBUG in rank processes (it is removed by default, because NCCL's
// INFO lines from N ranks drown the test output).
inline constexpr char kKeepNcclDebug[] = "DISTTEST_KEEP_NCCL_DEBUG";
// A directory: each rank's whole stdout and stderr of each test is kept in
// <dir>/<Suite>.<Name>/<N>ranks/rank-<r>.log, and a failing test prints
// the last lines of its failing ranks' logs.
inline constexpr char kLogDir[] = "DISTTEST_LOG_DIR";
// A directory: each distributed test writes a Chrome trace event file there,
// <dir>/<Suite>.<Name>.<N>ranks.trace.json (Perfetto, chrome://tracing): a
// track per rank with its start, connection, set-up, body, tear-down and
// every collective it called, and its failures; a failing test prints the
// path.
inline constexpr char kTrace[] = "DISTTEST_TRACE";
// "0": ranks that wait in a collective are not compared while they wait
// (by the parent in spawned mode, through the store under a launcher), so
// ranks that entered one with different calls fail at the timeout, not at
// once. "1" or unset: they are. The calls of a test that ended are
// compared whatever it says.
inline constexpr char kCompareCalls[] = "DISTTEST_COMPARE_CALLS";
// Seconds between the progress lines of a test that runs long (default 5;
// 0 turns them off).
inline constexpr char kHeartbeat[] = "DISTTEST_HEARTBEAT";
// Rank number (an integer >= 0): that rank prints its pid and waits for a
// debugger to attach before it joins the others; the timeouts of tests with
// that rank are off.
inline constexpr char kDebugRank[] = "DISTTEST_DEBUG_RANK";

// "launched": this process is one rank of a run that a launcher (srun,
// mpirun, torchrun) started once per rank; DIST_TEST_F bodies run in it
// ("external", the mode's old name, is understood too). "spawn": disttest
// spawns the ranks of each test itself, even under a launcher. Unset:
// launched when a launcher with more than one rank is found in the
// environment.
inline constexpr char kLauncher[] = "DISTTEST_LAUNCHER";

// Under a launcher: the job's store token, the same secret on every rank
// (launch/launcher_env.h). Unset: derived from Open MPI's job secret, or
// none where the launcher gives no secret (torchrun, srun).
inline constexpr char kStoreToken[] = "DISTTEST_STORE_TOKEN";

// Under a launcher without a secret, with ranks on several hosts: the file
// where rank 0 keeps the store's token for the other ranks to read (0600).
// Unset: $HOME/.disttest/store-token-<MASTER_ADDR>-<port>.
inline constexpr char kTokenFile[] = "DISTTEST_TOKEN_FILE";

// GPUs the harness may hand to ranks, instead of asking the driver: a count
// ("4": devices 0..3) or a comma list of CUDA_VISIBLE_DEVICES entries
// ("0,2", "3," for GPU 3 alone, or "GPU-8f2e...,GPU-11aa..."). For tests of the
// harness itself, and to keep a test run off some of a machine's GPUs.
inline constexpr char kGpus[] = "DISTTEST_GPUS";
// "1": a test that needs more GPUs than there are fails instead of being
// skipped (for GPU runners that must not skip silently).
inline constexpr char kRequireGpus[] = "DISTTEST_REQUIRE_GPUS";
// "1": options().share_gpus for every test of the run: more ranks than GPUs
// run, placed round-robin on the GPUs there are.
inline constexpr char kShareGpus[] = "DISTTEST_SHARE_GPUS";
// NCCL's own variables that disttest sets in a rank (where the user has
// not): several ranks of a communicator on one GPU (NCCL before 2.30: a
// host id of each rank's own, which makes NCCL take them for hosts and
// connect them over sockets; 2.30 and later: its multi-rank-GPU mode); its
// RAS service off (every process of NCCL 2.24+ would listen on
// localhost:28028: two test binaries at once collide); its debug log beside
// the rank's own (DISTTEST_LOG_DIR).
inline constexpr char kNcclHostId[] = "NCCL_HOSTID";
inline constexpr char kNcclMultiRankGpu[] = "NCCL_MULTI_RANK_GPU_ENABLE";
inline constexpr char kNcclRasEnable[] = "NCCL_RAS_ENABLE";
inline constexpr char kNcclRasAddr[] = "NCCL_RAS_ADDR";
inline constexpr char kNcclDebugFile[] = "NCCL_DEBUG_FILE";
// A file: each distributed test that gtest runs appends a line
// "<Suite.Name/Nranks> <ranks> <gpus per rank>" and is skipped without
// starting a rank. disttest_discover_tests() (CMake) uses it.
inline constexpr char kListResources[] = "DISTTEST_LIST_RESOURCES";
// A number from 1 to 255: a run whose every test skipped, and in which
// nothing failed, ends with this exit status instead of 0, for ctest's
// SKIP_RETURN_CODE. disttest_discover_tests() sets it to 77.
inline constexpr char kSkipExitCode[] = "DISTTEST_SKIP_EXIT_CODE";
// "1": options().reuse_workers is ignored; every test spawns its ranks.
inline constexpr char kNoReuse[] = "DISTTEST_NO_REUSE";
// "1": each kExec rank is the test binary exec'd for it, not a copy forked
// from the zygote (the binary exec'd once and stopped before its static
// initialisers, harness/spawn/zygote.h).
inline constexpr char kNoZygote[] = "DISTTEST_NO_ZYGOTE";
// "1": no keeper (harness/process/keeper.h): ranks die with a test process
// killed by SIGKILL, and what they started outlives it.
inline constexpr char kNoKeeper[] = "DISTTEST_NO_KEEPER";
// "1": spawned ranks send every collective's data through Gloo, not through
// the same-host arena (src/comm/host_arena.h); the arena still checks
// that the ranks agree on each collective.
inline constexpr char kNoHostArena[] = "DISTTEST_NO_HOST_ARENA";
// Which devices CUDA shows a process; set per rank by the harness.
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";

// --- Variables removed from a rank's environment. ---
// gtest's sharding, output and premature-exit protocol belong to the parent:
// a child that inherits GTEST_TOTAL_SHARDS would run nothing on most shards,
// and one that inherits GTEST_OUTPUT would overwrite the parent's XML.
inline constexpr const char* kRemovedFromChild[] = {
    "GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "GTEST_SHARD_STATUS_FILE",
    "GTEST_OUTPUT",       "XML_OUTPUT_FILE",   "TEST_PREMATURE_EXIT_FILE",
    "GTEST_FILTER",       "GTEST_REPEAT",      "GTEST_SHUFFLE",
    "GTEST_BRIEF",        "GTEST_FAIL_FAST",   "GTEST_LIST_TESTS",
};
// Removed unless DISTTEST_KEEP_NCCL_DEBUG is 1.
inline constexpr char kNcclDebug[] = "NCCL_DEBUG";

}  // namespace disttest::env

#endif  // DISTTEST_ENV_NAMES_H_
