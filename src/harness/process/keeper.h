// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The keeper: ends what a test process leaves running when it is killed
// with SIGKILL (`kill -9`, `timeout -s KILL`, the OOM killer), which no
// handler of its own sees. Its ranks then stop (PR_SET_PDEATHSIG with
// SIGSTOP, not SIGKILL) and so stay the child subreapers of every process
// they started, a setsid() daemon included; the keeper, a small process of
// its own group that watches the test process (a pidfd), finds them all,
// kills them and says so on stderr.
//
//   keeper::Start();                      // before the first rank group
//   // In the test process, before fork():
//   const int slot = keeper::Reserve();  // -1: no keeper
//   const pid_t parent = getpid();
//   if (fork() == 0 && !keeper::DieWithParent(parent, slot)) _exit(1);
//
// A rank that another process forks for the test process (the zygote's) is
// recorded by the test process instead (Record()) before it may run, and
// asks with kRecorded. Without a keeper (no pidfd_open, no memory, no
// process left), a child dies with its parent (SIGKILL), as before.
#ifndef DISTTEST_SRC_HARNESS_PROCESS_KEEPER_H_
#define DISTTEST_SRC_HARNESS_PROCESS_KEEPER_H_

#include <sys/types.h>

namespace disttest::internal::keeper {

// DieWithParent()'s slot for a child the test process recorded.
inline constexpr int kRecorded = -2;

// In the test process, while it is no subreaper (before its first rank
// group): starts its keeper unless one runs. Thread-safe.
void Start();

// In a test process whose keeper ran: starts another if it has ended
// (killed from outside), which takes over its table, so that the ranks
// that run now, set to stop when their parent ends, are not left stopped.
// A child of this process where it is a subreaper. Thread-safe.
void Revive();

// A pidfd of the keeper, readable once it has ended (-1: none): for a
// poll loop to call Revive() at once.
int Fd();

// In the test process: a slot of the keeper's table for the next child; -1
// when no keeper runs, or on another thread than the main one (a child
// stops when the thread that forked it ends). Thread-safe.
int Reserve();

// In the test process, for a child another process forked (its pid known
// before it runs): records it in `slot`. False when it could not be.
bool Record(int slot, pid_t pid);

// In the child, between fork and exec (async-signal-safe): records this
// process in `slot` (unless kRecorded) and asks to be stopped when
// `parent` ends, for the keeper to end; with slot -1, to be killed. False
// when `parent` has ended already.
bool DieWithParent(pid_t parent, int slot);

// In a rank that stops when `parent` ends: a SIGHUP that comes after the
// parent ended (the kernel's, with a SIGCONT, to a process group of
// stopped processes that the parent's end orphaned) leaves the rank to the
// keeper instead of ending it, which would leave what it started to init;
// while the parent runs, and in the rank's children, SIGHUP ends the
// process as by default. Nothing where the program chose its own SIGHUP
// disposition, or the rank dies with its parent. Async-signal-safe.
void GuardAgainstOrphanedHangup(pid_t parent);

// This process's keeper (-1: none), which is no rank and no orphan of one
// (a child of this process if it was a subreaper when it started it).
pid_t Pid();

}  // namespace disttest::internal::keeper

#endif  // DISTTEST_SRC_HARNESS_PROCESS_KEEPER_H_
