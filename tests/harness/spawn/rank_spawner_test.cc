// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The rank spawner's promises (rank_spawner.h), with real processes: a
// forked rank runs its entry with the environment it was given, its output
// in the parent's pipes, in the process group it was given, without the
// parent's descriptors or terminal, and dies with its parent; how it ended
// comes back as a RankOutcome (Ended leaves it a zombie, Reap reaps it); a
// re-executed rank runs only its test, and an exec that fails says so.
#include "harness/spawn/rank_spawner.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/threads.h"
#include "disttest/env/names.h"
#include "env/internal_names.h"
#include "harness/rank_outcome.h"
#include "harness/spawn/process_helpers.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;
using ::testing::HasSubstr;

// Every wait of these tests: far beyond what any of them takes.
constexpr seconds kBound{60};

// What was written into each of `fds` until every writer closed it, or
// until `deadline` (then what came so far; *complete turns false).
std::vector<std::string> ReadUntilClosed(std::vector<int> fds,
                                         Clock::time_point deadline,
                                         bool* complete = nullptr) {
  std::vector<std::string> out(fds.size());
  if (complete != nullptr) *complete = true;
  for (;;) {
    std::vector<pollfd> open;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) continue;
      open.push_back({fds[i], POLLIN, 0});
      which.push_back(i);
    }
    if (open.empty()) return out;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      if (complete != nullptr) *complete = false;
      return out;
    }
    const int ready =
        poll(open.data(), open.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return out;
    for (std::size_t k = 0; k < open.size(); ++k) {
      if (open[k].revents == 0) continue;
      char buffer[4096];
      const ssize_t got = read(open[k].fd, buffer, sizeof buffer);
      if (got > 0) {
        out[which[k]].append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fds[which[k]] = -1;  // Closed by every writer.
      }
    }
  }
}

// What the rank wrote into `out` and `err` ([0] and [1]) until it closed
// them: the parent's write ends close first, so that only the rank's hold
// them open. At the bound, what came so far (*complete turns false).
std::vector<std::string> OutputOf(Pipe& out, Pipe& err,
                                  bool* complete = nullptr) {
  out.CloseWrite();
  err.CloseWrite();
  return ReadUntilClosed({out.read_end(), err.read_end()},
                         Clock::now() + kBound, complete);
}

// Writes `text` to the rank's stdout with one raw call.
void Say(const std::string& text) {
  (void)!write(STDOUT_FILENO, text.data(), text.size());
}

// The request of rank `rank` of `world`, its output into `out` and `err`.
SpawnRequest Request(int rank, int world, const Pipe& out, const Pipe& err) {
  SpawnRequest request;
  request.rank.rank = rank;
  request.rank.world_size = world;
  request.rank.local_rank = rank;
  request.rank.local_size = world;
  request.rank.master_port = 29999;
  request.test_name = "RankSpawnerTest.Fake/" + std::to_string(world) + "ranks";
  request.result_queue = "disttest-rank-spawner-test-queue";
  request.store_token = "the-store-token";
  request.stdout_fd = out.write_end();
  request.stderr_fd = err.write_end();
  // Not the rank's to hold: then only the rank keeps the write ends open.
  request.close_in_child = {out.read_end(), err.read_end()};
  return request;
}

class RankSpawnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A forked rank runs the entry's code, not only raw calls: the parent
    // must run no other thread (rank_spawner.h).
    ASSERT_EQ(ThreadCount(), 1u)
        << "these tests fork; the process must be single-threaded";
  }

  // Waits until `pid` has ended (it stays a zombie); false at the bound.
  static bool AwaitEnd(RankSpawner& spawner, pid_t pid) {
    const int fd = spawner.OpenPidFd(pid);
    if (fd >= 0) {
      pollfd ready{fd, POLLIN, 0};
      int rc;
      while ((rc = poll(&ready, 1,
                        static_cast<int>(
                            std::chrono::milliseconds(kBound).count()))) < 0 &&
             errno == EINTR) {
      }
      close(fd);
      return rc == 1;
    }
    // No pidfd (a kernel before 5.3): a wait that leaves it a zombie.
    siginfo_t info{};
    while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    return info.si_pid == pid;
  }

  // Waits for the rank's end, then reaps it; its outcome, or nullopt.
  static std::optional<RankOutcome> EndOf(RankSpawner& spawner, pid_t pid) {
    if (!AwaitEnd(spawner, pid)) return std::nullopt;
    return spawner.Reap(pid, Clock::now() + kBound);
  }

  Reaper reaper_;
};

TEST_F(RankSpawnerTest, AForkedRankRunsItsEntryAndItsExitStatusComesBack) {
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    Say("rank " + std::string(std::getenv(env::kRank)) + " says hello\n");
    (void)!write(STDERR_FILENO, "and complains\n", 14);
    _exit(7);
  });
  const pid_t pid = reaper_(spawner->Spawn(Request(2, 4, out, err)));
  ASSERT_GT(pid, 0);
  bool complete = false;
  const std::vector<std::string> said = OutputOf(out, err, &complete);
  ASSERT_TRUE(complete) << "the rank's output never closed";
  EXPECT_EQ(said[0], "rank 2 says hello\n");
  EXPECT_EQ(said[1], "and complains\n");

  ASSERT_TRUE(AwaitEnd(*spawner, pid));
  std::string error;
  const std::optional<RankOutcome> ended = spawner->Ended(pid, &error);
  ASSERT_TRUE(ended.has_value()) << error;
  EXPECT_TRUE(ended->exited());
  EXPECT_EQ(ended->exit_code(), 7);
  EXPECT_EQ(ended->str(), "exited with status 7");
  // Ended() leaves it for Reap: it is still this process's zombie.
  EXPECT_EQ(kill(pid, 0), 0);

  const std::optional<RankOutcome> reaped =
      spawner->Reap(pid, Clock::now() + kBound);
  ASSERT_TRUE(reaped.has_value());
  EXPECT_TRUE(reaped->exited());
  EXPECT_EQ(reaped->exit_code(), 7);
  // Reaped, it can no longer be waited for, and Ended() says so: as when
  // other code in the process (a SIGCHLD handler) reaps a rank.
  error.clear();
  EXPECT_FALSE(spawner->Ended(pid, &error).has_value());
  EXPECT_THAT(error, HasSubstr("was reaped by other code in the test process "
                               "(a SIGCHLD handler"));
}

TEST_F(RankSpawnerTest, ASignalThatEndsTheRankComesBackAsThatSignal) {
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &usr1, nullptr);
    signal(SIGUSR1, SIG_DFL);
    raise(SIGUSR1);
    _exit(0);
  });
  const pid_t pid = reaper_(spawner->Spawn(Request(0, 1, out, err)));
  ASSERT_GT(pid, 0);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->signaled());
  EXPECT_FALSE(outcome->exited());
  EXPECT_EQ(outcome->signal(), SIGUSR1);
  EXPECT_THAT(outcome->str(), HasSubstr("(SIGUSR1"));
}

TEST_F(RankSpawnerTest, AnEntryThatReturnsEndsTheRankAsAHarnessError) {
  Pipe out, err;
  auto spawner =
      MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {});
  const pid_t pid = reaper_(spawner->Spawn(Request(0, 1, out, err)));
  ASSERT_GT(pid, 0);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->exited());
  EXPECT_EQ(outcome->exit_code(), kExitHarnessError);
}

TEST_F(RankSpawnerTest, AnEntryThatThrowsEndsTheRankAsAHarnessErrorSayingWhy) {
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    throw std::runtime_error("no communicator today");
  });
  const pid_t pid = reaper_(spawner->Spawn(Request(0, 1, out, err)));
  ASSERT_GT(pid, 0);
  const std::vector<std::string> said = OutputOf(out, err);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->exited());
  EXPECT_EQ(outcome->exit_code(), kExitHarnessError);
  EXPECT_THAT(
      said[1],
      HasSubstr("disttest: rank failed to start: no communicator today"));
}

TEST_F(RankSpawnerTest, TheRankSeesTheEnvironmentItIsGiven) {
  // This process's own: inherited, except gtest's run-wide variables; a
  // rank variable of this process is replaced by the rank's own.
  ScopedVariable inherited("DISTTEST_SPAWNER_TEST_INHERITED",
                           "from the parent");
  ScopedVariable shard("GTEST_SHARD_INDEX", "3");
  ScopedVariable rank_here(env::kRank, "9");
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    std::string text;
    for (const char* name :
         {env::kRank, env::kWorldSize, env::kLocalRank, env::kMasterPort,
          env::kInternalResultQueue, env::kInternalStoreToken,
          "DISTTEST_SPAWNER_TEST_EXTRA", "DISTTEST_SPAWNER_TEST_INHERITED",
          "GTEST_SHARD_INDEX"}) {
      const char* value = std::getenv(name);
      text += std::string(name) + "=" + (value != nullptr ? value : "<unset>") +
              "\n";
    }
    int ranks = 0;  // Entries that set RANK: one, not the parent's as well.
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "RANK=", 5) == 0) ++ranks;
    }
    text += "RANK entries: " + std::to_string(ranks) + "\n";
    Say(text);
    _exit(0);
  });
  SpawnRequest request = Request(2, 4, out, err);
  request.extra_env = {{"DISTTEST_SPAWNER_TEST_EXTRA", "extra value"}};
  const pid_t pid = reaper_(spawner->Spawn(request));
  ASSERT_GT(pid, 0);
  const std::vector<std::string> said = OutputOf(out, err);
  EXPECT_EQ(
      said[0],
      std::string("RANK=2\nWORLD_SIZE=4\nLOCAL_RANK=2\nMASTER_PORT=29999\n") +
          env::kInternalResultQueue + "=disttest-rank-spawner-test-queue\n" +
          env::kInternalStoreToken +
          "=the-store-token\n"
          "DISTTEST_SPAWNER_TEST_EXTRA=extra value\n"
          "DISTTEST_SPAWNER_TEST_INHERITED=from the parent\n"
          "GTEST_SHARD_INDEX=<unset>\n"
          "RANK entries: 1\n");
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->exit_code(), 0);
  // The parent's own environment is as it was.
  EXPECT_STREQ(std::getenv(env::kRank), "9");
  EXPECT_EQ(std::getenv("DISTTEST_SPAWNER_TEST_EXTRA"), nullptr);
}

TEST_F(RankSpawnerTest, TheRankHasNoTerminalAndNoneOfTheParentsDescriptors) {
  Pipe out, err, listed, high;
  // A descriptor far above the others, for close_from: it and everything
  // above it go.
  const int above = fcntl(high.read_end(), F_DUPFD, 200);
  ASSERT_GE(above, 200);
  const bool can_close_from = CanCloseFrom();
  auto spawner =
      MakeSpawner(LaunchMode::kFork,
                  [&listed, above, can_close_from](std::shared_ptr<HostArena>) {
                    std::string text;
                    const auto closed = [](int fd) {
                      return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
                    };
                    text += std::string("listed closed: ") +
                            (closed(listed.write_end()) ? "yes" : "no") + "\n";
                    if (can_close_from) {
                      text += std::string("above closed: ") +
                              (closed(above) ? "yes" : "no") + "\n";
                    }
                    struct stat in {};
                    const bool null =
                        fstat(STDIN_FILENO, &in) == 0 && S_ISCHR(in.st_mode) &&
                        major(in.st_rdev) == 1 && minor(in.st_rdev) == 3;
                    char byte;
                    text += std::string("stdin: ") +
                            (null ? "/dev/null" : "other") + ", reads " +
                            std::to_string(read(STDIN_FILENO, &byte, 1)) + "\n";
                    Say(text);
                    _exit(0);
                  });
  SpawnRequest request = Request(0, 1, out, err);
  request.close_in_child.push_back(listed.write_end());
  if (can_close_from) request.close_from = above;
  const pid_t pid = reaper_(spawner->Spawn(request));
  close(above);
  ASSERT_GT(pid, 0);
  const std::vector<std::string> said = OutputOf(out, err);
  EXPECT_EQ(said[0], std::string("listed closed: yes\n") +
                         (can_close_from ? "above closed: yes\n" : "") +
                         "stdin: /dev/null, reads 0\n");
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->exit_code(), 0);
}

TEST_F(RankSpawnerTest, ARankLeadsANewGroupOrJoinsTheOneItIsGiven) {
  Pipe out, err;
  // Both wait until they are killed.
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    for (;;) pause();
  });
  SpawnRequest first = Request(0, 2, out, err);
  const pid_t leader = reaper_(spawner->Spawn(first));
  ASSERT_GT(leader, 0);
  SpawnRequest second = Request(1, 2, out, err);
  second.pgid = leader;
  const pid_t member = reaper_(spawner->Spawn(second));
  ASSERT_GT(member, 0);
  // The parent sets the group too, before Spawn returns.
  EXPECT_EQ(getpgid(leader), leader);
  EXPECT_EQ(getpgid(member), leader);
  EXPECT_NE(getpgid(leader), getpgrp());
  EXPECT_FALSE(spawner->Stopped(leader));

  spawner->KillGroup(leader);
  for (const pid_t pid : {leader, member}) {
    const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
    ASSERT_TRUE(outcome.has_value()) << pid;
    EXPECT_TRUE(outcome->signaled());
    EXPECT_EQ(outcome->signal(), SIGKILL);
  }
}

TEST_F(RankSpawnerTest, StoppedSaysWhenARankIsStoppedAndKillEndsIt) {
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kFork, [](std::shared_ptr<HostArena>) {
    for (;;) pause();
  });
  const pid_t pid = reaper_(spawner->Spawn(Request(0, 1, out, err)));
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  // Until it is stopped (the wait leaves that for others to see).
  siginfo_t info{};
  while (waitid(P_PID, pid, &info, WSTOPPED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ASSERT_EQ(info.si_pid, pid);
  EXPECT_TRUE(spawner->Stopped(pid));

  spawner->Kill(pid);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->signaled());
  EXPECT_EQ(outcome->signal(), SIGKILL);
}

TEST_F(RankSpawnerTest, ARankDiesWithTheProcessThatSpawnedIt) {
  // The spawning process is a child of this one; its rank, orphaned, comes
  // to this process (a subreaper for the test), where its end is seen.
  int was_subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  struct Restore {
    int was;
    ~Restore() { prctl(PR_SET_CHILD_SUBREAPER, was); }
  } restore{was_subreaper};

  Pipe said, started;
  const pid_t middle = reaper_(fork());
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    // Nothing of gtest's here. Once its rank runs its entry (past the
    // set-up, where a rank whose parent is gone already exits by itself),
    // the rank's pid goes up the pipe and this process ends without it.
    auto spawner =
        MakeSpawner(LaunchMode::kFork, [&started](std::shared_ptr<HostArena>) {
          (void)!write(started.write_end(), "!", 1);
          for (;;) pause();
        });
    SpawnRequest request;
    request.stdout_fd = STDOUT_FILENO;
    request.stderr_fd = STDERR_FILENO;
    pid_t rank = -1;
    try {
      rank = spawner->Spawn(request);
    } catch (...) {
    }
    char byte = 0;
    started.CloseWrite();
    if (rank > 0 && read(started.read_end(), &byte, 1) != 1) rank = -1;
    (void)!write(said.write_end(), &rank, sizeof rank);
    _exit(0);
  }
  started.CloseWrite();
  said.CloseWrite();
  pid_t rank = -1;
  ASSERT_EQ(read(said.read_end(), &rank, sizeof rank),
            static_cast<ssize_t>(sizeof rank));
  ASSERT_GT(rank, 0);
  reaper_(rank);
  int status = 0;
  ASSERT_EQ(waitpid(middle, &status, 0), middle);
  ASSERT_TRUE(WIFEXITED(status));

  // Now this process's child: its end, by PR_SET_PDEATHSIG.
  auto spawner = MakeSpawner(LaunchMode::kFork, {});
  const std::optional<RankOutcome> outcome = EndOf(*spawner, rank);
  ASSERT_TRUE(outcome.has_value()) << "the rank outlived its parent";
  EXPECT_TRUE(outcome->signaled());
  EXPECT_EQ(outcome->signal(), SIGKILL);
}

TEST_F(RankSpawnerTest, AReExecutedRankRunsOnlyItsTestWithItsEnvironment) {
  // Exec'd, not a fork of the zygote.
  ScopedVariable no_zygote(env::kNoZygote, "1");
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kExec, {});
  SpawnRequest request = Request(1, 3, out, err);
  request.test_name = "RankSpawnerExecRank.DISABLED_SaysWhatItSees";
  request.extra_env = {{"DISTTEST_SPAWNER_TEST_WORD", "exec'd"}};
  const pid_t pid = reaper_(spawner->Spawn(request));
  ASSERT_GT(pid, 0);
  bool complete = false;
  const std::vector<std::string> said = OutputOf(out, err, &complete);
  ASSERT_TRUE(complete);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->exited()) << outcome->str() << "\n" << said[1];
  EXPECT_EQ(outcome->exit_code(), 42) << said[0] << said[1];
  EXPECT_THAT(said[0], HasSubstr("word=exec'd rank=1/3 child test="
                                 "RankSpawnerExecRank.DISABLED_SaysWhatItSees"
                                 "\n"));
  EXPECT_THAT(said[0], HasSubstr("--gtest_filter=RankSpawnerExecRank.DISABLED_"
                                 "SaysWhatItSees"));
}

TEST_F(RankSpawnerTest, AnExecThatFailsEndsTheRankAsExecFailedSayingWhy) {
  ScopedVariable no_zygote(env::kNoZygote, "1");
  Pipe out, err;
  auto spawner = MakeSpawner(LaunchMode::kExec, {});
  SpawnRequest request = Request(0, 1, out, err);
  // A test that is none: if the exec went through, the binary would run
  // no test and exit 0.
  request.test_name = "NoSuchSuite.NoSuchTest";
  // One string beyond what execve takes (MAX_ARG_STRLEN: 32 pages), on any
  // page size up to 64 KiB: E2BIG.
  request.extra_env = {
      {"DISTTEST_SPAWNER_TEST_HUGE", std::string(4u << 20, 'x')}};
  const pid_t pid = reaper_(spawner->Spawn(request));
  ASSERT_GT(pid, 0);
  const std::vector<std::string> said = OutputOf(out, err);
  const std::optional<RankOutcome> outcome = EndOf(*spawner, pid);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->exited()) << outcome->str();
  EXPECT_EQ(outcome->exit_code(), kExitExecFailed);
  EXPECT_THAT(said[1], HasSubstr("disttest: cannot exec /proc/self/exe: " +
                                 std::string(std::strerror(E2BIG))));
}

TEST_F(RankSpawnerTest, WarnIfThreadedWarnsOnlyWhileAnotherThreadRuns) {
  ::testing::internal::CaptureStderr();
  WarnIfThreaded("Suite.Alone/2ranks");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");

  std::mutex mu;
  std::condition_variable cv;
  bool started = false, done = false;
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  ::testing::internal::CaptureStderr();
  WarnIfThreaded("Suite.Threaded/2ranks");
  const std::string warning = ::testing::internal::GetCapturedStderr();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  other.join();
  EXPECT_THAT(warning, HasSubstr("Suite.Threaded/2ranks forks its ranks while "
                                 "the test process runs 2 threads"));
}

// The rank of AReExecutedRankRunsOnlyItsTestWithItsEnvironment: the test
// binary re-executed, filtered to this test. Skipped elsewhere.
TEST(RankSpawnerExecRank, DISABLED_SaysWhatItSees) {
  const char* word = std::getenv("DISTTEST_SPAWNER_TEST_WORD");
  if (word == nullptr) GTEST_SKIP() << "only as a rank a spawner exec'd";
  const char* child = std::getenv(env::kInternalChildTest);
  std::string text = std::string("word=") + word +
                     " rank=" + std::getenv(env::kRank) + "/" +
                     std::getenv(env::kWorldSize) +
                     " child test=" + (child != nullptr ? child : "<unset>") +
                     "\ncommand line:";
  std::ifstream cmdline("/proc/self/cmdline");
  std::string arg;
  while (std::getline(cmdline, arg, '\0')) text += " " + arg;
  Say(text + "\n");
  _exit(42);
}

}  // namespace
}  // namespace disttest::internal
