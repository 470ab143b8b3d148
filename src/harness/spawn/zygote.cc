// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/spawn/zygote.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/child_process.h"
#include "base/descriptors.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "harness/process/keeper.h"
#include "harness/rank_outcome.h"
#include "harness/spawn/zygote_wire.h"

namespace disttest::internal {
namespace {

using namespace zygote_wire;  // NOLINT: the protocol's own names.

// Reads the zygote's answer from `socket` and, for a rank it started,
// tells that rank to go: kGoAndStop once this process's keeper knows it,
// else kGo. False when there is none.
bool TakeAnswer(int socket, int flags, Answer* answer) {
  iovec iov{answer, sizeof *answer};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  while ((got = recvmsg(socket, &msg, flags | MSG_CMSG_CLOEXEC)) < 0 &&
         errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof *answer)) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int go = -1;
    std::memcpy(&go, CMSG_DATA(c), sizeof go);
    const int slot = keeper::Reserve();
    const char byte = slot >= 0 && keeper::Record(slot, answer->pid)
                          ? kGoAndStopWithParent
                          : kGo;
    if (send(go, &byte, 1, MSG_NOSIGNAL) != 1) {
      // The rank is gone already (killed from outside); its end tells.
    }
    close(go);
  }
  return true;
}

// The message that starts one rank (zygote_wire.h): its process group,
// umask and open-files limit, working directory, filter and environment;
// the descriptors that go with it in `fds`, in the order of their bits.
std::string StartMessage(const SpawnRequest& request, const std::string& cwd,
                         const std::string& filter,
                         const std::vector<std::string>& env,
                         std::vector<int>* fds) {
  const mode_t mask = umask(0);
  umask(mask);
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  Header header{kMagic,
                request.pgid,
                0,
                static_cast<std::uint32_t>(mask),
                static_cast<std::uint64_t>(files.rlim_cur),
                static_cast<std::uint64_t>(files.rlim_max)};
  const auto add = [&](std::uint32_t bit, int fd) {
    if (fd < 0) return;
    header.descriptors |= bit;
    fds->push_back(fd);
  };
  add(kStdout, request.stdout_fd);
  add(kStderr, request.stderr_fd);
  add(kArena, request.arena != nullptr ? request.arena->fd() : -1);
  add(kResultsReady, request.results_ready_fd);
  add(kLedger, request.ledger != nullptr ? request.ledger->fd() : -1);
  std::string message(reinterpret_cast<const char*>(&header), sizeof header);
  for (const std::string& s : {cwd, filter}) message.append(s) += '\0';
  for (const std::string& s : env) message.append(s) += '\0';
  return message;
}

// Sends `message` with `fds` (SCM_RIGHTS) in one datagram; false, with errno
// set, when it did not go whole.
bool SendWithDescriptors(int socket, const std::string& message,
                         const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(message.data()), message.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  return sendmsg(socket, &msg, MSG_NOSIGNAL) ==
         static_cast<ssize_t>(message.size());
}

// This process's descriptors above stderr without close-on-exec.
std::vector<int> InheritableDescriptors() {
  std::vector<int> fds;
  for (int fd : OpenDescriptors().value_or(std::vector<int>{})) {
    const int flags = fcntl(fd, F_GETFD);
    if (fd > STDERR_FILENO && flags >= 0 && (flags & FD_CLOEXEC) == 0) {
      fds.push_back(fd);
    }
  }
  return fds;
}

}  // namespace

bool ZygoteEnabled() { return !SetToOne(env::kNoZygote); }

Zygote& Zygote::Get() {
  static Zygote zygote;
  return zygote;
}

Zygote::Zygote() : owner_(getpid()) {}

Zygote::~Zygote() {
  if (getpid() == owner_) End();
}

void Zygote::End() {
  if (socket_ >= 0) close(socket_);  // It exits when it sees it close...
  socket_ = -1;
  Reap();  // ...or now.
}

void Zygote::Reap() {
  if (pid_ <= 0) return;
  // Unless the test's own wait() reaped it (then the pid may be someone
  // else's by now).
  if (waitpid(pid_, nullptr, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

bool Zygote::Start(const std::vector<std::string>& args) {
  // Without the server's constructor in this binary a zygote would run the
  // program instead of serving: every rank is exec'd then.
  if (!ServerLinked()) return false;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return false;
  }
  std::vector<std::string> env = EnvironmentNow();
  std::erase_if(env, [](const std::string& v) {
    auto assigns = [&v](std::string_view name) {
      return v.starts_with(name) && v.size() > name.size() &&
             v[name.size()] == '=';
    };
    return assigns(env::kInternalZygoteFd) ||
           assigns(env::kInternalZygoteParent);
  });
  env.push_back(fmt::format("{}={}", env::kInternalZygoteParent, getpid()));
  env.push_back(fmt::format("{}={}", env::kInternalZygoteFd, sv[1]));
  std::vector<char*> argv, envp;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Ranks get their own output; stderr stays for a zygote that fails.
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  // dup2 onto itself clears close-on-exec (glibc 2.29 and later).
  posix_spawn_file_actions_adddup2(&actions, sv[1], sv[1]);
  // Nothing else of this process's: the zygote lives as long as it does, and
  // would keep a pipe's write end (say) open all that time. Its ranks get
  // their descriptors with each message.
  for (int fd : InheritableDescriptors()) {
    if (fd != sv[1]) posix_spawn_file_actions_addclose(&actions, fd);
  }
  // posix_spawn uses vfork: no copy of this process's page tables.
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                             argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    return false;
  }
  pid_ = pid;
  socket_ = sv[0];
  args_ = args;
  return true;
}

pid_t Zygote::Spawn(const SpawnRequest& request,
                    const std::vector<std::string>& args,
                    const std::vector<std::string>& env) {
  if (getpid() != owner_ || broken_ || !ZygoteEnabled()) return -1;
  int filter = -1;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--gtest_filter=", 0) == 0) filter = static_cast<int>(i);
  }
  if (filter < 0) return -1;
  std::vector<std::string> theirs = args;
  theirs[filter] = kPlaceholderFilter;
  if (pid_ > 0 && theirs != args_) End();
  if (pid_ <= 0 && !Start(theirs)) {
    broken_ = true;
    return -1;
  }
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  if (ec) return -1;

  std::vector<int> fds;
  const std::string message =
      StartMessage(request, cwd, args[filter], env, &fds);
  const auto give_up = [&](const std::string& why) {
    End();
    broken_ = true;
    std::printf(
        "[ disttest ] note: the kExec zygote failed (%s); ranks are exec'd "
        "one by one from now on\n",
        why.c_str());
    std::fflush(stdout);
  };
  if (!SendWithDescriptors(socket_, message, fds)) {
    // Nothing was started: the zygote is gone (or the environment is too
    // large for one message); exec this rank and every one after it.
    const int error = errno;
    give_up(error == EMSGSIZE
                ? fmt::format("an environment of {} bytes is too large for "
                              "one message",
                              message.size())
                : std::string(std::strerror(error)));
    return -1;
  }
  Answer answer{-1};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kAnswerMs);
  int polled = -1;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{socket_, POLLIN, 0};
    polled = poll(&ready, 1, static_cast<int>(std::max<long>(0, left.count())));
    if (polled >= 0 || errno != EINTR) break;
  }
  if (polled != 1 || !TakeAnswer(socket_, 0, &answer)) {
    // The zygote sends a rank's pid and its go together. Once the zygote
    // is dead, either they are in the socket, or that rank never runs (it
    // sees its go's socket close and exits; it stays a zombie child of
    // this process until this process ends, at most one a run, as the
    // zygote is not used again): exec it instead.
    const std::string what =
        polled == 0 ? fmt::format("it did not answer within {} ms", kAnswerMs)
                    : std::string("it ended");
    Reap();
    const bool late = TakeAnswer(socket_, MSG_DONTWAIT, &answer);
    give_up(what);
    return late ? answer.pid : -1;
  }
  // -1: the fork failed (the zygote goes on); exec this rank instead. A rank
  // that forked but cannot set itself up says why on its stderr and exits
  // with kExitHarnessError, as an exec that failed would.
  return answer.pid;
}

}  // namespace disttest::internal
