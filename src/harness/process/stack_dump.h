// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Stacks of live rank processes, for the verdict of a hung or stuck test.
//
//   std::vector<std::string> stacks = DumpStacks({pid1, pid2}, 10s);
//
// Every thread of every process, taken from outside with gdb (batch mode)
// or eu-stack, whichever is installed (eu-stack first: it is much faster),
// one tool per process, all at once, within one deadline. With eu-stack, a
// quick unwinding of each process (no symbols, no debug information) comes
// first, and processes in the same places share the whole stack of the
// first of them (with their own thread ids): 128 ranks that wait in one
// collective cost one reading of the debug information, not 128. One that
// has moved by then gets its own. Each string is one process's stacks, or a
// line that says why there are none. Ranks allow their parent's descendants to
// attach (PR_SET_PTRACER), so this works under Yama's ptrace_scope=1 without
// root. Without either tool each process gets SIGUSR2, on which a rank prints
// its own stack with Boost.Stacktrace (see InstallStackSignalHandler); that one
// arrives on the rank's stderr.
#ifndef DISTTEST_SRC_HARNESS_PROCESS_STACK_DUMP_H_
#define DISTTEST_SRC_HARNESS_PROCESS_STACK_DUMP_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
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
// How many processes' whole stacks the tool took (the others were in
// the same places as one of those).
struct StackStats {
  std::size_t whole = 0;
};
std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline,
                                    const StackTool& tool,
                                    StackStats* stats = nullptr);

// Where the threads of a process are, from eu-stack -b's output: per
// thread, each frame's module build-id and offset (not its load address,
// which ASLR moves), an inlined frame once; "" when it has no frame.
// `threads` gets its "TID n:" lines. Equal signatures: the same places.
std::string StackSignature(const std::string& raw,
                           std::vector<std::string>* threads);

// The part of one process's stacks (one string of DumpStacks's) that is
// thread `tid`'s: its "TID n:" (eu-stack) or "Thread ... (LWP n)" (gdb)
// line and its frames; `stacks` whole when it has no such thread (a line
// that says why there are none, a tool that does not name threads).
std::string StackOfThread(const std::string& stacks, pid_t tid);

// In a spawned rank: lets the parent's stack tool attach, and installs the
// SIGUSR2 fallback (below).
void InstallStackSignalHandler();

// Prints the stack of the thread that gets SIGUSR2 to stderr (the fallback
// without gdb or eu-stack), unless the program handles SIGUSR2 itself.
void InstallStackFallback();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_STACK_DUMP_H_
