// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/process_hygiene.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

namespace disttest::internal {

void ClaimStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // open() returns the lowest free descriptor: this one, as the lower
    // ones are open by now.
    const int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (got >= 0 && got != fd) close(got);  // Not ours to place.
  }
}

std::vector<std::string> PrepareSignals() {
  static bool told_chld = false;
  static bool told_mask = false;
  std::vector<std::string> notes;

  struct sigaction chld {};
  sigaction(SIGCHLD, nullptr, &chld);
  const bool ignored =
      (chld.sa_flags & SA_SIGINFO) == 0 && chld.sa_handler == SIG_IGN;
  if (ignored || (chld.sa_flags & SA_NOCLDWAIT) != 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (!ignored) {  // A handler of the program's own stays; the flag goes.
      dfl = chld;
      dfl.sa_flags &= ~SA_NOCLDWAIT;
    }
    sigaction(SIGCHLD, &dfl, nullptr);
    if (!told_chld) {
      told_chld = true;
      notes.push_back(
          ignored ? "SIGCHLD was ignored (SIG_IGN, set by this program or "
                    "whatever started it), which reaps the ranks before they "
                    "can be waited for: set back to the default"
                  : "SIGCHLD's handler had SA_NOCLDWAIT, which reaps the "
                    "ranks before they can be waited for: the flag is "
                    "cleared, the handler kept");
    }
  }

  sigset_t blocked;
  sigemptyset(&blocked);
  pthread_sigmask(SIG_SETMASK, nullptr, &blocked);
  sigset_t needed;
  sigemptyset(&needed);
  std::string names;
  int count = 0;
  for (auto [sig, name] : {std::pair{SIGTERM, "SIGTERM"},
                           {SIGINT, "SIGINT"},
                           {SIGCHLD, "SIGCHLD"},
                           {SIGUSR2, "SIGUSR2"}}) {
    if (sigismember(&blocked, sig) != 1) continue;
    sigaddset(&needed, sig);
    ++count;
    names += names.empty() ? "" : ", ";
    names += name;
  }
  if (!names.empty()) {
    pthread_sigmask(SIG_UNBLOCK, &needed, nullptr);
    if (!told_mask) {
      told_mask = true;
      notes.push_back(
          names + (count == 1 ? " was" : " were") +
          " blocked (by this program or whatever started it): "
          "unblocked, so that a SIGTERM (ctest's TIMEOUT) or Ctrl-C ends a "
          "test with its report and a hung rank's stack can be taken");
    }
  }
  return notes;
}

}  // namespace disttest::internal
