// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What a test's ranks need of the machine, checked before they start, so
// that a limit is an error that names it instead of a hang:
//
//   EnsureOpenFiles(16, /*communicator=*/true);   // raises or throws
//   EnsureSharedMemory(16, queue_bytes);          // throws
//   EnsureProcesses(16);                          // throws
//
// "needs about 89 open files for 16 ranks, and RLIMIT_NOFILE is 64 (hard
// limit 64): raise it (ulimit -n) or run fewer ranks".
#ifndef DISTTEST_SRC_HARNESS_PROCESS_RESOURCES_H_
#define DISTTEST_SRC_HARNESS_PROCESS_RESOURCES_H_

#include <cstddef>
#include <optional>
#include <string>

namespace disttest::internal {

// Descriptors the parent needs for `world` ranks (measured: 4 a rank, its
// two output pipes, its pidfd and its store connection) and a rank needs
// (with a communicator, one socket a peer and about ten of its own), beside
// those already open. Raises the soft RLIMIT_NOFILE toward the hard one
// when that suffices (saying so once); throws ConfigError otherwise.
void EnsureOpenFiles(int world, bool communicator);

// Throws ConfigError when /dev/shm has less than `bytes` free:
// "the result queues of 16 ranks need 592.0 KiB in /dev/shm, which has
// 256.0 KiB free".
void EnsureSharedMemory(int world, std::size_t bytes);

// Throws ConfigError when `world` more processes would pass a limit: the
// pids.max of this process's cgroup or of one above it (what containers and
// systemd units set), or RLIMIT_NPROC below `world` (not for root, to which
// the kernel does not apply it):
// "needs 256 processes for 256 ranks, and the cgroup /sys/fs/cgroup/pids/ci
// allows 100 more (pids.max 120, pids.current 20): raise pids.max or run
// fewer ranks".
void EnsureProcesses(int world);
// The sentence EnsureProcesses would throw for `world` ranks; "" when they
// fit.
std::string ProcessShortage(int world);

// " (RLIMIT_NPROC is 100; the cgroup ... has pids.max 120, pids.current
// 120)": for messages about a fork that failed with EAGAIN.
std::string ProcessLimitsText();

// What tells an OOM kill from another SIGKILL: the OOM kills counted by
// this process's memory cgroup (v2 memory.events, v1 memory.oom_control:
// "oom_kill N"), which its ranks share, and by the kernel (/proc/vmstat).
struct OomCounts {
  std::string cgroup;  // The memory cgroup's directory; "" when unknown.
  std::optional<long long> in_cgroup;
  std::optional<long long> system;
};
OomCounts ReadOomCounts();

// Why a rank that got SIGKILL from nobody in the harness got it, when the
// counts grew between `before` and `after`: "by the kernel's OOM killer
// (the memory cgroup /sys/fs/cgroup/memory/ci counted 1 OOM kill during the
// test)"; "" when they did not.
std::string OomKillerText(const OomCounts& before, const OomCounts& after);

// " (RLIMIT_NOFILE is 64)": for messages about EMFILE.
std::string OpenFilesLimitText();

// "64.0 MiB"
std::string Bytes(std::size_t bytes);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_RESOURCES_H_
