// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The steps of a launched test (launched.cc): whether every rank sees the
// fixtures' directories, then each step, run by the ranks it needs, judged
// and reported by rank 0 and mirrored by the others.
#include "glue/launched_steps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "glue/rank_program.h"
#include "harness/launched/keys.h"
#include "harness/launched/launched_rank_host.h"
#include "harness/launched/step_protocol.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/report/verdict.h"
#include "launch/launch_internal.h"

namespace disttest::internal {

using launched::Clock;
using launched::LaunchedJob;
using launched::StepKeys;

void Fatal(const TestSpec& spec, const std::string& message) {
  GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, message.c_str(),
                    ::testing::TestPartResult::kFatalFailure);
}

void Skip(const TestSpec& spec, const std::string& why) {
  GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                    ::testing::TestPartResult::kSkip);
}

namespace {

// Rank 0 made the fixtures' directories, in its TMPDIR; a rank on another
// node sees them only where every node shares that directory. Each rank
// says whether it sees them, rank 0 reads what all said and shares its
// finding, and when one of the first `users` (the ranks that run a step)
// does not see them, all fail the test alike, before any fixture runs,
// with what this returns (else ""). The run goes on with the next test.
std::string FixtureDirsUnseen(LaunchedJob& job, int seq,
                              const std::string& joined, int users,
                              Clock::time_point deadline,
                              const std::string& name) {
  const std::vector<std::string> dirs = FixtureDirs::Split(joined);
  const bool seen =
      std::all_of(dirs.begin(), dirs.end(), [](const std::string& dir) {
        std::error_code ec;
        return std::filesystem::is_directory(dir, ec);
      });
  const char* tmpdir = std::getenv("TMPDIR");
  job.store().set(
      launched::FixtureSeenKey(seq, job.rank()),
      fmt::format("{}\n{}\n{}", seen ? "seen" : "unseen", Hostname(),
                  tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp"));
  std::string finding = "ok";
  if (job.rank() == 0) {
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int r = 0; r < job.size(); ++r) {
      keys.push_back(launched::FixtureSeenKey(seq, r));
      from.push_back(r);
    }
    job.liveness().Await(keys, deadline, from,
                         fmt::format("the fixtures of {}", name));
    const std::string rank0_host = Hostname();
    // Ranks beyond every step's world size never use the directories.
    std::map<std::string, std::vector<int>> unseen;  // By host and TMPDIR.
    for (int r = 0; r < std::min(users, job.size()); ++r) {
      const std::vector<char> v =
          job.store().get(keys[static_cast<std::size_t>(r)]);
      const std::string text(v.begin(), v.end());
      const auto a = text.find('\n'), b = text.find('\n', a + 1);
      if (text.substr(0, a) == "seen") continue;
      unseen[fmt::format("on {} (TMPDIR {})", text.substr(a + 1, b - a - 1),
                         text.substr(b + 1))]
          .push_back(r);
    }
    if (!unseen.empty()) {
      std::vector<std::string> who;
      for (const auto& [where, ranks] : unseen) {
        who.push_back(fmt::format("rank{} {} {}", ranks.size() == 1 ? "" : "s",
                                  fmt::join(ranks, ", "), where));
      }
      finding = fmt::format(
          "{} cannot see the fixture director{} {}, which rank 0 made on {}: "
          "under a launcher a DistributedFixture needs a TMPDIR that every "
          "node shares; set TMPDIR to one shared directory on every node (the "
          "fixture did not run)",
          fmt::join(who, "; "), dirs.size() == 1 ? "y" : "ies",
          fmt::join(dirs, ", "), rank0_host);
    }
  }
  finding = launched::ShareFromRankZero(
      job, launched::FixturesSeenKey(seq), finding, deadline,
      fmt::format("the fixtures of {}", name));
  return finding == "ok" ? "" : finding;
}

// Rank 0's results before a body gtest did not run, which its own gtest
// shows already: its skips as they are (they decide whether every rank
// skipped), its failures as one that points to them.
std::vector<::testing::TestPartResult> SaidAbove(
    const std::vector<::testing::TestPartResult>& recorded) {
  std::vector<::testing::TestPartResult> out;
  const ::testing::TestPartResult* failure = nullptr;
  for (const ::testing::TestPartResult& r : recorded) {
    if (r.skipped()) {
      out.push_back(r);
    } else if (failure == nullptr || r.fatally_failed()) {
      failure = &r;
    }
  }
  if (failure != nullptr) {
    out.emplace_back(failure->type(), failure->file_name(),
                     failure->line_number(),
                     "failed before its body, in the fixture's constructor or "
                     "SetUp() (above)");
  }
  return out;
}

// One distributed step of a test (a fixture, or the test itself): the
// first spec.world_size ranks run it; rank 0 judges and reports it, the
// others mirror its verdict. True when the test goes on.
bool RunStep(LaunchedJob& job, DistributedTest& test, const TestSpec& spec,
             int seq, int step, DistributedFixture* fixture,
             Clock::time_point deadline, bool no_body, bool* told) {
  const StepKeys keys(seq, step);
  if (job.rank() < spec.world_size) {
    GtestRankProgram program(test, fixture);
    if (no_body) {
      program.ReportFirst(job.rank() == 0 ? SaidAbove(RecordedInThisRank())
                                          : RecordedInThisRank());
      program.ReportOnly();
      *told = true;
    }
    RunLaunchedRank(job, keys, spec.world_size, program, spec.options, deadline,
                    spec.name);
  }
  RankVerdict verdict = RankVerdict::kFailed;
  if (job.rank() == 0) {
    const std::vector<RankReport> reports =
        GatherReports(job, keys, spec, deadline);
    std::vector<Finding> findings = Judge(spec, reports);
    // Another process answered for one of the ranks: whatever they said.
    if (std::string duplicate = job.Duplicate(); !duplicate.empty()) {
      findings.insert(
          findings.begin(),
          {Finding::Kind::kFailure, spec.file, spec.line, duplicate, {}});
    }
    // The run broke in this step (it was whole at its start): why comes
    // first, before the failures it made ("connection closed by peer").
    if (std::string broken = job.liveness().broken();
        !broken.empty() &&
        std::any_of(reports.begin(), reports.end(), RankFailed)) {
      findings.insert(findings.begin(),
                      {Finding::Kind::kFailure,
                       spec.file,
                       spec.line,
                       fmt::format("the launched ranks stopped working "
                                   "together in this test, and disttest cut "
                                   "their connections: {}",
                                   broken),
                       {}});
    }
    Reraise(findings);
    const std::string trace = TraceOf(spec, reports);
    verdict = ::testing::Test::HasFailure()  ? RankVerdict::kFailed
              : ::testing::Test::IsSkipped() ? RankVerdict::kSkipped
                                             : RankVerdict::kPassed;
    if (verdict == RankVerdict::kFailed) {
      if (!trace.empty()) {
        std::printf(
            "[ disttest ] its timeline (Perfetto, chrome://tracing): %s\n",
            trace.c_str());
      }
      std::printf(
          "[ disttest ] rerun this test alone: the same launcher command "
          "with %s\n",
          ShellQuote("--gtest_filter=" + GtestFilterOf(spec.name)).c_str());
      std::fflush(stdout);
    }
    PublishVerdict(job, keys, verdict);
  } else {
    verdict = AwaitVerdict(job, keys, spec.name, deadline);
    if (verdict == RankVerdict::kFailed) {
      const NoBreakOnFailure no_break;  // Rank 0's report, not this rank's.
      Fatal(spec, "failed; rank 0 reports why");
    } else if (verdict == RankVerdict::kSkipped) {
      Skip(spec, "skipped (see rank 0)");
    }
  }
  // A failed test's communicators may hold messages no rank took, and one
  // that failed on any rank may be out of step (a caught timeout): the next
  // test gets new ones on every rank.
  bool comm_failed = false;
  try {
    comm_failed = job.store().check({keys.CommFailed()});
  } catch (const std::exception&) {
    comm_failed = true;  // The store is gone: nothing is kept either way.
  }
  if (verdict == RankVerdict::kFailed || comm_failed) {
    job.communicators().Drop();
  }
  return verdict == RankVerdict::kPassed;
}

}  // namespace

void RunSteps(LaunchedJob& job, DistributedTest& test, const TestSpec& spec,
              int seq, bool no_body, bool* told) {
  auto deadline = [&] { return Clock::now() + spec.options.timeout; };
  launched::MeetAtTest(job, seq, spec.name, deadline());
  auto& fixtures = FixtureAccess::fixtures(test);
  const std::vector<TestSpec> steps = PlanSteps(spec, FixtureSteps(test));
  int users = 0;  // The ranks that run a step: they use the directories.
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const TestSpec& step = steps[i];
    if (i < fixtures.size() && step.world_size > job.size()) {
      return Skip(spec, fmt::format("fixture {} needs {} ranks, launched "
                                    "with {}",
                                    step.fixture, step.world_size, job.size()));
    }
    users = std::max(users, step.world_size);
  }
  // Fixtures: rank 0 makes their directories, and everyone uses those
  // (one machine, or a TMPDIR every node shares).
  FixtureDirs dirs;
  if (!fixtures.empty()) {
    if (job.rank() == 0) {
      for (auto& f : fixtures) {
        FixtureAccess::SetDir(*f, dirs.Create(f->name()));
      }
    }
    const std::string joined =
        launched::ShareFromRankZero(job, launched::FixtureDirsKey(seq),
                                    dirs.Joined(), deadline(), spec.name);
    if (job.rank() != 0) AdoptFixtureDirs(test, joined);
    const std::string unseen =
        FixtureDirsUnseen(job, seq, joined, users, deadline(), spec.name);
    if (!unseen.empty()) return Fatal(spec, unseen);
  }
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    if (!RunStep(job, test, steps[i], seq, static_cast<int>(i),
                 fixtures[i].get(), deadline(), no_body, told) ||
        PendingInterrupt() != 0) {
      return;
    }
  }
  RunStep(job, test, steps.back(), seq, static_cast<int>(fixtures.size()),
          nullptr, deadline(), no_body, told);
}

}  // namespace disttest::internal
