// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/stack_dump.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/stacktrace.hpp>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/child_process.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> ToolArgs(const std::string& tool, pid_t pid) {
  std::string p = std::to_string(pid);
  if (tool.ends_with("eu-stack")) return {tool, "-s", "-i", "-p", p};
  return {tool,  "-p",
          p,     "-batch",
          "-nx", "-q",
          "-ex", "set pagination off",
          "-ex", "thread apply all bt"};
}

// Keeps the frames (and eu-stack's source lines under them) and drops the
// tools' chatter.
std::string Tidy(const std::string& raw) {
  std::stringstream in(raw);
  std::string line, out;
  while (std::getline(in, line)) {
    bool keep = line.starts_with("Thread ") || line.starts_with("#") ||
                line.starts_with("TID ") || line.starts_with("    ") ||
                line.find("ptrace") != std::string::npos ||
                line.find("Operation not permitted") != std::string::npos;
    if (keep) out += line + "\n";
  }
  return out.empty() ? raw : out;
}

void PrintOwnStack(int) {
  // Best effort, in a process that is hung anyway: formatting a stack is not
  // async-signal-safe, but this is the fallback for machines without gdb.
  std::string s = boost::stacktrace::to_string(boost::stacktrace::stacktrace());
  (void)!write(STDERR_FILENO,
               "disttest: stack of the thread that got SIGUSR2:\n", 48);
  (void)!write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace

StackTool FindStackTool() {
  // eu-stack takes a process's stacks in tens of milliseconds; gdb, which
  // loads every symbol table first, takes seconds.
  std::string tool = FindProgram("eu-stack");
  if (tool.empty()) tool = FindProgram("gdb");
  return {tool, EnvironmentNow()};
}

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline) {
  return DumpStacks(pids, deadline, FindStackTool());
}

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline,
                                    const StackTool& tool) {
  std::vector<std::string> stacks(pids.size());
  if (tool.path.empty()) {
    for (pid_t pid : pids) kill(pid, SIGUSR2);
    poll(nullptr, 0, 500);  // Time for the ranks to print.
    for (std::string& s : stacks) {
      s = "no gdb or eu-stack installed: the rank printed its own stack (one "
          "thread) to its stderr above";
    }
    return stacks;
  }
  // One tool per process, all at once, within the one deadline.
  std::vector<ChildProcess> tools;
  for (pid_t pid : pids) {
    tools.push_back(ChildProcess::Start(ToolArgs(tool.path, pid), tool.env));
  }
  const auto until = Clock::now() + deadline;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    ChildProcess& t = tools[i];
    if (!t.started()) {
      stacks[i] = fmt::format("could not start {}", tool.path);
      continue;
    }
    const bool late = !t.Wait(until);
    if (late) t.Kill();
    stacks[i] = Tidy(t.Output());
    if (late) {
      stacks[i] += fmt::format("({} did not finish within {} ms)\n", tool.path,
                               deadline.count());
    }
  }
  return stacks;
}

void InstallStackSignalHandler() {
  // Yama ptrace_scope=1 lets only ancestors attach; the parent's stack tool
  // is the parent's child, not this rank's ancestor.
  prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
  InstallStackFallback();
}

void InstallStackFallback() {
  struct sigaction old {};
  if (sigaction(SIGUSR2, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) {
    return;  // The program's own use of SIGUSR2 stays.
  }
  struct sigaction sa {};
  sa.sa_handler = PrintOwnStack;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
}

}  // namespace disttest::internal
