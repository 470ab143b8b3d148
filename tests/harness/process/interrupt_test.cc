// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// SIGTERM and SIGINT while a test is supervised: the first is noted for the
// supervisor, a second ends the process at once, and outside a guard they
// do what they did before. Each case runs in a forked child.
#include "harness/process/interrupt.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <utility>

namespace disttest::internal {
namespace {

// How a child that runs `body` ends: its exit code, or 128 + its signal.
int ChildEnds(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

TEST(InterruptTest, TheFirstSignalIsNotedAndTheProcessGoesOn) {
  for (int sig : {SIGTERM, SIGINT}) {
    EXPECT_EQ(ChildEnds([sig] {
                InterruptGuard guard;
                raise(sig);
                return PendingInterrupt() == sig ? 7 : 1;
              }),
              7);
  }
}

// Ctrl-C twice, or a SIGINT after a SIGTERM or the other way round: the
// process ends at once.
TEST(InterruptTest, ASecondSignalEndsTheProcessAtOnce) {
  for (auto [first, second] :
       {std::pair{SIGINT, SIGINT}, std::pair{SIGTERM, SIGINT},
        std::pair{SIGINT, SIGTERM}}) {
    EXPECT_EQ(ChildEnds([first, second] {
                InterruptGuard guard;
                raise(first);
                raise(second);
                return 1;  // Not reached.
              }),
              128 + second);
  }
}

// Slurm's time limit sends a step's processes SIGTERM twice, and its
// process group a third, from two daemons, seconds apart on a loaded node:
// one request, which the test in flight reports, however late the repeat,
// and also after the test, until the process ends by it (FinishInterrupted,
// below).
TEST(InterruptTest, ASigtermRepeatedIsTheSameRequestUntilTheEnd) {
  EXPECT_EQ(ChildEnds([] {
              {
                InterruptGuard guard;
                raise(SIGTERM);
                raise(SIGTERM);
                timespec wait{1, 200000000};  // Seconds after the first.
                nanosleep(&wait, nullptr);
                raise(SIGTERM);
              }
              raise(SIGTERM);  // After the test, before gtest's XML.
              return PendingInterrupt() == SIGTERM ? 7 : 1;
            }),
            7);
}

TEST(InterruptTest, FinishingEndsTheProcessByTheSignalThatCame) {
  EXPECT_EQ(ChildEnds([] {
              {
                InterruptGuard guard;
                raise(SIGINT);
              }
              FinishInterrupted();
              return 1;  // Not reached.
            }),
            128 + SIGINT);
  // Without a signal, finishing does nothing.
  EXPECT_EQ(ChildEnds([] {
              FinishInterrupted();
              return 3;
            }),
            3);
}

TEST(InterruptTest, OutsideAGuardTheSignalDoesWhatItDidBefore) {
  EXPECT_EQ(ChildEnds([] {
              { InterruptGuard guard; }
              raise(SIGTERM);
              return 1;
            }),
            128 + SIGTERM);
}

}  // namespace
}  // namespace disttest::internal
