// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Processes that a test left running: a rank is a child subreaper
// (PR_SET_CHILD_SUBREAPER), so every process it starts stays its descendant
// even after a double fork and setsid(), and at the end of each test it
// ends those still running, naming them:
//
//   for (const std::string& note : EndChildren()) std::fprintf(stderr, ...);
//
// The parent does the same for the processes of ranks it had to kill, which
// are reparented to it, picking only those that carry the test's
// MASTER_PORT in their environment.
#ifndef DISTTEST_SRC_HARNESS_PROCESS_DESCENDANTS_H_
#define DISTTEST_SRC_HARNESS_PROCESS_DESCENDANTS_H_

#include <sys/types.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace disttest::internal {

// The calling process's children (of all its threads), zombies included.
std::vector<pid_t> Children();

// The --gtest_filter argument the zygote (zygote.h) is started with, which
// every kExec rank, a fork of it, keeps on its command line.
inline constexpr char kZygotePlaceholderFilter[] =
    "--gtest_filter=disttest-zygote";

// "sleep 1000" (its command line, at most 100 characters), or its name;
// "<binary>, a fork of a kExec rank" for one with the zygote's command
// line.
std::string DescribeProcess(pid_t pid);

// SIGKILLs and reaps every child of the calling process for which `pick` is
// true (all, without one), and the children those leave behind, for at most
// two seconds; returns "12345 (sleep 1000)" for each that was still
// running. Children that had already exited are reaped without a word.
std::vector<std::string> EndChildren(
    const std::function<bool(pid_t)>& pick = nullptr);

// Every process descended from one of `roots` (not the roots), from the
// parent links in /proc: taken just before the harness kills ranks, whose
// orphans (a daemon that cleared its environment included) then come to
// this process and are known as theirs.
std::set<pid_t> DescendantsOf(const std::set<pid_t>& roots);

// When `pid` started, in clock ticks since boot (/proc/<pid>/stat's
// starttime); 0 when it is gone. NowInTicks() is the same clock now.
unsigned long long StartedAt(pid_t pid);
unsigned long long NowInTicks();

// Whether `pid` is stopped (SIGSTOP, SIGTSTP, or held by a tracer).
bool Stopped(pid_t pid);

// Whether `pid`'s environment holds exactly `entry` ("MASTER_PORT=4242").
bool EnvironmentHas(pid_t pid, const std::string& entry);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_DESCENDANTS_H_
