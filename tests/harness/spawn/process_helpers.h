// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helpers for the tests that start real processes (the rank spawner's,
// the zygote's): a pipe that closes with its scope, a reaper for what a test
// left running, and an environment variable set for a scope.
#ifndef DISTTEST_TESTS_HARNESS_SPAWN_PROCESS_HELPERS_H_
#define DISTTEST_TESTS_HARNESS_SPAWN_PROCESS_HELPERS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace disttest::internal {

// A pipe; both ends close with it.
class Pipe {
 public:
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      read_ = fds[0];
      write_ = fds[1];
    }
  }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return read_; }
  int write_end() const { return write_; }
  void CloseRead() {
    if (read_ >= 0) close(read_);
    read_ = -1;
  }
  void CloseWrite() {
    if (write_ >= 0) close(write_);
    write_ = -1;
  }

 private:
  int read_ = -1;
  int write_ = -1;
};

// Kills and reaps, at the end of a test, every process it recorded that is
// still this process's unreaped child (an ASSERT left early); a pid that
// was reaped is no child any more, and is left alone.
class Reaper {
 public:
  ~Reaper() {
    for (pid_t pid : pids_) {
      if (waitpid(pid, nullptr, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    }
  }
  pid_t operator()(pid_t pid) {
    if (pid > 0) pids_.push_back(pid);
    return pid;
  }

 private:
  std::vector<pid_t> pids_;
};

// Sets (or, with null, unsets) a variable for the scope, then puts back
// what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_TESTS_HARNESS_SPAWN_PROCESS_HELPERS_H_
