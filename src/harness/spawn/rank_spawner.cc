// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/spawn/rank_spawner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "base/threads.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/internal_names.h"
#include "env/knobs.h"
#include "harness/process/command_line.h"
#include "harness/process/descendants.h"
#include "harness/process/emergency_cleanup.h"
#include "harness/process/interrupt.h"
#include "harness/process/keeper.h"
#include "harness/process/resources.h"
#include "harness/process/stack_dump.h"
#include "harness/rank_outcome.h"
#include "harness/spawn/zygote.h"

namespace disttest::internal {
namespace {

// Closes every descriptor from `from` up, with one async-signal-safe call
// (CanCloseFrom() said it works).
void CloseFrom(int from) {
#ifdef SYS_close_range
  syscall(SYS_close_range, static_cast<unsigned>(from), ~0U, 0);
#else
  (void)from;
#endif
}

// Writes a fixed message to stderr with raw calls only (safe after fork).
void RawError(const char* what) {
  int saved = errno;
  (void)!write(STDERR_FILENO, "disttest: ", 10);
  (void)!write(STDERR_FILENO, what, std::strlen(what));
  (void)!write(STDERR_FILENO, ": ", 2);
  const char* reason = strerrordesc_np(saved);
  if (reason != nullptr)
    (void)!write(STDERR_FILENO, reason, std::strlen(reason));
  (void)!write(STDERR_FILENO, "\n", 1);
}

// What a rank finds in its environment beyond its RankEnv, in either mode.
std::vector<std::pair<std::string, std::string>> HarnessVariables(
    const SpawnRequest& request) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {env::kInternalResultQueue, request.result_queue},
      {env::kInternalStoreToken, request.store_token}};
  if (request.results_ready_fd >= 0) {
    vars.emplace_back(env::kInternalResultsReadyFd,
                      std::to_string(request.results_ready_fd));
  }
  vars.insert(vars.end(), request.extra_env.begin(), request.extra_env.end());
  return vars;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

class ForkSpawner : public RankSpawner {
 public:
  explicit ForkSpawner(RankEntry entry) : entry_(std::move(entry)) {}

 protected:
  // The rank's environment is built here, before fork(), as an exec'd
  // rank's is (ChildEnvironment); the child only points environ at it.
  void Prepare(const SpawnRequest& request) override {
    env_ = ChildEnvironment(request.rank, HarnessVariables(request));
    envp_ = Pointers(env_);
  }

  [[noreturn]] void RunChild(const SpawnRequest& request) override {
    environ = envp_.data();
    // The parent runs no thread of its own (WarnIfThreaded says when the
    // test's code started one), so the allocator is usable from here on.
    EmergencyCleanup::ResetInChild();
    ResetInterruptsInChild();
    // stdio now writes to a pipe: line buffering shows a hung rank's last
    // words instead of keeping them in a buffer.
    setvbuf(stdout, nullptr, _IOLBF, 0);
    // The mappings came with the fork.
    if (request.ledger != nullptr) {
      Ledger::Install(request.ledger, request.rank.rank);
    }
    entry_(request.arena);
    _exit(kExitHarnessError);  // entry_ must not return.
  }

 private:
  RankEntry entry_;
  std::vector<std::string> env_;
  std::vector<char*> envp_;
};

class ExecSpawner : public RankSpawner {
 public:
  // A fork of the zygote (harness/spawn/zygote.h), else fork and exec.
  pid_t Spawn(const SpawnRequest& request) override {
    if (ZygoteEnabled()) {
      Prepare(request);
      const pid_t pid = Zygote::Get().Spawn(request, args_, env_);
      if (pid > 0) return pid;
    }
    return RankSpawner::Spawn(request);
  }

 protected:
  void Prepare(const SpawnRequest& request) override {
    args_.clear();
    for (std::string& arg : ReadCommandLine()) {
      if (args_.empty() || !IsParentOnlyFlag(arg)) args_.push_back(arg);
    }
    if (args_.empty()) throw SpawnError("cannot read /proc/self/cmdline");
    args_.push_back("--gtest_filter=" + GtestFilterOf(request.test_name));
    args_.push_back("--gtest_also_run_disabled_tests");
    std::vector<std::pair<std::string, std::string>> extra =
        HarnessVariables(request);
    extra.emplace_back(env::kInternalChildTest, request.test_name);
    if (ArenaDescriptor(request) >= 0) {
      extra.emplace_back(env::kInternalArenaFd,
                         std::to_string(ArenaDescriptor(request)));
    }
    if (LedgerDescriptor(request) >= 0) {
      extra.emplace_back(env::kInternalLedgerFd,
                         std::to_string(LedgerDescriptor(request)));
    }
    env_ = ChildEnvironment(request.rank, extra);
    argv_ = Pointers(args_);
    envp_ = Pointers(env_);
  }

  [[noreturn]] void RunChild(const SpawnRequest& request) override {
    // Only this child's copy of the descriptor loses close-on-exec.
    if (ArenaDescriptor(request) >= 0) {
      fcntl(ArenaDescriptor(request), F_SETFD, 0);
    }
    if (LedgerDescriptor(request) >= 0) {
      fcntl(LedgerDescriptor(request), F_SETFD, 0);
    }
    if (request.results_ready_fd >= 0) {
      fcntl(request.results_ready_fd, F_SETFD, 0);
    }
    // /proc/self/exe: the binary itself, whatever argv[0] and the cwd say.
    execve("/proc/self/exe", argv_.data(), envp_.data());
    RawError("cannot exec /proc/self/exe");
    _exit(kExitExecFailed);
  }

 private:
  // The arena's memfd, which the rank keeps across exec; -1: none.
  static int ArenaDescriptor(const SpawnRequest& request) {
    return request.arena != nullptr ? request.arena->fd() : -1;
  }
  // The ledgers' memfd, kept the same way; -1: none.
  static int LedgerDescriptor(const SpawnRequest& request) {
    return request.ledger != nullptr ? request.ledger->fd() : -1;
  }

  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

}  // namespace

pid_t RankSpawner::Spawn(const SpawnRequest& request) {
  Prepare(request);
  // Buffered output would otherwise be written twice: once by the parent and
  // once by every child that inherits the buffer.
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  pid_t parent = getpid();
  // Before the fork: the child takes its slot with no lock.
  const int keeper_slot = keeper::Reserve();
  pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    throw SpawnError(fmt::format("cannot fork rank {}/{}: {}{}",
                                 request.rank.rank, request.rank.world_size,
                                 std::strerror(error),
                                 error == EAGAIN ? ProcessLimitsText() : ""));
  }
  if (pid == 0) StartChild(request, parent, keeper_slot);
  // Also set the group from the parent, so that it is in place before the
  // parent could signal it, whichever process runs first.
  setpgid(pid, request.pgid == 0 ? pid : request.pgid);
  return pid;
}

bool CanCloseFrom() {
  // A range above any descriptor: nothing to close where the call works
  // (Linux 5.9 and later, and not refused by a seccomp profile).
  static const bool works = [] {
#ifdef SYS_close_range
    return syscall(SYS_close_range, ~0U - 1, ~0U - 1, 0) == 0;
#else
    return false;
#endif
  }();
  return works;
}

int RankSpawner::OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

std::optional<RankOutcome> RankSpawner::Ended(pid_t pid, std::string* error) {
  siginfo_t info{};
  int rc = waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT);
  if (rc == 0 && info.si_pid == pid) return RankOutcome::FromSigInfo(info);
  if (rc < 0 && errno == ECHILD) {
    // disttest waits for its ranks with WNOWAIT and reaps them last: a
    // child that is gone was reaped by someone else in this process.
    *error = std::string(kReapedByOthers);
  } else if (rc < 0 && errno != EINTR) {
    *error = fmt::format("could not be waited for: {}", std::strerror(errno));
  }
  return std::nullopt;
}

std::optional<RankOutcome> RankSpawner::Reap(pid_t pid,
                                             Clock::time_point deadline) {
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 ||
         (got < 0 && errno == EINTR)) {
    if (Clock::now() >= deadline) break;
    poll(nullptr, 0, 1);  // Only after SIGKILL, so only briefly.
  }
  if (got != pid) return std::nullopt;
  return RankOutcome::FromWaitStatus(status);
}

void RankSpawner::Kill(pid_t pid) { kill(pid, SIGKILL); }

void RankSpawner::KillGroup(pid_t pgid) { kill(-pgid, SIGKILL); }

bool RankSpawner::Stopped(pid_t pid) { return internal::Stopped(pid); }

std::vector<std::string> RankSpawner::Stacks(
    const std::vector<pid_t>& pids, std::chrono::milliseconds deadline) {
  return DumpStacks(pids, deadline);
}

void RankSpawner::StartChild(const SpawnRequest& request, pid_t parent,
                             int keeper_slot) {
  setpgid(0, request.pgid);
  // A parent killed by SIGKILL or by ctest's timeout takes its ranks along
  // (its keeper ends them and what they started; harness/process/keeper.h).
  if (!keeper::DieWithParent(parent, keeper_slot)) {
    _exit(kExitHarnessError);
  }
  // Ranks never read the terminal: several processes would race for it.
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    close(null_fd);
  }
  if (dup2(request.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(request.stderr_fd, STDERR_FILENO) < 0) {
    RawError("cannot redirect the rank's output");
    _exit(kExitHarnessError);
  }
  if (request.stdout_fd > STDERR_FILENO) close(request.stdout_fd);
  if (request.stderr_fd > STDERR_FILENO &&
      request.stderr_fd != request.stdout_fd) {
    close(request.stderr_fd);
  }
  for (int fd : request.close_in_child) close(fd);
  if (request.close_from >= 0) CloseFrom(request.close_from);
  ResultChannel::SetInherited(request.channel);
  // Nothing may unwind out of the child into the parent's code (it would
  // run the rest of the parent's test as a second parent).
  try {
    RunChild(request);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: rank failed to start: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "disttest: rank failed to start\n");
  }
  std::fflush(stderr);
  _exit(kExitHarnessError);
}

void WarnIfThreaded(const std::string& test_name) {
  const std::size_t threads = ThreadCount();
  if (threads > 1) {
    std::fprintf(stderr,
                 "[ disttest ] warning: %s forks its ranks while the test "
                 "process runs %zu threads; a forked rank has only the "
                 "forking thread, and locks the others held stay locked. Use "
                 "options().launch = disttest::LaunchMode::kExec.\n",
                 test_name.c_str(), threads);
  }
}

std::unique_ptr<RankSpawner> MakeSpawner(LaunchMode mode,
                                         RankEntry fork_entry) {
  if (mode == LaunchMode::kExec) return std::make_unique<ExecSpawner>();
  return std::make_unique<ForkSpawner>(std::move(fork_entry));
}

}  // namespace disttest::internal
