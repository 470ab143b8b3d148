// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The launched step protocol (step_protocol.h): the plans' comparison in
// itself, then the protocol as a launcher's ranks run it. A LaunchedJob is
// one a process (LaunchedJob::Join), so each rank here is a process forked
// from this one, as a fake launcher would start it: it joins the job on a
// loopback store that its rank 0 serves, follows the protocol, writes what
// came of it into a pipe, says goodbye and exits. The test reads what each
// rank said.
#include "harness/launched/step_protocol.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/threads.h"
#include "disttest/env/names.h"
#include "disttest/launch/launcher_env.h"
#include "harness/launched/job.h"
#include "harness/launched/keys.h"
#include "harness/launched/launched_rank_host.h"
#include "harness/rank/run_rank.h"
#include "rendezvous/bind.h"

namespace disttest::internal::launched {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The deadline of each wait of the protocol, and the bound of a whole job:
// far beyond what any of them takes.
constexpr seconds kStepBound{60};
constexpr seconds kJobBound{180};

RunPlan Plan(int world, std::vector<std::string> tests, int repeat = 1) {
  RunPlan plan;
  plan.world_size = world;
  plan.repeat = repeat;
  plan.tests = std::move(tests);
  return plan;
}

// --- The plans, compared in-process. ---

TEST(RunPlanTest, AnEncodedPlanDecodesToItself) {
  const RunPlan plan = Plan(4, {"A.B/2ranks", "A.C/4ranks", "P/T.D/0"}, 3);
  const RunPlan back = RunPlan::Decode(plan.Encode());
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.repeat, 3);
  EXPECT_THAT(back.tests, ElementsAre("A.B/2ranks", "A.C/4ranks", "P/T.D/0"));
  EXPECT_TRUE(RunPlan::Decode(Plan(2, {}).Encode()).tests.empty());
}

TEST(RunPlanTest, SettingsAndParametersDecodeToThemselves) {
  RunPlan plan = Plan(2, {"P/T.D/2ranks/0", "A.B/2ranks"});
  plan.settings = {"DISTTEST_TIMEOUT=60", "DISTTEST_TIMEOUT_SCALE unset"};
  plan.params = {"\"two\\nlines \\\\ and a slash\"\nand a line end", ""};
  const RunPlan back = RunPlan::Decode(plan.Encode());
  EXPECT_EQ(back.settings, plan.settings);
  EXPECT_EQ(back.tests, plan.tests);
  EXPECT_EQ(back.params, plan.params);
}

TEST(RunPlanTest, ASettingOrAParameterThatDiffersIsSaid) {
  RunPlan zero = Plan(2, {"P/T.D/2ranks/0", "P/T.D/2ranks/1", "A.B/2ranks"});
  zero.settings = {"DISTTEST_TIMEOUT unset", "DISTTEST_HEARTBEAT unset"};
  zero.params = {"787", "98", ""};
  RunPlan mine = zero;
  mine.settings[0] = "DISTTEST_TIMEOUT=60";
  mine.params = {"354", "98", ""};
  EXPECT_EQ(PlanDifference(mine, zero),
            "runs with DISTTEST_TIMEOUT=60 (rank 0: DISTTEST_TIMEOUT unset); "
            "gives 1 test another parameter (P/T.D/2ranks/0: 354, rank 0's: "
            "787): gtest makes the parameters in each process, and the "
            "generator gave other values here; make it give the same values "
            "in every process");
}

TEST(RunPlanTest, PlansThatAgreeDifferInNothing) {
  const RunPlan zero = Plan(4, {"A.B/2ranks", "A.C/4ranks"});
  EXPECT_EQ(PlanDifference(zero, zero), "");
}

TEST(RunPlanTest, EachDifferenceIsSaid) {
  const RunPlan zero = Plan(4, {"A.B/2ranks", "A.C/4ranks", "A.D/4ranks"});
  EXPECT_EQ(PlanDifference(Plan(8, zero.tests), zero),
            "says WORLD_SIZE=8 (rank 0: 4)");
  EXPECT_EQ(PlanDifference(Plan(4, zero.tests, 2), zero),
            "runs --gtest_repeat=2 (rank 0: 1)");
  EXPECT_EQ(PlanDifference(Plan(4, {"A.B/2ranks"}), zero),
            "lacks 2 of rank 0's 3 tests (A.C/4ranks, A.D/4ranks)");
  EXPECT_EQ(PlanDifference(Plan(4, {"A.B/2ranks", "A.C/4ranks", "A.D/4ranks",
                                    "A.E/2ranks"}),
                           zero),
            "runs 1 test rank 0 does not (A.E/2ranks)");
  EXPECT_EQ(
      PlanDifference(Plan(4, {"A.B/2ranks", "A.D/4ranks", "A.C/4ranks"}), zero),
      "runs the same tests in another order (test 2: A.D/4ranks, rank "
      "0's: A.C/4ranks)");
  // All of them at once, joined.
  EXPECT_EQ(PlanDifference(Plan(2, {"A.B/2ranks", "A.E/2ranks"}, 5), zero),
            "says WORLD_SIZE=2 (rank 0: 4); runs --gtest_repeat=5 (rank 0: 1); "
            "lacks 2 of rank 0's 3 tests (A.C/4ranks, A.D/4ranks); runs 1 test "
            "rank 0 does not (A.E/2ranks)");
}

TEST(RunPlanTest, ALongListOfMissingTestsIsCut) {
  const RunPlan zero = Plan(2, {"S.A/2ranks", "S.B/2ranks", "S.C/2ranks",
                                "S.D/2ranks", "S.E/2ranks"});
  EXPECT_EQ(PlanDifference(Plan(2, {}), zero),
            "lacks 5 of rank 0's 5 tests (S.A/2ranks, S.B/2ranks, S.C/2ranks "
            "and 2 more)");
}

// --- The protocol, with ranks as processes. ---

// What a rank does once it has joined; what it returns is what it said. An
// exception is said as "threw: <what>".
using Body = std::function<std::string(LaunchedJob&)>;

// Set by a body to leave at once after it, without a goodbye (as a rank
// that died would).
bool g_leave_without_goodbye = false;

// In the forked rank: joins the job of `env`, runs `body`, says what came
// of it into `out`, says goodbye, and exits. Never returns.
[[noreturn]] void RunRankProcess(const LauncherEnv& env, const Body& body,
                                 int out, pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
  // Rank 0's banner; failures still go to stderr.
  const int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {
    dup2(null, STDOUT_FILENO);
    close(null);
  }
  // The bound of a rank's connection to a store that never comes.
  setenv(env::kTimeout, "60", 1);
  std::string said;
  LaunchedJob* job = nullptr;
  try {
    job = &LaunchedJob::Join(env);
  } catch (const std::exception& e) {
    said = std::string("join failed: ") + e.what();
  }
  if (job != nullptr) {
    try {
      said = body(*job);
    } catch (const std::exception& e) {
      said = std::string("threw: ") + e.what();
    }
  }
  for (std::size_t at = 0; at < said.size();) {
    const ssize_t n = write(out, said.data() + at, said.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<std::size_t>(n);
  }
  close(out);
  if (job != nullptr && !g_leave_without_goodbye) job->Goodbye();
  _exit(0);
}

// A port below the kernel's ephemeral range (where no connect() or bind(0)
// of another process takes it meanwhile) that is free now.
int FreePort() {
  std::mt19937 random{std::random_device{}()};
  int port = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    port = 20000 + static_cast<int>(random() % 12000);
    try {
      close(BindTcp("127.0.0.1", port, 0).first);
      break;
    } catch (const std::exception&) {
    }
  }
  return port;
}

class StepProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The ranks run the harness's code after the fork.
    ASSERT_EQ(ThreadCount(), 1u)
        << "these tests fork; the process must be single-threaded";
  }

  // Runs a job of `n` ranks, each running `body`; what each said, in rank
  // order, once every one has ended. A port that rank 0 could not take is
  // tried again with another.
  static std::vector<std::string> RunJob(int n, const Body& body) {
    std::vector<std::string> said;
    for (int attempt = 0; attempt < 5; ++attempt) {
      said = RunJobOn(n, FreePort(), body);
      if (!said.empty() &&
          said[0].rfind("join failed: rank 0 cannot host the store", 0) != 0) {
        break;
      }
    }
    return said;
  }

 private:
  static std::vector<std::string> RunJobOn(int n, int port, const Body& body) {
    std::vector<pid_t> pids;
    std::vector<int> reads;
    const pid_t parent_pid = getpid();
    const std::string nonce = std::to_string(std::random_device{}());
    for (int r = 0; r < n; ++r) {
      LauncherEnv env;
      env.launcher = "torchrun";
      env.rank = r;
      env.world_size = n;
      env.local_rank = r;
      env.local_size = n;
      env.master_addr = "127.0.0.1";
      env.master_port = port;
      // Another job on the same port (ctest -j) is refused, not joined.
      env.store_token = "step-protocol-test-" + std::to_string(parent_pid) +
                        "-" + std::to_string(port) + "-" + nonce;
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0) break;
      const pid_t parent = getpid();
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        RunRankProcess(env, body, fds[1], parent);
      }
      close(fds[1]);
      if (pid < 0) {
        close(fds[0]);
        break;
      }
      pids.push_back(pid);
      reads.push_back(fds[0]);
    }
    // What each says, until each has closed its pipe (or the bound).
    std::vector<std::string> said(pids.size());
    std::vector<int> open = reads;
    const auto deadline = Clock::now() + kJobBound;
    for (;;) {
      std::vector<pollfd> polled;
      std::vector<std::size_t> which;
      for (std::size_t i = 0; i < open.size(); ++i) {
        if (open[i] < 0) continue;
        polled.push_back({open[i], POLLIN, 0});
        which.push_back(i);
      }
      if (polled.empty()) break;
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      const int ready =
          poll(polled.data(), polled.size(), static_cast<int>(left.count()));
      if (ready < 0 && errno != EINTR) break;
      for (std::size_t k = 0; ready > 0 && k < polled.size(); ++k) {
        if (polled[k].revents == 0) continue;
        char buffer[4096];
        const ssize_t got = read(polled[k].fd, buffer, sizeof buffer);
        if (got > 0) {
          said[which[k]].append(buffer, static_cast<std::size_t>(got));
        } else if (got == 0 || errno != EINTR) {
          open[which[k]] = -1;
        }
      }
      // Rank 0 could not serve the store: the others would wait for it.
      if (!said.empty() && open[0] < 0 &&
          said[0].rfind("join failed: ", 0) == 0) {
        break;
      }
    }
    // Each process ends after its goodbye; whoever is still there at the
    // bound (or after rank 0 failed to start) is killed.
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (open[i] >= 0) {
        kill(pids[i], SIGKILL);
        said[i] += " (no answer: killed)";
      }
      const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pids[i], 0));
      if (pidfd >= 0) {
        const auto left =
            std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        pollfd ended{pidfd, POLLIN, 0};
        if (poll(&ended, 1,
                 static_cast<int>(std::max<long>(left.count(), 1000))) != 1) {
          kill(pids[i], SIGKILL);
        }
        close(pidfd);
      }
      while (waitpid(pids[i], nullptr, 0) < 0 && errno == EINTR) {
      }
      close(reads[i]);
    }
    return said;
  }
};

TEST_F(StepProtocolTest, RanksWithTheSamePlanAgreeAndShareRankZerosWord) {
  const std::vector<std::string> said = RunJob(3, [](LaunchedJob& job) {
    const auto deadline = Clock::now() + kStepBound;
    ComparePlans(job, Plan(3, {"A.B/3ranks", "A.C/2ranks"}), deadline);
    return "agreed; got " +
           ShareFromRankZero(job, "unit/word",
                             job.rank() == 0 ? "rank 0's" : "another's",
                             deadline, "the word");
  });
  EXPECT_THAT(said, ElementsAre("agreed; got rank 0's", "agreed; got rank 0's",
                                "agreed; got rank 0's"));
}

TEST_F(StepProtocolTest, ARankWhosePlanDiffersIsNamedOnEveryRank) {
  const std::vector<std::string> said = RunJob(3, [](LaunchedJob& job) {
    RunPlan plan = Plan(3, {"A.B/3ranks", "A.C/2ranks"});
    if (job.rank() == 2) plan.tests.pop_back();
    ComparePlans(job, plan, Clock::now() + kStepBound);
    return std::string("agreed");
  });
  const std::string how = "rank 2 lacks 1 of rank 0's 2 tests (A.C/2ranks)";
  // Rank 0 names it, and rank 1, which agreed, hears it from rank 0.
  const std::string finding =
      "threw: the launched ranks would not run the same tests alike: " + how +
      "; every rank must run the same binary with the same --gtest_filter, "
      "--gtest_repeat, --gtest_shuffle and --gtest_random_seed, the same "
      "WORLD_SIZE, and the same DISTTEST_TIMEOUT, DISTTEST_TIMEOUT_SCALE, "
      "DISTTEST_COMPARE_CALLS, DISTTEST_HEARTBEAT, DISTTEST_SHARE_GPUS and "
      "DISTTEST_REQUIRE_GPUS (a launcher that does not pass the environment "
      "on to every node: mpirun -x NAME)";
  // The rank that differs ends at once, saying how.
  EXPECT_THAT(said,
              ElementsAre(finding, finding,
                          "threw: the launched ranks would not run the same "
                          "tests alike: " +
                              how));
}

TEST_F(StepProtocolTest, RanksMeetAtATestAndOneAtAnotherIsNamed) {
  const std::vector<std::string> said = RunJob(3, [](LaunchedJob& job) {
    const auto deadline = Clock::now() + kStepBound;
    MeetAtTest(job, job.NextSeq(), "A.B/3ranks", deadline);
    std::string met = "met at A.B/3ranks; ";
    MeetAtTest(job, job.NextSeq(),
               job.rank() == 1 ? "A.D/3ranks" : "A.C/3ranks", deadline);
    return met + "met again";
  });
  EXPECT_THAT(said,
              Each("threw: the ranks are not at the same test: rank 0 at "
                   "A.C/3ranks, rank 1 at A.D/3ranks; every rank must run the "
                   "same binary with the same --gtest_filter, --gtest_repeat "
                   "and --gtest_random_seed"));
}

// A step's body: says where it ran, and rank 1 fails.
class SayingProgram : public RankProgram {
 public:
  RankVerdict Run(const RankEnv& env, Communicator* comm, Store& store,
                  const ReportFn& report) override {
    const std::string where =
        std::to_string(env.rank) + "/" + std::to_string(env.world_size) +
        (comm == nullptr ? " without" : " with") + " a communicator";
    report({RankMessage::Kind::kProperty, "", -1,
            std::string("where") + '\0' + where});
    store.set("said/" + std::to_string(env.rank), where);
    if (env.rank != 1) return RankVerdict::kPassed;
    report(
        {RankMessage::Kind::kNonFatalFailure, file(), 12, "rank 1 disagrees"});
    return RankVerdict::kFailed;
  }
  const char* file() const override { return "step_protocol_test.cc"; }
  int line() const override { return 3; }
};

TestSpec Spec(int world) {
  TestSpec spec;
  spec.name = "Steps.Test/" + std::to_string(world) + "ranks";
  spec.file = "step_protocol_test.cc";
  spec.line = 3;
  spec.world_size = world;
  spec.options.init_distributed = false;
  spec.options.timeout = kStepBound;
  return spec;
}

// Rank 0's reports, one line each: "rank 1: failed; failure at
// step_protocol_test.cc:12: rank 1 disagrees".
std::string Describe(const std::vector<RankReport>& reports) {
  std::string text;
  for (const RankReport& r : reports) {
    text += "rank " + std::to_string(r.rank) + ": " +
            (r.done ? NameOf(*r.done) : "none");
    for (const RankMessage& m : r.results) {
      std::string message = m.message;
      std::replace(message.begin(), message.end(), '\0', '=');
      switch (m.kind) {
        case RankMessage::Kind::kProperty:
          text += "; property " + message;
          break;
        case RankMessage::Kind::kNonFatalFailure:
          text += "; failure at " + m.file + ":" + std::to_string(m.line) +
                  ": " + message;
          break;
        case RankMessage::Kind::kFatalFailure:
          text += "; fatal failure: " + message;
          break;
        default:
          text += "; other: " + message;
      }
    }
    text += "\n";
  }
  return text;
}

TEST_F(StepProtocolTest, RankZeroGathersEveryRanksResultsAndTheOthersMirror) {
  const std::vector<std::string> said = RunJob(3, [](LaunchedJob& job) {
    const TestSpec spec = Spec(3);
    const auto deadline = Clock::now() + kStepBound;
    const int seq = job.NextSeq();
    MeetAtTest(job, seq, spec.name, deadline);
    const StepKeys keys(seq, 0);
    SayingProgram program;
    RunLaunchedRank(job, keys, spec.world_size, program, spec.options, deadline,
                    spec.name);
    if (job.rank() != 0) {
      return std::string("verdict: ") +
             NameOf(AwaitVerdict(job, keys, spec.name, deadline));
    }
    const std::vector<RankReport> reports =
        GatherReports(job, keys, spec, deadline);
    PublishVerdict(job, keys,
                   std::any_of(reports.begin(), reports.end(), RankFailed)
                       ? RankVerdict::kFailed
                       : RankVerdict::kPassed);
    // The step's own keys are the ranks' shared store.
    std::string stored;
    for (int r = 0; r < spec.world_size; ++r) {
      const std::vector<char> v =
          job.store().get(keys.StorePrefix() + "/said/" + std::to_string(r));
      stored += " " + std::string(v.begin(), v.end()) + ";";
    }
    return Describe(reports) + "stored:" + stored;
  });
  ASSERT_EQ(said.size(), 3u);
  EXPECT_EQ(said[0],
            "rank 0: passed; property where=0/3 without a communicator\n"
            "rank 1: failed; property where=1/3 without a communicator; "
            "failure at step_protocol_test.cc:12: rank 1 disagrees\n"
            "rank 2: passed; property where=2/3 without a communicator\n"
            "stored: 0/3 without a communicator; 1/3 without a communicator; "
            "2/3 without a communicator;");
  EXPECT_EQ(said[1], "verdict: failed");
  EXPECT_EQ(said[2], "verdict: failed");
}

TEST_F(StepProtocolTest, ARankThatDiesBeforeItReportsIsNamedByRankZero) {
  const std::vector<std::string> said = RunJob(3, [](LaunchedJob& job) {
    const TestSpec spec = Spec(3);
    const auto deadline = Clock::now() + kStepBound;
    const int seq = job.NextSeq();
    MeetAtTest(job, seq, spec.name, deadline);
    const StepKeys keys(seq, 0);
    if (job.rank() == 2) {
      // Gone before its step: no results, no heartbeat, no goodbye.
      g_leave_without_goodbye = true;
      return std::string("gone");
    }
    SayingProgram program;
    RunLaunchedRank(job, keys, spec.world_size, program, spec.options, deadline,
                    spec.name);
    if (job.rank() != 0) {
      return std::string("verdict: ") +
             NameOf(AwaitVerdict(job, keys, spec.name, deadline));
    }
    const auto start = Clock::now();
    const std::vector<RankReport> reports =
        GatherReports(job, keys, spec, deadline);
    PublishVerdict(job, keys, RankVerdict::kFailed);
    // Named once its heartbeat stopped, not at the deadline.
    return Describe(reports) +
           (Clock::now() - start < kStepBound / 2 ? "in time" : "too late");
  });
  ASSERT_EQ(said.size(), 3u);
  EXPECT_THAT(said[0],
              StartsWith("rank 0: passed; property where=0/3 without a "
                         "communicator\nrank 1: failed;"));
  EXPECT_THAT(said[0], HasSubstr("\nrank 2: failed; fatal failure: did not "
                                 "report its result: "));
  EXPECT_THAT(said[0], HasSubstr("heartbeat"));
  EXPECT_THAT(said[0], ::testing::EndsWith("\nin time"));
  EXPECT_EQ(said[1], "verdict: failed");
  EXPECT_EQ(said[2], "gone");
}

}  // namespace
}  // namespace disttest::internal::launched
