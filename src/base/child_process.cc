// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "base/retry.h"

extern char** environ;

namespace disttest::internal {
namespace {

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string FindProgram(const char* name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::vector<std::string> EnvironmentNow() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  return env;
}

ChildProcess ChildProcess::Start(const std::vector<std::string>& argv,
                                 std::vector<std::string> env) {
  ChildProcess child;
  if (argv.empty()) return child;
  std::vector<std::string> args = argv;
  if (env.empty()) env = EnvironmentNow();
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(env);
  int out = memfd_create("disttest-child-output", MFD_CLOEXEC);
  if (out < 0) return child;
  pid_t pid = fork();
  if (pid == 0) {
    // Raw system calls only: the parent may run threads.
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
    _exit(127);
  }
  if (pid < 0) {
    close(out);
    return child;
  }
  child.pid_ = pid;
  child.out_ = out;
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      out_(std::exchange(other.out_, -1)),
      reaped_(other.reaped_),
      exit_status_(other.exit_status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    pid_ = std::exchange(other.pid_, -1);
    out_ = std::exchange(other.out_, -1);
    reaped_ = other.reaped_;
    exit_status_ = other.exit_status_;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) Kill();
  if (out_ >= 0) close(out_);
  out_ = -1;
}

bool ChildProcess::Wait(Clock::time_point deadline) {
  if (pid_ <= 0) return true;
  while (!reaped_) {
    int status = 0;
    pid_t got = RetryOnEintr([&] { return waitpid(pid_, &status, WNOHANG); });
    if (got == pid_ || got < 0) {
      reaped_ = true;
      if (got == pid_ && WIFEXITED(status)) exit_status_ = WEXITSTATUS(status);
      break;
    }
    if (Clock::now() >= deadline) return false;
    poll(nullptr, 0, 5);
  }
  return true;
}

void ChildProcess::Kill() {
  if (pid_ <= 0 || reaped_) return;
  kill(pid_, SIGKILL);
  RetryOnEintr([&] { return waitpid(pid_, nullptr, 0); });
  reaped_ = true;
}

std::string ChildProcess::Output() const {
  std::string text;
  if (out_ < 0) return text;
  char buf[8192];
  off_t at = 0;
  ssize_t n;
  while ((n = pread(out_, buf, sizeof buf, at)) > 0) {
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

}  // namespace disttest::internal
