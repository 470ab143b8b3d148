// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How many threads this process runs: a fork() from a process that runs
// more than one may be followed only by async-signal-safe calls until exec.
//
//   if (ThreadCount() == 1) { /* fork, and run code in the child */ }
#ifndef DISTTEST_SRC_BASE_THREADS_H_
#define DISTTEST_SRC_BASE_THREADS_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace disttest::internal {

// The entries of /proc/self/task; 0 when it cannot be read.
std::size_t ThreadCount();
// Their thread ids, in order; empty when it cannot be read.
std::vector<pid_t> ThreadIds();
// Thread `tid`'s name (/proc/self/task/<tid>/comm: the program's, unless
// the thread set its own); "" when it is gone.
std::string ThreadName(pid_t tid);
// Whether thread `tid` of this process has ended (gone, or dead and not
// yet taken off the list: state Z or X).
bool ThreadEnded(pid_t tid);

// What to add to `error` (a thread or buffer that could not be made:
// EAGAIN, ENOMEM) when the address space is limited: " (RLIMIT_AS is
// 256 MiB (ulimit -v): a thread's stack or a buffer could not be mapped;
// raise it)"; "" otherwise. The second form takes the limit (RLIM_INFINITY:
// none) instead of reading it.
std::string AddressSpaceHint(const std::string& error);
std::string AddressSpaceHint(const std::string& error,
                             unsigned long long limit);

// Where one process hosts the ranks of a test as threads
// (LaunchMode::kThreads): the rank the calling thread runs, or -1 (a
// process per rank; the host's main thread; a thread a rank started).
// What a rank keeps for itself in a process (the errors its peers caused,
// its requests in flight, its ledger, its CurrentRank()) is kept per rank
// by it; -1 is the process's one rank.
int ThreadsRank();
// Makes the calling thread rank `rank`'s (-1: none).
void SetThreadsRank(int rank);
// Whether this process hosts the ranks of a test as threads; said once by
// the host, before it starts them.
bool RanksAreThreads();
void SetRanksAreThreads();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_THREADS_H_
