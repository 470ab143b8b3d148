// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// ChildProcess: a program run for its output (a stack tool, nvidia-smi),
// safe to start from a process that runs threads: argv and the environment
// are built before fork(), and between fork and exec the child makes only
// raw system calls. Its stdout and stderr go to a memfd, not a pipe, so a
// program that stops this very process (a debugger taking its stacks) can
// never block on a full pipe whose reader it stopped.
//
//   ChildProcess tool = ChildProcess::Start({"/usr/bin/eu-stack", "-p", "42"});
//   if (!tool.Wait(Clock::now() + 10s)) tool.Kill();
//   std::string out = tool.Output();
#ifndef DISTTEST_SRC_BASE_CHILD_PROCESS_H_
#define DISTTEST_SRC_BASE_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace disttest::internal {

// The first executable `name` in PATH (/usr/bin:/bin when unset), or "".
std::string FindProgram(const char* name);

// The process's environment now, as "NAME=value" entries (for a program to
// be started later with it, from another thread).
std::vector<std::string> EnvironmentNow();

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts argv[0] (a path) with `argv`, and `env` for its environment
  // (empty: this process's, read now). A child that could not be started
  // has started() false; one whose exec fails exits with 127.
  static ChildProcess Start(const std::vector<std::string>& argv,
                            std::vector<std::string> env = {});
  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  // Kills and reaps a child still running.
  ~ChildProcess();

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Waits until the child has exited (and reaps it) or `deadline`; true
  // when it has exited.
  bool Wait(Clock::time_point deadline);
  // Whether it exited by itself with status 0 (after Wait()).
  bool succeeded() const { return exit_status_ == 0; }
  // SIGKILL, then reaps it.
  void Kill();
  // Everything it wrote to stdout and stderr so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  int out_ = -1;  // The memfd.
  bool reaped_ = false;
  int exit_status_ = -1;  // Its exit status; -1: unknown, or signalled.
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_CHILD_PROCESS_H_
