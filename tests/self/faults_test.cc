// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Fault self-tests: crashes among ranks, deaths while reporting, hangs with
// stacks, a parent killed or stopped mid-test, eight copies at once,
// thousands of connections without TIME_WAIT, bad input and the debug rank.
// Each checks the verdict, the message (rank and cause), the time to the
// verdict and that nothing is left behind.
#include <fmt/format.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver.h"
#include "env/knobs.h"

namespace disttest::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The time gtest recorded for `name` in the report, in milliseconds.
double TestMillis(const std::string& xml, const std::string& name) {
  std::string tc = TestCaseXml(xml, name);
  std::size_t at = tc.find(" time=\"");
  if (at == std::string::npos) return -1;
  return std::strtod(tc.c_str() + at + 7, nullptr) * 1000;
}

// The number after `prefix` in `text`, or -1. (No std::regex: GCC 12 warns
// about its internals under ASan, and warnings are errors here.)
long NumberAfter(const std::string& text, const std::string& prefix) {
  std::size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return std::strtol(text.c_str() + at + prefix.size(), nullptr, 10);
}

class FaultsTest : public ::testing::TestWithParam<ChildSetup> {};

TEST_P(FaultsTest, CrashAmongFourRanksInABarrierIsReportedWithinThreeSeconds) {
  Verdict v =
      RunVerdicts(GetParam(), "Verdicts.CrashAmongFourInABarrier/4ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  // The dead rank first, marked, and on the terminal when it died; its
  // peers, whose barrier it broke, after it.
  EXPECT_THAT(
      v.run.out,
      HasSubstr("[rank 2/4] (first failure) killed by signal 6 (SIGABRT"));
  EXPECT_THAT(v.run.out, HasSubstr(": first failure, rank 2 after "));
  std::set<int> peers = RanksNaming(v.run.out, "barrier failed");
  const std::set<int> killed = RanksNaming(v.run.out, "was killed by disttest");
  peers.insert(killed.begin(), killed.end());
  EXPECT_EQ(peers, (std::set<int>{0, 1, 3})) << v.run.out;
  double ms = TestMillis(v.xml, "CrashAmongFourInABarrier/4ranks");
  EXPECT_GE(ms, 0);
  EXPECT_LT(ms, 3000) << v.run.out;
}

// At 256 ranks on 2 cores, as at 4: the dead rank is named, its peers are
// labelled, the verdict comes long before the test's timeout (60 s), and
// nothing is left.
// (A sanitizer build starts 256 re-executed ranks in about the 3 s these
// bounds allow on 2 cores: there the child runs at the build's own scale,
// DISTTEST_TIMEOUT_SCALE, and the bounds scale with it.)
TEST_P(FaultsTest, CrashAmong256RanksIsNamedAsAmongFour) {
  for (int world : {4, 256}) {
    // 256 ranks start in about 1.5 s on 2 idle cores, and in over 3 s
    // beside another test (ctest -j2): they get 3 times the deadlines.
    const double scale = SlowBuildScale() * (world == 256 ? 3 : 1);
    const std::string factor = fmt::format("{:g}", scale);
    const std::string name =
        "CrashAmongManyInABarrier/" + std::to_string(world) + "ranks";
    Verdict v = RunVerdicts(GetParam(), "Verdicts." + name,
                            {{"DISTTEST_TIMEOUT_SCALE", factor}});
    EXPECT_EQ(v.run.exit_code, 1);
    const std::string dead = fmt::format("[rank {}/{}]", world - 2, world);
    EXPECT_THAT(v.run.out, HasSubstr(dead + " (first failure) killed by signal "
                                            "6 (SIGABRT"));
    // Every rank is labelled, its peers' identical failures once together:
    // the report does not grow with the world.
    std::set<int> peers;
    for (int r = 0; r < world; ++r) {
      if (r != world - 2) peers.insert(r);
    }
    std::set<int> named = RanksNaming(v.run.out, "barrier failed");
    const std::set<int> killed =
        RanksNaming(v.run.out, "was killed by disttest");
    named.insert(killed.begin(), killed.end());
    EXPECT_EQ(named, peers) << v.run.out;
    EXPECT_LT(std::count(v.run.out.begin(), v.run.out.end(), '\n'), 60)
        << v.run.out;
    EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Verdicts." + name));
    const double ms = TestMillis(v.xml, name);
    EXPECT_GE(ms, 0);
    EXPECT_LT(ms, 3000 * scale) << world << " ranks\n" << v.run.out;
  }
}

TEST_P(FaultsTest, HangAmong256RanksIsNamedAsAmongFour) {
  for (int world : {4, 256}) {
    // As above: 256 ranks get 3 times the deadlines (the 3 s timeout
    // included), so that all of them have started before it.
    const double scale = SlowBuildScale() * (world == 256 ? 3 : 1);
    const std::string factor = fmt::format("{:g}", scale);
    const std::string name =
        "HangsAmongMany/" + std::to_string(world) + "ranks";
    Verdict v = RunVerdicts(GetParam(), "VerdictsShortTimeout." + name,
                            {{"DISTTEST_TIMEOUT_SCALE", factor}});
    EXPECT_EQ(v.run.exit_code, 1);
    const int hung = world - 3;
    // The timeout ends it, and the paragraph names it and where it is. Which
    // of its peers are ended with it depends on whether their barrier gave
    // up before the deadline (they entered it when they started: 256 exec'd
    // ASan ranks start over seconds), so it may be labelled with them.
    const std::set<int> killed = RanksNaming(
        v.run.out, fmt::format("was killed by disttest: the test timed out "
                               "after {} ms",
                               3000 * scale));
    EXPECT_EQ(killed.count(hung), 1u) << v.run.out;
    EXPECT_THAT(v.run.out,
                HasSubstr(fmt::format("rank {} is not in it: its last "
                                      "collective, #0 barrier() (disttest's, "
                                      "before the body), completed",
                                      hung)));
    EXPECT_THAT(v.run.out,
                HasSubstr("it is now at verdicts_child_.cc:" +
                          std::to_string(LineOf("marker-hang-among-many"))));
    // A peer whose barrier gave up names it as the rank it waits for.
    const std::string waited = fmt::format("waiting for rank {} ", hung);
    std::istringstream lines(v.run.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("barrier failed: timed out") != std::string::npos) {
        EXPECT_THAT(line, HasSubstr(waited + "(same-host arena)"));
      }
    }
    // Streamed as the test's first failure, if at all, only before the
    // deadline: after it, a peer's barrier that gives up follows from it.
    const std::size_t deadline = v.run.out.find("the test timed out after");
    ASSERT_NE(deadline, std::string::npos) << v.run.out;
    EXPECT_EQ(v.run.out.find(": first failure, rank", deadline),
              std::string::npos)
        << v.run.out;
    // The timeout (3 s), the stacks (at most 15 s), the kill and the verdict.
    EXPECT_LT(TestMillis(v.xml, name), 3000 * scale + 15000 + 2000)
        << world << " ranks";
  }
}

// A cgroup of the test's own below this process's, of `controller`'s
// hierarchy under cgroup v1 or of the unified one under v2, with the limits
// of `limits` (file and value; v1's and v2's names, the first of which must
// read back) written; made and removed here, and the child moves itself into
// it before any test runs. dir() is empty where it cannot be made (no root,
// no such controller).
class TestCgroup {
 public:
  using Limits = std::vector<std::pair<std::string, std::string>>;
  TestCgroup(const std::string& controller, const Limits& v1,
             const Limits& v2) {
    std::ifstream in("/proc/self/cgroup");
    for (std::string line; std::getline(in, line);) {
      const std::size_t a = line.find(':'), b = line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1);
      const bool is_v1 = controllers.find(controller) != std::string::npos;
      if (!is_v1 && !controllers.empty()) continue;
      const std::filesystem::path dir =
          std::filesystem::path(is_v1 ? "/sys/fs/cgroup/" + controller
                                      : "/sys/fs/cgroup") /
          std::filesystem::path(line.substr(b + 1)).relative_path() /
          fmt::format("disttest-test-{}-{}", controller, getpid());
      std::error_code ec;
      if (!std::filesystem::create_directory(dir, ec)) continue;
      const Limits& limits = is_v1 ? v1 : v2;
      for (const auto& [file, value] : limits) {
        std::ofstream(dir / file) << value << "\n";
      }
      std::string set;
      if (std::ifstream(dir / limits.front().first) >> set &&
          set == limits.front().second) {
        dir_ = dir;
        return;
      }
      std::filesystem::remove(dir, ec);
    }
  }
  ~TestCgroup() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove(dir_, ec);
  }
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// At most `max` processes (threads count too).
class PidsCgroup : public TestCgroup {
 public:
  explicit PidsCgroup(int max)
      : TestCgroup("pids", {{"pids.max", std::to_string(max)}},
                   {{"pids.max", std::to_string(max)}}) {}
};

// At most `bytes` of memory, and no swap.
class MemoryCgroup : public TestCgroup {
 public:
  explicit MemoryCgroup(long long bytes)
      : TestCgroup(
            "memory",
            {{"memory.limit_in_bytes", std::to_string(bytes)},
             {"memory.memsw.limit_in_bytes", std::to_string(bytes)}},
            {{"memory.max", std::to_string(bytes)}, {"memory.swap.max", "0"}}) {
  }
};

// More ranks than the cgroup allows processes: a clear error naming the
// limit, before any rank starts (not 100 ranks and then a failed fork).
TEST_P(FaultsTest, WorldAboveTheProcessLimitIsAClearErrorBeforeAnyRankStarts) {
  PidsCgroup cgroup(100);
  if (cgroup.dir().empty()) {
    GTEST_SKIP() << "cannot make a pids cgroup here (needs root, and cgroup "
                    "v1's pids controller or a v2 hierarchy that allows it)";
  }
  Verdict v =
      RunVerdicts(GetParam(), "Verdicts.CrashAmongManyInABarrier/256ranks",
                  {{"VERDICTS_PIDS_CGROUP", cgroup.dir().string()}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex(
                  "needs 256 processes for 256 ranks, and the cgroup " +
                  cgroup.dir().string() +
                  " allows [0-9]+ more \\(pids.max 100, pids.current "
                  "[0-9]+\\): raise pids.max or run fewer ranks"));
  // No rank ran: none of them printed, nor was killed.
  EXPECT_THAT(v.run.out, Not(HasSubstr("[rank 0/256]")));
}

// disttest's own parked pool of 8 ranks made a later test of 16 fail
// ("allows 12 more") under a pids.max that fits the 16: idle pools are
// ended first, and that is said.
TEST_P(FaultsTest, ParkedPoolsMakeRoomForATestUnderAProcessLimit) {
  PidsCgroup cgroup(24);
  if (cgroup.dir().empty()) {
    GTEST_SKIP() << "cannot make a pids cgroup here (needs root, and cgroup "
                    "v1's pids controller or a v2 hierarchy that allows it)";
  }
  // Under ASan, LeakSanitizer's check at each rank's exit clones a tracer
  // task, which pids.max counts: sixteen ranks that end at once would need up
  // to sixteen more than the limit sized here (CI failed so, at rank 15's
  // fork). The check is not what this test is about.
  const char* asan = std::getenv("ASAN_OPTIONS");
  Verdict v =
      RunVerdicts(GetParam(), "VerdictsPooledWide.*",
                  {{"VERDICTS_PIDS_CGROUP", cgroup.dir().string()},
                   {"ASAN_OPTIONS", std::string(asan != nullptr ? asan : "") +
                                        ":detect_leaks=0"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  if (std::string(GetParam().launch) != "fork") return;  // Pools are fork's.
  EXPECT_THAT(v.run.out, HasSubstr("[ disttest ] ended 1 idle pool of reused "
                                   "ranks (8 processes) to make room for 16 "
                                   "ranks: needs 16 processes"))
      << v.run.out;
}

// An OOM kill was a plain "killed by signal 9 (SIGKILL)", as if someone had
// sent it: the memory cgroup's count says who did.
TEST_P(FaultsTest, OomKillIsNamedAsTheOomKillers) {
  MemoryCgroup cgroup(512LL << 20);
  if (cgroup.dir().empty()) {
    GTEST_SKIP() << "cannot make a memory cgroup here (needs root and the "
                    "memory controller)";
  }
  Verdict v =
      RunVerdicts(GetParam(), "Verdicts.AllocatesUntilTheOomKiller/2ranks",
                  {{"VERDICTS_MEMORY_CGROUP", cgroup.dir().string()}});
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[rank 1/2] killed by signal 9 (SIGKILL) by the "
                        "kernel's OOM killer (the memory cgroup " +
                        cgroup.dir().string() +
                        " counted 1 OOM kill during "
                        "the test: the ranks together used more memory than "
                        "it allows)"))
      << v.run.out;
}

TEST_P(FaultsTest, RankKilledWhileReportingDoesNotWedgeTheParent) {
  Verdict v = RunVerdicts(GetParam(), "Verdicts.KilledWhileReporting/2ranks");
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[rank 1/2] killed by signal 9 (SIGKILL)"));
  EXPECT_LT(TestMillis(v.xml, "KilledWhileReporting/2ranks"), 10000);
}

TEST_P(FaultsTest, RankKilledAfterTheGraceShowsWhereItWas) {
  Verdict v = RunVerdicts(GetParam(), "Verdicts.FailsFatallyOnRank0/2ranks");
  EXPECT_THAT(
      v.run.out,
      AllOf(HasSubstr("[rank 1/2] was killed by disttest: still "
                      "running 300 ms after rank 0 failed; it was here:"),
            HasSubstr("verdicts_child_.cc:" +
                      std::to_string(LineOf("marker-busy")))));
  // The paragraph printed before the kill knows rank 0's verdict: it
  // failed and ended; its report was not lost.
  EXPECT_THAT(v.run.out, Not(HasSubstr("but its report was lost")));
}

TEST_P(FaultsTest, HungRankIsKilledAtTheTimeoutWithItsStack) {
  Verdict v = RunVerdicts(GetParam(), "VerdictsShortTimeout.Hangs/2ranks");
  EXPECT_THAT(v.run.out,
              AllOf(HasSubstr("taking the stacks of 1 rank"),
                    HasSubstr("[rank 1/2] was killed by disttest: the test "
                              "timed out after 3000 ms; it was here:"),
                    HasSubstr("verdicts_child_.cc:" +
                              std::to_string(LineOf("marker-hang")))));
  // The timeout (3 s), the stacks (at most 15 s), the kill and the verdict.
  EXPECT_LT(TestMillis(v.xml, "Hangs/2ranks"), 3000 + 15000 + 2000);
}

// Runs the hanging test and sends `sig` to the parent once both ranks run.
ChildRun RunAndSignalParent(const ChildSetup& setup, int sig) {
  bool sent = false;
  return RunChild(
      {setup.binary, "--gtest_filter=Verdicts.HangsForSignalTests/2ranks"},
      {{"VERDICTS_LAUNCH", setup.launch}}, std::chrono::seconds(60),
      [&](pid_t pid, const std::string& out, const std::string&) {
        if (!sent && out.find("marker-running rank 0") != std::string::npos &&
            out.find("marker-running rank 1") != std::string::npos) {
          kill(pid, sig);
          sent = true;
        }
      });
}

// A SIGKILLed parent cannot clean up: its ranks die with it (PDEATHSIG),
// and its queues, which every running rank unlinked once it held its own,
// are gone with their last mapping. Nothing is left for a later run to
// sweep (the sweep, for queues of ranks that never started, is
// RemoveQueuesOfDeadProcessesTest's).
TEST_P(FaultsTest, ParentKilledMidTestTakesItsRanksAndLeavesNoQueue) {
  ChildRun run = RunAndSignalParent(GetParam(), SIGKILL);
  EXPECT_EQ(run.signal, SIGKILL);
  EXPECT_THAT(KillOrphans(), IsEmpty());
  EXPECT_THAT(ShmLeftovers(run.pid), IsEmpty());
}

// This test's queues in /dev/shm whose process no longer exists (other
// runs' are not this test's to judge).
std::set<std::string> DeadQueuesOf(const std::string& test) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("disttest-", 0) != 0) continue;
    if (name.find(test) == std::string::npos) continue;
    pid_t pid = std::atoi(name.c_str() + 9);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) found.insert(name);
  }
  return found;
}

TEST_P(FaultsTest, CtestTimeoutLeavesNothingBehindOnceTheNextRunIsDone) {
  constexpr const char* kQueues = "Verdicts.HangsForSignalTests_2ranks";
  const std::set<std::string> before = DeadQueuesOf(kQueues);
  // A ctest project of one hanging test with a 2 s TIMEOUT, shorter than
  // disttest's own timeout: ctest kills the test binary mid-test.
  std::string dir = TempPath(".ctest");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/CTestTestfile.cmake")
      << "add_test(hang \"" << GetParam().binary
      << "\" \"--gtest_filter=Verdicts.HangsForSignalTests/2ranks\")\n"
      << "set_tests_properties(hang PROPERTIES TIMEOUT 2 ENVIRONMENT "
      << "VERDICTS_LAUNCH=" << GetParam().launch << ")\n";
  ChildRun ctest = RunChild({DISTTEST_CTEST_COMMAND, "--test-dir", dir});
  std::filesystem::remove_all(dir);
  EXPECT_NE(ctest.exit_code, 0);
  EXPECT_THAT(ctest.out, HasSubstr("Timeout"));
  EXPECT_THAT(KillOrphans(), IsEmpty());
  // The binary died mid-test. Ranks that had started unlinked their
  // queues' names; one killed before it opened its queue leaves it, for
  // the next run to sweep.
  Verdict next = RunVerdicts(GetParam(), "Verdicts.Passes/1ranks");
  EXPECT_EQ(next.run.exit_code, 0);
  std::set<std::string> left = DeadQueuesOf(kQueues);
  for (const std::string& name : before) left.erase(name);
  EXPECT_THAT(left, IsEmpty());
}

// The test program killed mid-body by SIGKILL, which no destructor
// survives (ctest's TIMEOUT before CMake 3.27): the fixture's directory goes
// all the same, removed by the process that read its name.
TEST_P(FaultsTest, ParentKilledMidTestLeavesNoFixtureDirectory) {
  std::string dir;
  ChildRun run = RunChild(
      {GetParam().binary, "--gtest_filter=VerdictsWithFixture.*/1ranks"},
      {{"VERDICTS_LAUNCH", GetParam().launch},
       {"VERDICTS_HANG_AFTER_FIXTURE", "1"}},
      std::chrono::seconds(60),
      [&](pid_t pid, const std::string& out, const std::string&) {
        const std::size_t at = out.find("marker-fixture-dir ");
        const std::size_t end = out.find('\n', at);
        if (!dir.empty() || at == std::string::npos ||
            end == std::string::npos) {
          return;
        }
        dir = out.substr(at + 19, end - at - 19);
        kill(pid, SIGKILL);
      });
  ASSERT_EQ(run.signal, SIGKILL) << run.out << run.err;
  ASSERT_FALSE(dir.empty()) << run.out;
  // Its remover reads the closed socket's end and removes it: wait for
  // that, not for a time.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::filesystem::exists(dir) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  EXPECT_THAT(KillOrphans(), IsEmpty());
}

TEST_P(FaultsTest, ParentStoppedByTermOrIntCleansUpAndDiesOfTheSignal) {
  for (int sig : {SIGTERM, SIGINT}) {
    ChildRun run = RunAndSignalParent(GetParam(), sig);
    EXPECT_EQ(run.signal, sig) << run.out << run.err;
    EXPECT_THAT(KillOrphans(), IsEmpty());
    EXPECT_THAT(ShmLeftovers(run.pid), IsEmpty());
  }
}

// ctest's TIMEOUT (with TIMEOUT_SIGNAL_NAME SIGTERM), a CI job's
// cancellation, Ctrl-C: the test in flight fails with its report (stacks,
// ledgers), the tests after it are skipped, gtest writes its XML and JSON,
// and the process dies of the signal; nothing is left.
TEST_P(FaultsTest, TermOrIntDuringAHangFailsItWithItsReportAndWritesTheFiles) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string xml = TempPath(".xml"), json = TempPath(".json");
    bool sent = false;
    const auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration after_signal{};
    auto sent_at = start;
    ChildRun run = RunChild(
        {GetParam().binary,
         "--gtest_filter=Verdicts.Passes/1ranks:Verdicts.HangsForSignalTests/"
         "2ranks:VerdictsMismatch.AgreeingRanksPass/1ranks",
         "--gtest_output=xml:" + xml},
        {{"VERDICTS_LAUNCH", GetParam().launch}}, std::chrono::seconds(60),
        [&](pid_t pid, const std::string& out, const std::string&) {
          if (!sent && out.find("marker-running rank 0") != std::string::npos &&
              out.find("marker-running rank 1") != std::string::npos) {
            kill(pid, sig);
            sent = true;
            sent_at = std::chrono::steady_clock::now();
          }
        });
    after_signal = std::chrono::steady_clock::now() - sent_at;
    ASSERT_TRUE(sent) << run.out << run.err;
    EXPECT_EQ(run.signal, sig) << run.out << run.err;
    // The report, as a timeout's: why, the stacks, the verdict.
    const std::string why = fmt::format(
        "disttest got {} while the test ran",
        sig == SIGTERM ? "SIGTERM (ctest's TIMEOUT, a CI job's cancellation "
                         "or kill)"
                       : "SIGINT (Ctrl-C)");
    EXPECT_THAT(run.out, HasSubstr("Verdicts.HangsForSignalTests/2ranks: " +
                                   why + "; taking the stacks of 2 ranks"));
    EXPECT_THAT(run.out,
                HasSubstr("[ranks 0-1 of 2] was killed by disttest: " + why +
                          "; where it was: in the stacks below"));
    EXPECT_THAT(run.out, HasSubstr("where they were when disttest took their "
                                   "stacks"));
    EXPECT_THAT(run.out, HasSubstr("the tests after it are skipped, gtest "
                                   "writes its XML and JSON"));
    // Every test that ran, the one in flight failed with its report, the
    // one after it skipped.
    const std::string x = ReadFile(xml);
    EXPECT_THAT(x, HasSubstr("<testcase name=\"Passes/1ranks\""));
    const std::string hang = TestCaseXml(x, "HangsForSignalTests/2ranks");
    EXPECT_THAT(hang, HasSubstr("<failure")) << x;
    EXPECT_THAT(hang, HasSubstr(why));
    EXPECT_THAT(hang, HasSubstr("rank0.disttest_stack"));
    EXPECT_THAT(TestCaseXml(x, "AgreeingRanksPass/1ranks"),
                HasSubstr("result=\"skipped\""))
        << x;
    // Stacks at most 5 s, then the kill and the files.
    EXPECT_LT(after_signal, std::chrono::seconds(8));
    EXPECT_THAT(KillOrphans(), IsEmpty());
    EXPECT_THAT(ShmLeftovers(run.pid), IsEmpty());
    std::filesystem::remove(xml);
    // The same for JSON, with SIGTERM only.
    if (sig != SIGTERM) continue;
    sent = false;
    ChildRun j = RunChild(
        {GetParam().binary,
         "--gtest_filter=Verdicts.HangsForSignalTests/2ranks",
         "--gtest_output=json:" + json},
        {{"VERDICTS_LAUNCH", GetParam().launch}}, std::chrono::seconds(60),
        [&](pid_t pid, const std::string& out, const std::string&) {
          if (!sent && out.find("marker-running rank 0") != std::string::npos &&
              out.find("marker-running rank 1") != std::string::npos) {
            kill(pid, SIGTERM);
            sent = true;
          }
        });
    EXPECT_EQ(j.signal, SIGTERM);
    const std::string js = ReadFile(json);
    EXPECT_THAT(js, HasSubstr("\"name\": \"HangsForSignalTests\\/2ranks\""));
    EXPECT_THAT(js, HasSubstr("\"failures\": ["));
    EXPECT_THAT(js, HasSubstr("disttest got SIGTERM"));
    std::filesystem::remove(json);
  }
}

TEST_P(FaultsTest, BadInputGetsAClearError) {
  struct Case {
    std::string filter;
    std::vector<std::pair<std::string, std::string>> env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"Verdicts.NegativeWorldSize/invalid_world_size_minus_1",
       {},
       "world size -1 is invalid"},
      {"Verdicts.AbsurdWorldSize/invalid_world_size_2000",
       {},
       "world size 2000 is invalid: DIST_TEST_F world sizes must be between 1 "
       "and 1024"},
      {"VerdictsBadOptions.Runs/2ranks",
       {{"VERDICTS_BAD", "timeout"}},
       "options().timeout of 0 ms is invalid: it must be > 0"},
      {"VerdictsBadOptions.Runs/2ranks",
       {{"VERDICTS_BAD", "backend"}},
       "options().backend has the unknown value 7"},
      {"VerdictsBadOptions.Runs/2ranks",
       {{"VERDICTS_BAD", "mpi"}},
       "options().backend = Backend::kMpi: backend mpi is not in this "
       "program: link it with disttest::mpi"},
      {"VerdictsBadOptions.Runs/2ranks",
       {{"VERDICTS_BAD", "address"}},
       "cannot resolve store address no-such-host.invalid"},
      {"VerdictsBadOptions.Runs/2ranks",
       {{"VERDICTS_BAD", "no-address"}},
       "options().master_addr is empty: it is the address the test's store "
       "listens on"},
      {"Verdicts.Passes/2ranks",
       {{"DISTTEST_DEBUG_RANK", "one"}},
       "environment variable DISTTEST_DEBUG_RANK='one' is not an integer"},
      {"Verdicts.Passes/2ranks",
       {{"DISTTEST_TIMEOUT", "-5"}},
       "environment variable DISTTEST_TIMEOUT='-5' is not a positive number of "
       "seconds"},
  };
  for (const Case& c : cases) {
    Verdict v = RunVerdicts(GetParam(), c.filter, c.env);
    EXPECT_EQ(v.run.exit_code, 1) << c.filter;
    EXPECT_THAT(v.run.out, HasSubstr(c.message)) << c.filter;
  }
}

TEST_P(FaultsTest, DebugRankWaitsForADebuggerAndSuspendsTheTimeout) {
  // Attach without stopping the rank (as a debugger after "continue"), keep
  // attached until it says it noticed, then stop it and detach.
  enum { kWaiting, kAttached, kDetached } state = kWaiting;
  pid_t rank = -1;
  Verdict v = RunVerdicts(
      GetParam(), "Verdicts.WaitsForADebugger/2ranks",
      // LeakSanitizer's check after the body cannot run while this test is
      // still attached (an ASan build): it is no part of what is tested.
      {{"DISTTEST_DEBUG_RANK", "1"},
       {"DISTTEST_TIMEOUT", "1"},
       {"ASAN_OPTIONS", "detect_leaks=0"}},
      std::chrono::seconds(60),
      [&](pid_t, const std::string&, const std::string& err) {
        if (state == kWaiting && NumberAfter(err, "rank 1 is pid ") > 0) {
          rank = static_cast<pid_t>(NumberAfter(err, "rank 1 is pid "));
          // Longer than the test's timeout: it must not be running.
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          ASSERT_EQ(ptrace(PTRACE_SEIZE, rank, nullptr, nullptr), 0);
          state = kAttached;
        } else if (state == kAttached &&
                   err.find("rank 1: a debugger is attached") !=
                       std::string::npos) {
          ASSERT_EQ(ptrace(PTRACE_INTERRUPT, rank, nullptr, nullptr), 0);
          waitpid(rank, nullptr, __WALL);
          ptrace(PTRACE_DETACH, rank, nullptr, nullptr);
          state = kDetached;
        }
      });
  EXPECT_EQ(state, kDetached) << v.run.err;
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.err,
              HasSubstr("waits for a debugger; the other ranks "
                        "wait for it. Attach with:\n[rank 1]   gdb -p"));
}

// A rank to debug that the test does not have: it runs as usual, saying so.
TEST_P(FaultsTest, DebugRankOutsideTheTestIsSaid) {
  Verdict v = RunVerdicts(GetParam(), "Verdicts.Passes/2ranks",
                          {{"DISTTEST_DEBUG_RANK", "7"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] DISTTEST_DEBUG_RANK=7, but "
                        "Verdicts.Passes/2ranks has ranks 0-1: none of them "
                        "waits for a debugger"))
      << v.run.out;
}

// --gtest_break_on_failure (here GTEST_BREAK_ON_FAILURE=1): the failing
// rank waits at its failure for a debugger, with the timeout off; once one
// attaches, gtest's own break stops it there (the debugger sees the trap
// and goes on without it). The parent, which only reports the failure,
// does not break.
TEST_P(FaultsTest, BreakOnFailureStopsTheFailingRankForADebugger) {
  enum { kWaiting, kDetached } state = kWaiting;
  int stop_signal = 0;
  Verdict v = RunVerdicts(
      GetParam(), "Verdicts.FailsOnRank1Only/2ranks",
      {{"GTEST_BREAK_ON_FAILURE", "1"}, {"DISTTEST_TIMEOUT", "1"}},
      std::chrono::seconds(60),
      [&](pid_t, const std::string&, const std::string& err) {
        if (state != kWaiting || NumberAfter(err, "rank 1 is pid ") <= 0) {
          return;
        }
        const auto rank =
            static_cast<pid_t>(NumberAfter(err, "rank 1 is pid "));
        // Longer than DISTTEST_TIMEOUT: it must not be running.
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        ASSERT_EQ(ptrace(PTRACE_SEIZE, rank, nullptr, nullptr), 0);
        int status = 0;
        ASSERT_EQ(waitpid(rank, &status, __WALL), rank);
        if (WIFSTOPPED(status)) stop_signal = WSTOPSIG(status);
        ptrace(PTRACE_DETACH, rank, nullptr, nullptr);  // Without the trap.
        state = kDetached;
      });
  EXPECT_EQ(state, kDetached) << v.run.err;
  EXPECT_EQ(stop_signal, SIGTRAP);
  EXPECT_EQ(v.run.exit_code, 1) << v.run.out << v.run.err;
  EXPECT_THAT(v.run.err,
              HasSubstr(fmt::format(
                  "disttest: --gtest_break_on_failure: rank 1 is pid {}",
                  NumberAfter(v.run.err, "rank 1 is pid "))));
  EXPECT_THAT(v.run.err,
              HasSubstr(fmt::format("and stops at its failure at "
                                    "verdicts_child_.cc:{}; the test's timeout "
                                    "is off. Attach with:\n[rank 1]   gdb -p",
                                    LineOf("marker-nonfatal"))));
  EXPECT_THAT(v.run.out, HasSubstr(FailureAt("marker-nonfatal", "[rank 1/2]")));
  EXPECT_THAT(v.run.out, Not(HasSubstr("timed out")));
}

INSTANTIATE_TEST_SUITE_P(LaunchModes, FaultsTest,
                         ::testing::Values(kForkSetup, kExecSetup),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

TEST(ParallelRunsTest, EightCopiesAtOnceDoNotCollide) {
  // As `ctest -j8` runs them: ports, queue names and temp files are per
  // process and per test, so eight parents never meet.
  std::vector<ChildRun> runs(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&runs, i] {
      const ChildSetup& setup = i % 2 == 0 ? kForkSetup : kExecSetup;
      runs[i] = RunChild(
          {setup.binary,
           "--gtest_filter=Verdicts.Passes/*:Verdicts.ChildEnvironment/*:"
           "Verdicts.PrintsLines/*"},
          {{"VERDICTS_LAUNCH", setup.launch}}, std::chrono::seconds(120));
    });
  }
  for (std::thread& t : threads) t.join();
  for (const ChildRun& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 5 tests."));
    EXPECT_THAT(ShmLeftovers(run.pid), IsEmpty());
  }
  EXPECT_THAT(KillOrphans(), IsEmpty());
}

// TIME_WAIT sockets in /proc/net/tcp{,6}-formatted `text`.
int CountTimeWait(const std::string& text) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "06") ++n;
  }
  return n;
}

// The network view of this process: its namespace's TCP sockets.
std::string ProcNetTcp() {
  return ReadFile("/proc/net/tcp") + ReadFile("/proc/net/tcp6");
}

// `ip`, wherever it is installed; "" when it is not.
std::string IpTool() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

TEST(LongRunsTest, HundredsOfTestsLeaveNoTimeWaitSockets) {
  // 300 three-rank tests open about 1,800 connections (store and mesh); each
  // closed the ordinary way would sit in TIME_WAIT for a minute, and some
  // thousands of those make every bind() slow. The child runs in a network
  // namespace of its own where this process may make one (root), so that
  // the count is of its sockets alone; else the machine's are counted
  // before and after (ctest runs this test alone: see CMake).
  const std::vector<std::string> child = {
      DISTTEST_VERDICTS_CHILD, "--gtest_filter=Verdicts.Passes/3ranks",
      "--gtest_repeat=300", "--gtest_brief=1"};
  const std::string ip = IpTool();
  const bool own_namespace =
      !ip.empty() &&
      RunChild({"unshare", "-n", "true"}, {}, std::chrono::seconds(30))
              .exit_code == 0;
  int before = 0;
  int after = 0;
  ChildRun run;
  pid_t child_pid = -1;
  if (own_namespace) {
    const std::string sockets = TempPath(".tcp");
    std::vector<std::string> args = {
        "unshare",
        "-n",
        "sh",
        "-c",
        "\"$0\" link set lo up || exit 99; shift; out=$1; shift; "
        "\"$@\" & pid=$!; echo \"child-pid $pid\"; wait $pid; s=$?; "
        "cat /proc/net/tcp /proc/net/tcp6 > \"$out\"; exit $s",
        ip,
        "-",
        sockets};
    args.insert(args.end(), child.begin(), child.end());
    run = RunChild(args, {}, std::chrono::seconds(300));
    after = CountTimeWait(ReadFile(sockets));
    std::filesystem::remove(sockets);
    const std::size_t at = run.out.find("child-pid ");
    if (at != std::string::npos)
      child_pid = std::atoi(run.out.c_str() + at + 10);
  } else {
    before = CountTimeWait(ProcNetTcp());
    run = RunChild(child, {}, std::chrono::seconds(300));
    after = CountTimeWait(ProcNetTcp());
    child_pid = run.pid;
  }
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_LT(after - before, 30)
      << before << " -> " << after << (own_namespace ? " (own namespace)" : "");
  EXPECT_THAT(ShmLeftovers(child_pid), IsEmpty());
  EXPECT_THAT(KillOrphans(), IsEmpty());
}

}  // namespace
}  // namespace disttest::testing
