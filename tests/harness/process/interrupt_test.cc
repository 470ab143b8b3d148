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

TEST(InterruptTest, ASecondSignalEndsTheProcessAtOnce) {
  for (int sig : {SIGTERM, SIGINT}) {
    EXPECT_EQ(ChildEnds([sig] {
                InterruptGuard guard;
                raise(sig);
                if (sig == SIGTERM) {
                  // Past the window in which it is the first one repeated.
                  timespec wait{0, kRepeatedTermWindowNs + 100'000'000LL};
                  wait.tv_sec = wait.tv_nsec / 1'000'000'000LL;
                  wait.tv_nsec %= 1'000'000'000LL;
                  nanosleep(&wait, nullptr);
                }
                raise(sig);
                return 1;  // Not reached.
              }),
              128 + sig);
  }
  // Another signal than the first, at once.
  EXPECT_EQ(ChildEnds([] {
              InterruptGuard guard;
              raise(SIGTERM);
              raise(SIGINT);
              return 1;  // Not reached.
            }),
            128 + SIGINT);
}

// Slurm's time limit sends a step's processes SIGTERM twice within
// milliseconds: one request, which the test in flight reports.
TEST(InterruptTest, ASigtermRepeatedAtOnceIsTheSameRequest) {
  EXPECT_EQ(ChildEnds([] {
              InterruptGuard guard;
              raise(SIGTERM);
              raise(SIGTERM);
              raise(SIGTERM);
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
