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
#include "harness/rank_outcome.h"

namespace disttest::internal {
namespace {

constexpr std::uint32_t kMagic = 0x5947595a;  // "ZYGY"
// Which descriptors come with a message, in this order.
enum : std::uint32_t {
  kStdout = 1,
  kStderr = 2,
  kArena = 4,
  kResultsReady = 8,
  kLedger = 16,
};
constexpr int kMaxDescriptors = 5;

// A message's fixed part; then, each ending in NUL: the working directory,
// the --gtest_filter argument and the environment's "NAME=value" strings.
struct Header {
  std::uint32_t magic;
  std::int32_t pgid;  // 0: lead a new group.
  std::uint32_t descriptors;
  std::uint32_t umask;
  std::uint64_t files_soft;  // RLIMIT_NOFILE
  std::uint64_t files_hard;
};

// The zygote's answer: the rank's pid (-1: none started).
struct Answer {
  std::int32_t pid;
};

// How long the zygote may take to answer (the first time, it is still
// being loaded).
constexpr int kAnswerMs = 10'000;

// --- In the zygote and its forks, before the program's own start-up:
// only what needs no initialised program (no iostreams, no fmt). ---

// `error`: the errno of the call that failed, or 0.
[[noreturn]] void Fail(const char* what, int error = 0) {
  if (error != 0) {
    std::fprintf(stderr, "disttest: a kExec rank could not start: %s: %s\n",
                 what, std::strerror(error));
  } else {
    std::fprintf(stderr, "disttest: a kExec rank could not start: %s\n", what);
  }
  std::fflush(stderr);
  _exit(kExitHarnessError);
}

struct Message {
  Header header{};
  std::vector<char> bytes;
  std::vector<const char*> strings;  // cwd, filter, environment.
  int fds[kMaxDescriptors] = {-1, -1, -1, -1, -1};
  int nfds = 0;
  // The descriptor that came for `bit`, or -1.
  int Fd(std::uint32_t bit) const {
    if ((header.descriptors & bit) == 0) return -1;
    int at = 0;
    for (std::uint32_t b = 1; b < bit; b <<= 1) {
      if ((header.descriptors & b) != 0) ++at;
    }
    return fds[at];
  }
};

// Waits for the next message; false when the parent closed the socket.
bool Receive(int socket, Message* m) {
  ssize_t size = 0;
  do {
    size = recv(socket, nullptr, 0, MSG_PEEK | MSG_TRUNC);
  } while (size < 0 && errno == EINTR);
  if (size <= 0) return false;
  m->bytes.assign(static_cast<std::size_t>(size), '\0');
  iovec iov{m->bytes.data(), m->bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got = 0;
  do {
    got = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got != size || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      got < static_cast<ssize_t>(sizeof(Header))) {
    Fail("a short message from the parent");
  }
  std::memcpy(&m->header, m->bytes.data(), sizeof m->header);
  if (m->header.magic != kMagic) Fail("not a message from the parent");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    m->nfds = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    std::memcpy(m->fds, CMSG_DATA(c), sizeof(int) * m->nfds);
  }
  if (m->nfds != __builtin_popcount(m->header.descriptors)) {
    Fail("descriptors missing from the parent's message");
  }
  m->strings.clear();
  for (std::size_t at = sizeof(Header); at < m->bytes.size();) {
    const char* s = m->bytes.data() + at;
    const std::size_t n = strnlen(s, m->bytes.size() - at);
    if (at + n >= m->bytes.size()) Fail("an unterminated message");
    m->strings.push_back(s);
    at += n + 1;
  }
  if (m->strings.size() < 2) Fail("a message without a filter");
  return true;
}

// In the rank (the zygote's grandchild): takes what came for it. It is in
// its group already (the middle process put it there).
void TakeTheRank(const Message& m, pid_t parent, int go, int argc,
                 char** argv) {
  // Nothing until the parent, which the zygote sent this rank's pid and
  // the other end of `go`, says go: a rank the parent does not know of
  // never runs. If no one can (the zygote ended before it sent them, or the
  // parent is gone), this process exits unseen. By then the middle process
  // has exited: this is the parent's child, and may ask to die with it.
  char byte = 0;
  ssize_t got;
  while ((got = read(go, &byte, 1)) < 0 && errno == EINTR) {
  }
  close(go);
  if (got != 1) _exit(kExitHarnessError);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
    _exit(kExitHarnessError);
  }
  // As RankSpawner::StartChild does for a rank it forks.
  const int out = m.Fd(kStdout), err = m.Fd(kStderr);
  if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 ||
      dup2(err, STDERR_FILENO) < 0) {
    Fail("cannot redirect the rank's output", errno);
  }
  close(out);
  if (err != out) close(err);
  if (chdir(m.strings[0]) != 0) {
    Fail("cannot enter the working directory", errno);
  }
  // The test process's limit and mask of the moment, not the zygote's.
  const rlimit files{static_cast<rlim_t>(m.header.files_soft),
                     static_cast<rlim_t>(m.header.files_hard)};
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
    Fail("cannot take the open-files limit", errno);
  }
  umask(static_cast<mode_t>(m.header.umask));
  int filter = -1;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], Zygote::kPlaceholderFilter) == 0) filter = i;
  }
  if (filter < 0) Fail("no placeholder filter in the command line");
  // The descriptors a rank keeps across exec, at the numbers they came at
  // (its environment names them).
  const int arena = m.Fd(kArena), ready = m.Fd(kResultsReady);
  const int ledger = m.Fd(kLedger);
  if (arena >= 0) fcntl(arena, F_SETFD, 0);
  if (ready >= 0) fcntl(ready, F_SETFD, 0);
  if (ledger >= 0) fcntl(ledger, F_SETFD, 0);
  const std::string arena_var = std::string(env::kInternalArenaFd) + "=";
  const std::string ledger_var = std::string(env::kInternalLedgerFd) + "=";
  const std::string ready_var = std::string(env::kInternalResultsReadyFd) + "=";
  // The filter argument and the environment, in one block that stays
  // reachable from a global, as an exec'd process's live on its stack:
  // environ and argv point into it, and neither unsetenv() nor
  // LeakSanitizer finds a string to lose.
  std::string all = std::string(m.strings[1]) + '\0';
  std::vector<std::size_t> vars;
  for (std::size_t i = 2; i < m.strings.size(); ++i) {
    const std::string_view var = m.strings[i];
    vars.push_back(all.size());
    if (var.starts_with(arena_var)) {
      all += arena_var + std::to_string(arena);
    } else if (var.starts_with(ready_var)) {
      all += ready_var + std::to_string(ready);
    } else if (var.starts_with(ledger_var)) {
      all += ledger_var + std::to_string(ledger);
    } else {
      all += var;
    }
    all += '\0';
  }
  static char* block = nullptr;
  block = static_cast<char*>(std::malloc(all.size()));
  if (block == nullptr) Fail("no memory for the rank's environment");
  std::memcpy(block, all.data(), all.size());
  argv[filter] = block;
  clearenv();
  for (std::size_t at : vars) putenv(block + at);
}

// The zygote: forks a rank for each message, until the socket closes.
// Returns only in a rank.
void Serve(int socket, pid_t parent, int argc, char** argv) {
  const bool die_before_answer = SetToOne(env::kInternalZygoteDieBeforeAnswer);
  Message m;
  while (Receive(socket, &m)) {
    // `go`: the rank waits on one end; the other goes to the parent with
    // the rank's pid, and the parent says go (a socket: a rank gone by then
    // costs the parent no SIGPIPE).
    int done[2], go[2];
    if (pipe2(done, O_CLOEXEC) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
      Fail("pipe", errno);
    }
    const pid_t middle = fork();
    if (middle == 0) {
      close(done[0]);
      close(go[1]);
      const pid_t rank = fork();
      if (rank == 0) {
        close(socket);
        close(done[1]);
        TakeTheRank(m, parent, go[0], argc, argv);
        return;
      }
      close(go[0]);
      // Its parent until this exits (and it has not exec'd), this process
      // may put it into the ranks' group, before the parent could signal
      // the group and before the next rank joins it. Then its pid, and go.
      std::int32_t pid = rank;
      if (rank > 0 &&
          setpgid(rank, m.header.pgid == 0 ? rank : m.header.pgid) != 0) {
        kill(rank, SIGKILL);
        while (waitpid(rank, nullptr, 0) < 0 && errno == EINTR) {
        }
        pid = -1;
      }
      signal(SIGPIPE, SIG_IGN);  // A zygote gone: just go.
      _exit(write(done[1], &pid, sizeof pid) == sizeof pid ? 0 : 1);
    }
    close(done[1]);
    close(go[0]);
    Answer answer{-1};
    if (middle > 0) {
      while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
      }
      if (read(done[0], &answer.pid, sizeof answer.pid) != sizeof answer.pid) {
        answer.pid = -1;
      }
    }
    close(done[0]);
    if (die_before_answer) _exit(0);
    for (int i = 0; i < m.nfds; ++i) close(m.fds[i]);
    // The pid and, with it, the rank's go: once sent, both reach the
    // parent whatever happens to this process.
    iovec iov{&answer, sizeof answer};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (answer.pid > 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &go[1], sizeof(int));
    }
    const bool sent = sendmsg(socket, &msg, MSG_NOSIGNAL) ==
                      static_cast<ssize_t>(sizeof answer);
    close(go[1]);  // A rank the parent never heard of sees it close: exits.
    if (!sent) _exit(0);
  }
  _exit(0);  // The parent ended the zygote.
}

// Before the program's static initialisers (priorities 0-100 are the
// implementation's): nothing of the program has run yet.
__attribute__((constructor(101))) void ZygoteConstructor(int argc, char** argv,
                                                         char**) {
  const char* fd = std::getenv(env::kInternalZygoteFd);
  const char* parent = std::getenv(env::kInternalZygoteParent);
  if (fd == nullptr) return;
  const pid_t owner = parent != nullptr ? std::atol(parent) : -1;
  // A parent that died before this line is not ours to serve.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != owner) {
    _exit(kExitHarnessError);
  }
  Serve(std::atoi(fd), owner, argc, argv);
}

// Reads the zygote's answer from `socket` and, for a rank it started,
// tells that rank to go. False when there is none.
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
    const char byte = 1;
    if (send(go, &byte, 1, MSG_NOSIGNAL) != 1) {
      // The rank is gone already (killed from outside); its end tells.
    }
    close(go);
  }
  return true;
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
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return false;
  }
  std::vector<std::string> env = EnvironmentNow();
  std::erase_if(env, [](const std::string& v) {
    return v.rfind(std::string(env::kInternalZygoteFd) + "=", 0) == 0 ||
           v.rfind(std::string(env::kInternalZygoteParent) + "=", 0) == 0;
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
  std::vector<int> fds;
  const auto add = [&](std::uint32_t bit, int fd) {
    if (fd < 0) return;
    header.descriptors |= bit;
    fds.push_back(fd);
  };
  add(kStdout, request.stdout_fd);
  add(kStderr, request.stderr_fd);
  add(kArena, request.arena != nullptr ? request.arena->fd() : -1);
  add(kResultsReady, request.results_ready_fd);
  add(kLedger, request.ledger != nullptr ? request.ledger->fd() : -1);
  std::string message(reinterpret_cast<const char*>(&header), sizeof header);
  for (const std::string& s : {cwd, args[filter]}) message.append(s) += '\0';
  for (const std::string& s : env) message.append(s) += '\0';

  iovec iov{message.data(), message.size()};
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
  const auto give_up = [&](const std::string& why) {
    End();
    broken_ = true;
    std::printf(
        "[ disttest ] note: the kExec zygote failed (%s); ranks are exec'd "
        "one by one from now on\n",
        why.c_str());
    std::fflush(stdout);
  };
  if (sendmsg(socket_, &msg, MSG_NOSIGNAL) !=
      static_cast<ssize_t>(message.size())) {
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
