// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What a run reports: output line by line, the log directory, progress of a
// long test, the XML and JSON, fail-fast, properties, rerun lines and the
// trace (verdicts.h).
#include "verdicts.h"

namespace disttest::testing {
namespace {

TEST_P(VerdictsTest, OutputArrivesLineByLinePrefixedWithTheRank) {
  SKIP_FOR_THREADS(
      "rank threads share their process's output, labelled [rank threads]");
  Verdict v = Run("Verdicts.PrintsLines/2ranks");
  EXPECT_EQ(v.run.exit_code, 0);
  for (int r = 0; r < 2; ++r) {
    std::string rs = std::to_string(r);
    EXPECT_THAT(v.run.out, HasSubstr("[rank " + rs +
                                     "] marker-stdout from rank " + rs + "\n"));
    EXPECT_THAT(v.run.err, HasSubstr("[rank " + rs +
                                     "] marker-stderr from rank " + rs + "\n"));
  }
  // gtest_main's banner of a re-executed rank is not relayed.
  EXPECT_THAT(v.run.out, Not(HasSubstr("] Running main() from")));
}

TEST_P(VerdictsTest, LogDirKeepsEachRanksOutputAndShowsTheFailingTail) {
  SKIP_FOR_THREADS(
      "rank threads share their process's output: one log, rank-threads.log");
  std::string dir = TempPath(".logs");
  Verdict pass =
      Run("Verdicts.PrintsLines/2ranks", {{"DISTTEST_LOG_DIR", dir}});
  EXPECT_EQ(pass.run.exit_code, 0) << pass.run.out;
  for (int r = 0; r < 2; ++r) {
    std::string log = ReadFile(dir + "/Verdicts.PrintsLines/2ranks/rank-" +
                               std::to_string(r) + ".log");
    std::string rs = std::to_string(r);
    EXPECT_THAT(log, HasSubstr("marker-stdout from rank " + rs + "\n"));
    EXPECT_THAT(log, HasSubstr("marker-stderr from rank " + rs + "\n"));
  }
  EXPECT_THAT(pass.run.out, Not(HasSubstr("the last")));
  Verdict fail =
      Run("Verdicts.FailsOnRank1Only/2ranks", {{"DISTTEST_LOG_DIR", dir}});
  EXPECT_EQ(fail.run.exit_code, 1);
  std::string rank1_log = dir + "/Verdicts.FailsOnRank1Only/2ranks/rank-1.log";
  EXPECT_THAT(fail.run.out,
              HasSubstr("[ disttest ] the last 1 lines of rank 1's output (all "
                        "of it: " +
                        rank1_log + "):\n  marker-rank-output 1\n"));
  EXPECT_THAT(fail.run.out, Not(HasSubstr("of rank 0's output")));
  std::filesystem::remove_all(dir);
}

TEST_P(VerdictsTest, LongTestPrintsWhoHasFinished) {
  Verdict v = Run("Verdicts.SlowRank/2ranks", {{"DISTTEST_HEARTBEAT", "1"}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  // Rank 1 sleeps 2.5 s: a heartbeat (each second) finds rank 0 done and
  // rank 1 running, whenever rank 0 finished.
  EXPECT_THAT(v.run.out,
              ::testing::ContainsRegex("\\[ disttest \\] Verdicts.SlowRank/"
                                       "2ranks: [12] s; finished: 0; "
                                       "running: 1\n"));
}

TEST_P(VerdictsTest, XmlHoldsEachRanksFailureAndTheTestsProperties) {
  Verdict v = Run("Verdicts.AllEqDisagrees/4ranks");
  std::string tc = TestCaseXml(v.xml, "AllEqDisagrees/4ranks");
  // The four ranks' identical failures are one <failure> naming them all,
  // at the assertion's line.
  EXPECT_EQ(Count(tc, "<failure message="), 1) << tc;
  EXPECT_THAT(tc, HasSubstr("verdicts_child_.cc:" +
                            std::to_string(LineOf("marker-all-eq")) +
                            "&#x0A;[ranks 0-3 of 4] DIST_EXPECT_ALL_EQ"));
  EXPECT_THAT(
      tc, HasSubstr("<property name=\"disttest_world_size\" value=\"4\"/>"));
  EXPECT_THAT(
      tc, HasSubstr("<property name=\"disttest_backend\" value=\"gloo\"/>"));
  EXPECT_THAT(
      tc, HasSubstr(std::string("<property name=\"disttest_launch\" value=\"") +
                    GetParam().launch + "\"/>"));
  EXPECT_THAT(tc, HasSubstr("<property name=\"disttest_rerun\" value=\""));
}

// --gtest_output=json holds what the XML holds: each rank's properties and
// the failures with their ranks.
TEST_P(VerdictsTest, JsonOutputHasEveryRanksDetail) {
  const std::string path = TempPath(".json");
  std::vector<std::string> args = {
      GetParam().binary,
      "--gtest_filter=Verdicts.RecordsProperties/3ranks:Verdicts."
      "AllEqDisagrees/4ranks",
      "--gtest_output=json:" + path};
  if (*GetParam().extra_arg != '\0') args.push_back(GetParam().extra_arg);
  ChildRun run = RunChild(args, {{"VERDICTS_LAUNCH", GetParam().launch}},
                          std::chrono::seconds(60));
  EXPECT_EQ(run.exit_code, 1) << run.out;
  nlohmann::json json = nlohmann::json::parse(ReadFile(path));
  std::filesystem::remove(path);
  std::map<std::string, nlohmann::json> tests;
  for (const auto& suite : json["testsuites"]) {
    for (const auto& test : suite["testsuite"]) tests[test["name"]] = test;
  }
  const nlohmann::json& props = tests["RecordsProperties/3ranks"];
  // Rank threads record into their process's one result: the ranks'.
  for (int r = 0; r < 3 && !Threads(); ++r) {
    EXPECT_EQ(props.value(fmt::format("rank{}.marker-key", r), ""),
              std::to_string(r))
        << props.dump(1);
  }
  EXPECT_EQ(props.value(Threads() ? "ranks.marker-only-rank1"
                                  : "rank1.marker-only-rank1",
                        ""),
            "yes");
  EXPECT_EQ(props.value("disttest_world_size", ""), "3");
  const nlohmann::json& failed = tests["AllEqDisagrees/4ranks"];
  ASSERT_EQ(failed["failures"].size(), 1u) << failed.dump(1);
  EXPECT_THAT(failed["failures"][0]["failure"].get<std::string>(),
              HasSubstr("[ranks 0-3 of 4] DIST_EXPECT_ALL_EQ(rank() == 1 ? 43 "
                        ": 42): the 4 ranks disagree:"));
  EXPECT_THAT(failed.value("disttest_rerun", ""),
              HasSubstr("--gtest_filter=Verdicts.AllEqDisagrees/4ranks"));
}

// --gtest_fail_fast stops after the first failing distributed test as after
// a plain one: the rest are skipped, their ranks never started.
TEST_P(VerdictsTest, FailFastStopsAfterTheFirstFailingDistributedTest) {
  Verdict v =
      Run("Verdicts.FailsOnRank1Only/2ranks:Verdicts.PrintsLines/2ranks",
          {{"GTEST_FAIL_FAST", "1"}});
  EXPECT_EQ(v.run.exit_code, 1);
  EXPECT_THAT(v.run.out, HasSubstr("[  FAILED  ] Verdicts.FailsOnRank1Only/"
                                   "2ranks"));
  EXPECT_THAT(v.run.out, HasSubstr("[  SKIPPED ] Verdicts.PrintsLines/2ranks"));
  EXPECT_THAT(v.run.out + v.run.err, Not(HasSubstr("marker-stdout from rank")));
}

// RecordProperty() in a rank reaches the parent's XML, per rank; a pooled
// rank records into the test it runs, not into the one it started with.
TEST_P(VerdictsTest, PropertiesARankRecordsReachTheXmlPerRank) {
  Verdict v = Run("Verdicts.RecordsProperties/3ranks");
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out << v.run.err;
  std::string tc = TestCaseXml(v.xml, "RecordsProperties/3ranks");
  if (Threads()) {
    // Rank threads record into their process's one gtest result: each
    // property once, as the ranks' together (whose it was cannot be told),
    // never as one rank's.
    EXPECT_THAT(tc, HasSubstr("<property name=\"ranks.marker-only-rank1\" "
                              "value=\"yes\"/>"));
    EXPECT_THAT(tc, ::testing::ContainsRegex(
                        "<property name=\"ranks.marker-key\" value=\"[012]\""));
    EXPECT_THAT(tc, Not(HasSubstr("\"rank0.marker")));
    EXPECT_THAT(tc, Not(HasSubstr("\"rank1.marker")));
    return;
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(
        tc, HasSubstr(fmt::format(
                "<property name=\"rank{}.marker-key\" value=\"{}\"/>", r, r)))
        << tc;
  }
  EXPECT_THAT(tc, HasSubstr("<property name=\"rank1.marker-only-rank1\" "
                            "value=\"yes\"/>"));
  EXPECT_THAT(tc, Not(HasSubstr("rank0.marker-only-rank1")));
  Verdict pooled = Run("VerdictsPooledDaemon.*");
  EXPECT_EQ(pooled.run.exit_code, 0) << pooled.run.out << pooled.run.err;
  // A property is the test's: the pool goes on with the same ranks.
  if (std::string(GetParam().launch) == "fork") {
    auto tests = PoolLines(pooled.run.out, 1);
    EXPECT_EQ(tests["AfterTheProperty"],
              std::make_pair(tests["AfterTheDaemon"].first, 3));
  }
  EXPECT_THAT(
      TestCaseXml(pooled.xml, "AfterTheDaemon/2ranks"),
      HasSubstr("<property name=\"rank1.marker-pooled\" value=\"1\"/>"));
  EXPECT_THAT(TestCaseXml(pooled.xml, "StartsADaemon/2ranks"),
              Not(HasSubstr("marker-pooled")));
}

// The rerun line keeps the DISTTEST_* variables that shaped the run.
TEST_P(VerdictsTest, RerunKeepsTheRunsDisttestVariables) {
  Verdict v =
      Run("Verdicts.FailsOnRank1Only/2ranks",
          {{"DISTTEST_NO_HOST_ARENA", "1"}, {"DISTTEST_TIMEOUT", "45"}});
  EXPECT_EQ(v.run.exit_code, 1);
  std::string user_args =
      *GetParam().extra_arg ? std::string(GetParam().extra_arg) + " " : "";
  EXPECT_THAT(v.run.out,
              HasSubstr(std::string("rerun this test alone: "
                                    "DISTTEST_NO_HOST_ARENA=1 "
                                    "DISTTEST_TIMEOUT=45 ") +
                        GetParam().binary + " " + user_args +
                        "--gtest_filter=Verdicts.FailsOnRank1Only/2ranks\n"));
}

// DISTTEST_TRACE: a Chrome trace event file per test, read back here: a
// track per rank with its phases, every collective with its caller and
// state, and the failures; the failing test prints its path.
// Reused ranks: each test's trace has its own body and collectives, the
// second test's numbered on from the first's.
TEST_P(VerdictsTest, TraceOfPooledTestsHasEachTestsOwnTimeline) {
  const std::string dir = TempPath(".trace");
  Verdict v = Run("VerdictsPooled.First/2ranks:VerdictsPooled.Second/2ranks",
                  {{"DISTTEST_TRACE", dir}});
  EXPECT_EQ(v.run.exit_code, 0) << v.run.out;
  for (const char* test : {"First", "Second"}) {
    SCOPED_TRACE(test);
    const std::string path =
        fmt::format("{}/VerdictsPooled.{}.2ranks.trace.json", dir, test);
    nlohmann::json trace = nlohmann::json::parse(ReadFile(path));
    std::map<int, std::set<std::string>> spans;  // Per rank.
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      std::string name = e["name"];
      if (e["cat"] == "collective") {
        name += fmt::format(" {}", e["args"]["state"].get<std::string>());
      }
      spans[e["tid"].get<int>()].insert(name);
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(spans[r].count("body"), 1u) << r;
      EXPECT_EQ(spans[r].count("allreduce(1 x int32, sum) completed"), 1u)
          << r << "\n"
          << trace.dump(1);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_P(VerdictsTest, TraceHasEachRanksTimelineItsCollectivesAndItsFailures) {
  const std::string dir = TempPath(".trace");
  Verdict v = Run("VerdictsShortTimeout.StopsAfterABroadcast/4ranks",
                  {{"DISTTEST_TRACE", dir}});
  EXPECT_EQ(v.run.exit_code, 1);
  const std::string path =
      dir + "/VerdictsShortTimeout.StopsAfterABroadcast.4ranks.trace.json";
  EXPECT_THAT(v.run.out,
              HasSubstr("[ disttest ] its timeline (Perfetto, chrome://"
                        "tracing): " +
                        path));
  nlohmann::json trace = nlohmann::json::parse(ReadFile(path));
  std::filesystem::remove_all(dir);
  std::map<int, std::set<std::string>> spans;  // Per rank.
  std::map<int, int> failures;
  std::set<std::string> threads;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") {
      threads.insert(e["args"]["name"].get<std::string>());
    }
    if (ph == "X") {
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
      std::string name = e["name"];
      if (e["cat"] == "collective") {
        name += fmt::format(" #{} {} {}", e["args"]["number"].get<int>(),
                            e["args"]["called"].get<std::string>(),
                            e["args"]["state"].get<std::string>());
      }
      spans[e["tid"].get<int>()].insert(name);
    }
    if (ph == "i" && e["name"] == "failure") ++failures[e["tid"].get<int>()];
  }
  EXPECT_EQ(threads,
            (std::set<std::string>{"rank 0", "rank 1", "rank 2", "rank 3"}));
  const std::string at = "at verdicts_child_.cc:";
  const int line = LineOf("marker-stops-after-broadcast");
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    for (const char* phase : {"start", "connect", "set-up", "body"}) {
      EXPECT_EQ(spans[r].count(phase), 1u) << phase;
    }
    EXPECT_EQ(spans[r].count("barrier() #0 (disttest's, before the body) "
                             "completed"),
              1u);
    EXPECT_EQ(
        spans[r].count(fmt::format(
            "broadcast(16 x int32, root 0) #1 {}{} completed", at, line - 1)),
        1u);
    if (r == 2) {
      EXPECT_EQ(failures[r], 0);  // It hung; it did not fail.
      continue;
    }
    EXPECT_EQ(spans[r].count(fmt::format(
                  "allreduce(8 x float32, sum) #2 {}{} failed", at, line + 4)),
              1u);
    EXPECT_EQ(failures[r], 1);
  }
  EXPECT_EQ(trace["otherData"]["test"],
            "VerdictsShortTimeout.StopsAfterABroadcast/4ranks");
}

}  // namespace
}  // namespace disttest::testing
