// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Stacks of live rank processes, for the verdict of a hung or stuck test.
//
//   std::vector<std::string> stacks = DumpStacks({pid1, pid2}, 10s);
//
// Every thread of every process, taken from outside with gdb (batch mode)
// or eu-stack, whichever is installed (eu-stack first: it is much faster),
// one tool per process, all at once,
// within one deadline. Each string is one process's stacks, or a line that
// says why there are none. Ranks allow their parent's descendants to attach
// (PR_SET_PTRACER), so this works under Yama's ptrace_scope=1 without root.
// Without either tool each process gets SIGUSR2, on which a rank prints its
// own stack with Boost.Stacktrace (see InstallStackSignalHandler); that one
// arrives on the rank's stderr.
#ifndef DISTTEST_SRC_HARNESS_STACK_DUMP_H_
#define DISTTEST_SRC_HARNESS_STACK_DUMP_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace disttest::internal {

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline);

// The stack tool (eu-stack, else gdb; "" for neither) and the environment
// it runs with, found now: a thread that takes stacks while another may
// change the environment finds them first, under the other's lock.
struct StackTool {
  std::string path;
  std::vector<std::string> env;
};
StackTool FindStackTool();
std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline,
                                    const StackTool& tool);

// In a spawned rank: lets the parent's stack tool attach, and installs the
// SIGUSR2 fallback (below).
void InstallStackSignalHandler();

// Prints the stack of the thread that gets SIGUSR2 to stderr (the fallback
// without gdb or eu-stack), unless the program handles SIGUSR2 itself.
void InstallStackFallback();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_STACK_DUMP_H_
