// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A rank that stops when its parent ends (harness/process/keeper.h), and
// the hangup that the kernel sends a process group of stopped processes
// that the parent's end orphaned: once the parent has ended, SIGHUP leaves
// the rank to the keeper; while the parent runs, it ends the rank as by
// default. (The whole keeper, with a test process killed mid-test:
// VerdictsTest.ParentKilledMidTestTakesWhatItsRanksStarted.)
#include "harness/process/keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace disttest::internal {
namespace {

// A rank of `parent`, as the harness starts one: it stops when `parent`
// ends. Writes its pid to `ready` once it has asked to, and waits.
[[noreturn]] void BeARank(pid_t parent, int ready) {
  if (!keeper::DieWithParent(parent, keeper::kRecorded)) _exit(3);
  const pid_t me = getpid();
  if (write(ready, &me, sizeof me) != sizeof me) _exit(4);
  for (;;) pause();
}

pid_t ReadPid(int fd) {
  pid_t pid = -1;
  ssize_t got;
  while ((got = read(fd, &pid, sizeof pid)) < 0 && errno == EINTR) {
  }
  return got == sizeof pid ? pid : -1;
}

// The signal that ends `rank` (a child of this process) sent SIGHUP, then
// SIGTERM, then SIGCONT: SIGHUP if the hangup ended it, SIGTERM if it left
// it alone (pending together, the lower number comes first).
int EndedBy(pid_t rank) {
  kill(rank, SIGHUP);
  kill(rank, SIGTERM);
  kill(rank, SIGCONT);
  int status = 0;
  while (waitpid(rank, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

TEST(KeeperTest, AHangupEndsARankWhoseParentRuns) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t parent = getpid();
  const pid_t rank = fork();
  ASSERT_GE(rank, 0);
  if (rank == 0) BeARank(parent, ready[1]);
  close(ready[1]);
  EXPECT_EQ(ReadPid(ready[0]), rank);
  close(ready[0]);
  EXPECT_EQ(EndedBy(rank), SIGHUP);
}

// The kernel's hangup comes with a SIGCONT to every process of the group,
// once the parent has ended; a rank it ended would leave what it started
// to init before the keeper looked.
TEST(KeeperTest, AHangupOnceTheParentEndedLeavesTheRankToTheKeeper) {
  // The rank comes to this process when its parent ends.
  int subreaper = 0;
  ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &subreaper), 0);
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    const pid_t me = getpid();
    if (fork() == 0) BeARank(me, ready[1]);
    close(ready[1]);
    for (;;) pause();
  }
  close(ready[1]);
  const pid_t rank = ReadPid(ready[0]);
  close(ready[0]);
  ASSERT_GT(rank, 0);
  kill(parent, SIGKILL);
  ASSERT_EQ(waitpid(parent, nullptr, 0), parent);
  // Its parent gone, the rank is this process's, and stops (or has).
  EXPECT_EQ(EndedBy(rank), SIGTERM);
  prctl(PR_SET_CHILD_SUBREAPER, subreaper);
}

}  // namespace
}  // namespace disttest::internal
