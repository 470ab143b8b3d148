// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The zygote's side (zygote.h): in the zygote process, before the program's
// own start-up, it forks a rank for each message of the test process.
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
#include "harness/spawn/zygote.h"
#include "harness/spawn/zygote_wire.h"

namespace disttest::internal {
namespace {

using namespace zygote_wire;  // NOLINT: the protocol's own names.

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
  if (!keeper::DieWithParent(
          parent, byte == kGoAndStopWithParent ? keeper::kRecorded : -1)) {
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

}  // namespace

bool zygote_wire::ServerLinked() { return true; }

}  // namespace disttest::internal
