// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/child_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>

namespace disttest::internal {
namespace {

using std::chrono::milliseconds;
using Clock = ChildProcess::Clock;

TEST(ChildProcessTest, CapturesStdoutAndStderrAndTheExitStatus) {
  ChildProcess p =
      ChildProcess::Start({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.Wait(Clock::now() + std::chrono::seconds(30)));
  EXPECT_FALSE(p.succeeded());
  EXPECT_EQ(p.Output(), "out\nerr\n");
  ChildProcess ok = ChildProcess::Start({"/bin/true"});
  ASSERT_TRUE(ok.Wait(Clock::now() + std::chrono::seconds(30)));
  EXPECT_TRUE(ok.succeeded());
}

TEST(ChildProcessTest, RunsWithTheEnvironmentItIsGiven) {
  ChildProcess p = ChildProcess::Start({"/bin/sh", "-c", "echo \"$ONLY\""},
                                       {"ONLY=this", "PATH=/usr/bin:/bin"});
  ASSERT_TRUE(p.Wait(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(p.Output(), "this\n");
}

TEST(ChildProcessTest, AChildPastItsDeadlineIsKilledAndReaped) {
  ChildProcess p = ChildProcess::Start({"/bin/sleep", "1000"});
  ASSERT_TRUE(p.started());
  EXPECT_FALSE(p.Wait(Clock::now() + milliseconds(50)));
  const pid_t pid = p.pid();
  p.Kill();
  EXPECT_TRUE(p.Wait(Clock::now()));
  EXPECT_FALSE(p.succeeded());
  // Reaped: no zombie of it is left to this process.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// A thread that holds a lock the child would need (the allocator's, say)
// cannot stop the child: it only makes raw calls until exec.
TEST(ChildProcessTest, StartsWhileAnotherThreadHoldsALock) {
  std::mutex held;
  std::unique_lock<std::mutex> lock(held);
  std::thread other([&] { std::lock_guard<std::mutex> wait(held); });
  ChildProcess p = ChildProcess::Start({"/bin/echo", "started"});
  ASSERT_TRUE(p.Wait(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(p.Output(), "started\n");
  lock.unlock();
  other.join();
}

TEST(ChildProcessTest, AProgramThatCannotRunFails) {
  ChildProcess p = ChildProcess::Start({"/nonexistent/program"});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.Wait(Clock::now() + std::chrono::seconds(30)));
  EXPECT_FALSE(p.succeeded());
  EXPECT_EQ(FindProgram("disttest-no-such-program"), "");
  EXPECT_THAT(FindProgram("sh"), ::testing::EndsWith("/sh"));
}

}  // namespace
}  // namespace disttest::internal
