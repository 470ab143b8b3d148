// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/stack_dump.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/stacktrace.hpp>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The first of `names` found in PATH, or "".
std::string FindTool(std::initializer_list<const char*> names) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (const char* name : names) {
    std::stringstream in(dirs);
    std::string dir;
    while (std::getline(in, dir, ':')) {
      std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

std::vector<std::string> ToolArgs(const std::string& tool, pid_t pid) {
  std::string p = std::to_string(pid);
  if (tool.ends_with("eu-stack")) return {tool, "-s", "-i", "-p", p};
  return {tool,  "-p",
          p,     "-batch",
          "-nx", "-q",
          "-ex", "set pagination off",
          "-ex", "thread apply all bt"};
}

struct Capture {
  pid_t pid = -1;
  int fd = -1;  // A memfd the tool writes into.
  bool done = false;
  std::string out;
};

// Starts `args` with stdout and stderr into a memfd, not a pipe: a tool
// that takes the stacks of this very process (a launched rank's watchdog)
// stops every thread of it, the reader's too, and would block on a full
// pipe. Between fork and exec only raw system calls run: this process may
// run threads. pid -1 on failure.
Capture Start(const std::vector<std::string>& args) {
  Capture c;
  int fd = memfd_create("disttest-stacks", MFD_CLOEXEC);
  if (fd < 0) return c;
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) {
    close(fd);
    return c;
  }
  c.pid = pid;
  c.fd = fd;
  return c;
}

// Waits until every tool has exited or the deadline; then reads what each
// wrote.
void Collect(std::vector<Capture>& captures, Clock::time_point deadline) {
  for (;;) {
    bool running = false;
    for (Capture& c : captures) {
      if (c.pid < 0 || c.done) continue;
      pid_t got = waitpid(c.pid, nullptr, WNOHANG);
      if (got == c.pid || (got < 0 && errno != EINTR)) {
        c.done = true;
      } else {
        running = true;
      }
    }
    if (!running || Clock::now() >= deadline) break;
    poll(nullptr, 0, 5);
  }
  for (Capture& c : captures) {
    if (c.fd < 0) continue;
    char buf[8192];
    ssize_t n;
    off_t at = 0;
    while ((n = pread(c.fd, buf, sizeof buf, at)) > 0) {
      c.out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    close(c.fd);
    c.fd = -1;
  }
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

std::vector<std::string> DumpStacks(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds deadline) {
  std::vector<std::string> stacks(pids.size());
  // eu-stack takes a process's stacks in tens of milliseconds; gdb, which
  // loads every symbol table first, takes seconds.
  std::string tool = FindTool({"eu-stack", "gdb"});
  if (tool.empty()) {
    for (pid_t pid : pids) kill(pid, SIGUSR2);
    poll(nullptr, 0, 500);  // Time for the ranks to print.
    for (std::string& s : stacks) {
      s = "no gdb or eu-stack installed: the rank printed its own stack (one "
          "thread) to its stderr above";
    }
    return stacks;
  }
  std::vector<Capture> captures;
  for (pid_t pid : pids) captures.push_back(Start(ToolArgs(tool, pid)));
  Collect(captures, Clock::now() + deadline);
  for (std::size_t i = 0; i < captures.size(); ++i) {
    Capture& c = captures[i];
    if (c.pid < 0) {
      stacks[i] = fmt::format("could not start {}", tool);
      continue;
    }
    bool late = !c.done;
    if (late) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, nullptr, 0);
    }
    stacks[i] = Tidy(c.out);
    if (late) {
      stacks[i] += fmt::format("({} did not finish within {} ms)\n", tool,
                               deadline.count());
    }
  }
  return stacks;
}

void InstallStackSignalHandler() {
  // Yama ptrace_scope=1 lets only ancestors attach; the parent's stack tool
  // is the parent's child, not this rank's ancestor.
  prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
  struct sigaction sa {};
  sa.sa_handler = PrintOwnStack;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
}

}  // namespace disttest::internal
