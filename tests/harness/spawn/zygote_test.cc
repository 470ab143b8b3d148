// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The zygote's promises (zygote.h), with real processes. Its server is
// linked into every binary that links the spawner (ServerLinked()), so this
// binary is its own zygote: the client starts it with the command line it is
// given, and each rank, a fork of it, runs this binary's
// ZygoteRank.DISABLED_SaysWhatItGot (the filter of its message), which
// prints what it got and exits 42. This process is a subreaper while a test
// runs, as the supervisor is, so that a rank is its child.
//
// A zygote that failed is never used again in its process, so the tests of
// a zygote that is gone run in a copy of this binary of their own
// (ZygoteAlone.*, started by the ZygoteTest of the same name).
#include "harness/spawn/zygote.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/child_process.h"
#include "disttest/env/names.h"
#include "env/internal_names.h"
#include "harness/process/command_line.h"
#include "harness/process/descendants.h"
#include "harness/rank_outcome.h"
#include "harness/spawn/process_helpers.h"
#include "harness/spawn/rank_spawner.h"
#include "harness/spawn/zygote_wire.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// Every wait of these tests: far beyond what any of them takes.
constexpr seconds kBound{60};
// Set in a rank's environment: what it prints back.
constexpr char kWord[] = "DISTTEST_ZYGOTE_TEST_WORD";
// Set for the copy of this binary that runs a ZygoteAlone test.
constexpr char kAlone[] = "DISTTEST_ZYGOTE_TEST_ALONE";
constexpr char kRankTest[] = "ZygoteRank.DISABLED_SaysWhatItGot";

// What was written into `fd` until every writer closed it; nullopt when
// that did not happen by the bound.
std::optional<std::string> ReadUntilClosed(int fd) {
  const auto deadline = Clock::now() + kBound;
  std::string out;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd ready{fd, POLLIN, 0};
    const int rc = poll(&ready, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got == 0) return out;
    if (got < 0 && errno != EINTR) return out;
    if (got > 0) out.append(buffer, static_cast<std::size_t>(got));
  }
}

// This process as a child subreaper for the scope, as the supervisor is
// while a test runs: a rank, a grandchild of the zygote, is its child.
class Subreaper {
 public:
  Subreaper() {
    prctl(PR_GET_CHILD_SUBREAPER, &was_);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  ~Subreaper() { prctl(PR_SET_CHILD_SUBREAPER, was_); }
  Subreaper(const Subreaper&) = delete;
  Subreaper& operator=(const Subreaper&) = delete;

 private:
  int was_ = 0;
};

// This process's environment, without gtest's run-wide variables (a rank
// or a copy of this binary must not write the run's XML) and the zygote
// switch.
std::vector<std::string> Environment() {
  std::vector<std::string> env = EnvironmentNow();
  std::erase_if(env, [](const std::string& v) {
    return v.rfind("GTEST_", 0) == 0 || v.rfind("XML_OUTPUT_FILE=", 0) == 0 ||
           v.rfind("TEST_PREMATURE_EXIT_FILE=", 0) == 0 ||
           v.rfind(std::string(env::kNoZygote) + "=", 0) == 0;
  });
  return env;
}

// A rank's environment: this process's, and the word it says back.
std::vector<std::string> RankEnvironment(const std::string& word) {
  std::vector<std::string> env = Environment();
  env.push_back(std::string(kWord) + "=" + word);
  return env;
}

// A rank's command line: this binary, filtered to the rank's test.
std::vector<std::string> RankArgs() {
  return {ReadCommandLine().at(0), std::string("--gtest_filter=") + kRankTest,
          "--gtest_also_run_disabled_tests"};
}

// Another gtest's output, to be quoted in a failure message: its
// "[  SKIPPED ]" lines would make ctest count this test as skipped
// (gtest_discover_tests' SKIP_REGULAR_EXPRESSION), failed or not.
std::string Quoted(std::string output) {
  const std::string token = "[  SKIPPED ]";
  for (std::size_t at = output.find(token); at != std::string::npos;
       at = output.find(token, at)) {
    output.replace(at, token.size(), "[  skipped ]");
  }
  return output;
}

// What the rank of `pid` said, and its exit status (it is reaped).
struct Said {
  std::string output;
  std::optional<RankOutcome> outcome;
};
Said Collect(Pipe& out, pid_t pid) {
  Said said;
  out.CloseWrite();
  std::optional<std::string> output = ReadUntilClosed(out.read_end());
  if (!output) return said;  // The Reaper ends it.
  said.output = Quoted(*output);
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (got == pid) said.outcome = RankOutcome::FromWaitStatus(status);
  return said;
}

// The request of a rank whose output goes into `out`.
SpawnRequest Request(const Pipe& out) {
  SpawnRequest request;
  request.stdout_fd = out.write_end();
  request.stderr_fd = out.write_end();
  return request;
}

class ZygoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(zygote_wire::ServerLinked());
    // None runs between tests: each ends its own.
    ASSERT_EQ(Zygote::Get().pid(), -1);
  }
  void TearDown() override { Zygote::Get().End(); }

  ScopedVariable zygote_on_{env::kNoZygote, nullptr};
  Subreaper subreaper_;
  Reaper reaper_;
};

TEST_F(ZygoteTest, ARankTakesItsCallersDirectoryUmaskGroupAndEnvironment) {
  Zygote& zygote = Zygote::Get();
  // The rank works where the caller worked at the Spawn, with its umask.
  std::string made =
      (std::filesystem::temp_directory_path() / "disttest-zygote-test-XXXXXX")
          .string();
  ASSERT_NE(mkdtemp(made.data()), nullptr);
  struct RemovedAtTheEnd {
    std::string path;
    ~RemovedAtTheEnd() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } removed{made};
  const std::string dir = std::filesystem::canonical(made).string();
  Pipe out;
  pid_t pid = -1;
  {
    struct Back {
      std::filesystem::path here = std::filesystem::current_path();
      mode_t mask = umask(027);
      ~Back() {
        umask(mask);
        std::error_code ec;
        std::filesystem::current_path(here, ec);
      }
    } back;
    std::filesystem::current_path(dir);
    pid = reaper_(zygote.Spawn(Request(out), RankArgs(),
                               RankEnvironment("from the zygote")));
  }
  ASSERT_GT(pid, 0);
  const pid_t server = zygote.pid();
  EXPECT_GT(server, 0);
  EXPECT_NE(pid, server);

  const Said said = Collect(out, pid);
  ASSERT_TRUE(said.outcome.has_value())
      << "the rank did not end, or is not this process's child:\n"
      << said.output;
  EXPECT_EQ(said.outcome->str(), "exited with status 42") << said.output;
  // Its filter came with the message: /proc/self/cmdline still shows the
  // placeholder the zygote was started with (zygote.h).
  EXPECT_THAT(said.output, HasSubstr("word=from the zygote cwd=" + dir +
                                     " umask=027 leads its group=1 "
                                     "placeholder=1\n"));

  zygote.End();
  EXPECT_EQ(zygote.pid(), -1);
  // Reaped: no such process any more.
  EXPECT_EQ(kill(server, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ZygoteTest, EveryRankComesFromOneZygoteUntilTheCommandLineChanges) {
  Zygote& zygote = Zygote::Get();
  Pipe out1, out2, out3;
  const pid_t first =
      reaper_(zygote.Spawn(Request(out1), RankArgs(), RankEnvironment("one")));
  ASSERT_GT(first, 0);
  const pid_t server = zygote.pid();
  const pid_t second =
      reaper_(zygote.Spawn(Request(out2), RankArgs(), RankEnvironment("two")));
  ASSERT_GT(second, 0);
  EXPECT_EQ(zygote.pid(), server);
  EXPECT_NE(first, second);

  // Another command line: a zygote started with it, the old one ended.
  std::vector<std::string> other = RankArgs();
  other.push_back("--gtest_color=no");
  const pid_t third =
      reaper_(zygote.Spawn(Request(out3), other, RankEnvironment("three")));
  ASSERT_GT(third, 0);
  EXPECT_GT(zygote.pid(), 0);
  EXPECT_NE(zygote.pid(), server);
  EXPECT_EQ(kill(server, 0), -1);

  const std::vector<std::pair<const char*, Said>> said = {
      {"one", Collect(out1, first)},
      {"two", Collect(out2, second)},
      {"three", Collect(out3, third)}};
  for (const auto& [word, rank] : said) {
    ASSERT_TRUE(rank.outcome.has_value()) << word << ":\n" << rank.output;
    EXPECT_EQ(rank.outcome->str(), "exited with status 42") << rank.output;
    EXPECT_THAT(rank.output, HasSubstr(std::string("word=") + word + " cwd="));
  }
}

// A process that a zygote started (a test binary run by a test) holds the
// zygote's variables: its own zygote gets its own values, not those.
TEST_F(ZygoteTest, AZygotesVariablesInTheCallersEnvironmentAreReplaced) {
  ScopedVariable stale_fd(env::kInternalZygoteFd, "999");
  ScopedVariable stale_parent(env::kInternalZygoteParent, "1");
  Zygote& zygote = Zygote::Get();
  Pipe out;
  const pid_t pid =
      reaper_(zygote.Spawn(Request(out), RankArgs(), RankEnvironment("own")));
  ASSERT_GT(pid, 0);
  EXPECT_GT(zygote.pid(), 0);
  EXPECT_NE(pid, zygote.pid());
  const Said said = Collect(out, pid);
  ASSERT_TRUE(said.outcome.has_value()) << said.output;
  EXPECT_EQ(said.outcome->str(), "exited with status 42") << said.output;
  EXPECT_THAT(said.output, HasSubstr("word=own cwd="));
}

TEST_F(ZygoteTest, AnExecSpawnersRanksAreForksOfTheZygote) {
  Pipe out;
  auto spawner = MakeSpawner(LaunchMode::kExec, {});
  SpawnRequest request = Request(out);
  request.rank.rank = 1;
  request.rank.world_size = 2;
  request.test_name = kRankTest;
  request.extra_env = {{kWord, "from an exec spawner"}};
  const pid_t pid = reaper_(spawner->Spawn(request));
  ASSERT_GT(pid, 0);
  EXPECT_GT(Zygote::Get().pid(), 0) << "the rank was exec'd, not forked";
  const Said said = Collect(out, pid);
  ASSERT_TRUE(said.outcome.has_value()) << said.output;
  EXPECT_EQ(said.outcome->str(), "exited with status 42") << said.output;
  EXPECT_THAT(said.output, HasSubstr("word=from an exec spawner cwd=" +
                                     std::filesystem::current_path().string()));
  EXPECT_THAT(said.output, HasSubstr(" placeholder=1\n"));
}

// Runs ZygoteAlone.`test` in a copy of this binary, with `extra` in its
// environment; true when it passed, with what it printed.
std::pair<bool, std::string> RunAlone(const std::string& test,
                                      std::vector<std::string> extra = {}) {
  std::vector<std::string> env = Environment();
  env.push_back(std::string(kAlone) + "=1");
  env.insert(env.end(), extra.begin(), extra.end());
  ChildProcess child = ChildProcess::Start(
      {"/proc/self/exe", "--gtest_filter=ZygoteAlone." + test,
       "--gtest_also_run_disabled_tests"},
      env);
  if (!child.started()) return {false, "could not start a copy of the binary"};
  if (!child.Wait(Clock::now() + 2 * kBound)) {
    child.Kill();
    return {false,
            Quoted(child.Output()) + "\n(killed: it ran past the bound)"};
  }
  const std::string output = Quoted(child.Output());
  // A filter that matched nothing passes too: the test must have run.
  return {child.succeeded() && output.find("[       OK ] ZygoteAlone." +
                                           test) != std::string::npos,
          output};
}

TEST_F(ZygoteTest, AZygoteKilledBetweenRanksIsReportedAndNotUsedAgain) {
  const auto [passed, output] = RunAlone("DISABLED_KilledBetweenRanks");
  EXPECT_TRUE(passed) << output;
  EXPECT_THAT(output,
              HasSubstr("[ disttest ] note: the kExec zygote failed ("));
  EXPECT_THAT(output, HasSubstr("); ranks are exec'd one by one from now on"));
}

TEST_F(ZygoteTest,
       AZygoteThatEndsBeforeItAnswersIsReportedAndItsRankNeverRuns) {
  const auto [passed, output] =
      RunAlone("DISABLED_EndsBeforeItAnswers",
               {std::string(env::kInternalZygoteDieBeforeAnswer) + "=1"});
  EXPECT_TRUE(passed) << output;
  EXPECT_THAT(output,
              HasSubstr("[ disttest ] note: the kExec zygote failed (it "
                        "ended); ranks are exec'd one by one from now on"));
}

// --- In a copy of this binary of their own (RunAlone). ---

class ZygoteAlone : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv(kAlone) == nullptr) {
      GTEST_SKIP() << "only in a copy of the binary that ZygoteTest starts";
    }
  }
  void TearDown() override { Zygote::Get().End(); }

  Subreaper subreaper_;
  Reaper reaper_;
};

TEST_F(ZygoteAlone, DISABLED_KilledBetweenRanks) {
  Zygote& zygote = Zygote::Get();
  Pipe out1;
  const pid_t first =
      reaper_(zygote.Spawn(Request(out1), RankArgs(), RankEnvironment("one")));
  ASSERT_GT(first, 0);
  const Said said = Collect(out1, first);
  ASSERT_TRUE(said.outcome.has_value()) << said.output;
  EXPECT_EQ(said.outcome->str(), "exited with status 42");

  const pid_t server = zygote.pid();
  ASSERT_GT(server, 0);
  ASSERT_EQ(kill(server, SIGKILL), 0);
  ASSERT_EQ(waitpid(server, nullptr, 0), server);

  // Said at once, not after the zygote's answer time; the caller execs.
  Pipe out2;
  const auto start = Clock::now();
  EXPECT_EQ(
      reaper_(zygote.Spawn(Request(out2), RankArgs(), RankEnvironment("two"))),
      -1);
  EXPECT_LT(Clock::now() - start, milliseconds(zygote_wire::kAnswerMs));
  EXPECT_EQ(zygote.pid(), -1);
  // Not used again, and no other started.
  Pipe out3;
  EXPECT_EQ(reaper_(zygote.Spawn(Request(out3), RankArgs(),
                                 RankEnvironment("three"))),
            -1);
  EXPECT_EQ(zygote.pid(), -1);
  EXPECT_TRUE(Children().empty());
}

TEST_F(ZygoteAlone, DISABLED_EndsBeforeItAnswers) {
  // The zygote forks the rank, then exits before it sends its pid.
  Zygote& zygote = Zygote::Get();
  Pipe out;
  const auto start = Clock::now();
  EXPECT_EQ(
      reaper_(zygote.Spawn(Request(out), RankArgs(), RankEnvironment("never"))),
      -1);
  EXPECT_LT(Clock::now() - start, milliseconds(zygote_wire::kAnswerMs));
  EXPECT_EQ(zygote.pid(), -1);

  // Its rank sees its go's socket close and exits without a word; orphaned,
  // it is this process's child.
  out.CloseWrite();
  const std::optional<std::string> output = ReadUntilClosed(out.read_end());
  ASSERT_TRUE(output.has_value()) << "the rank did not end";
  EXPECT_EQ(*output, "");
  const std::vector<pid_t> left = Children();
  ASSERT_EQ(left.size(), 1u);
  reaper_(left[0]);
  int status = 0;
  ASSERT_EQ(waitpid(left[0], &status, 0), left[0]);
  EXPECT_EQ(RankOutcome::FromWaitStatus(status).str(),
            "exited with status " + std::to_string(kExitHarnessError));
  EXPECT_TRUE(Children().empty());
}

// The rank that the tests above start, as a fork of the zygote: prints what
// it got and exits 42. Skipped anywhere else.
TEST(ZygoteRank, DISABLED_SaysWhatItGot) {
  const char* word = std::getenv(kWord);
  if (word == nullptr) GTEST_SKIP() << "only in a rank the zygote forked";
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  const mode_t mask = umask(0);
  umask(mask);
  bool placeholder = false;
  std::ifstream cmdline("/proc/self/cmdline");
  for (std::string arg; std::getline(cmdline, arg, '\0');) {
    placeholder |= arg == Zygote::kPlaceholderFilter;
  }
  std::printf("word=%s cwd=%s umask=%03o leads its group=%d placeholder=%d\n",
              word, cwd.c_str(), static_cast<unsigned>(mask),
              getpgrp() == getpid() ? 1 : 0, placeholder ? 1 : 0);
  std::fflush(stdout);
  _exit(42);
}

}  // namespace
}  // namespace disttest::internal
