// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "glue/launched.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/own_files.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/launch/launcher_env.h"
#include "env/internal_names.h"
#include "glue/rank_program.h"
#include "harness/launched/job.h"
#include "harness/launched/keys.h"
#include "harness/launched/launched_rank_host.h"
#include "harness/launched/step_protocol.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/process/process_hygiene.h"
#include "harness/report/verdict.h"
#include "harness/spawn/rank_spawner.h"
#include "launch/launch_internal.h"

namespace disttest::internal {
namespace {

using launched::Clock;
using launched::LaunchedJob;
using launched::StepKeys;

// The variables a launcher is recognised by, for messages.
const char* VariablesOf(const std::string& launcher) {
  if (launcher == "torchrun") return "RANK, WORLD_SIZE and MASTER_ADDR";
  if (launcher == "slurm") return "SLURM_PROCID and SLURM_NTASKS";
  if (launcher == "openmpi") {
    return "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE";
  }
  return "the launcher's variables";
}

struct Detection {
  bool launched = false;
  std::string error;  // Set: launched, but the environment is unusable.
  LauncherEnv env;
};

const Detection& Detect() {
  static const Detection detection = [] {
    Detection d;
    if (std::getenv(env::kInternalChildTest) != nullptr) return d;
    // A death test's child runs the body as the rank that started it.
    if (IsDeathTestChild()) return d;
    const char* mode_variable = std::getenv(env::kLauncher);
    const std::string mode = mode_variable != nullptr ? mode_variable : "";
    if (mode == "spawn") return d;
    // "external" is the mode's old name, still understood.
    const bool forced = mode == "launched" || mode == "external";
    if (!mode.empty() && !forced) {
      d.launched = true;
      d.error = fmt::format("{}={}: expected \"launched\" or \"spawn\"",
                            env::kLauncher, mode);
      return d;
    }
    try {
      d.env = DetectLauncherEnv();
      // A launcher that started one process (`srun -n1 ctest`) leaves the
      // spawning to disttest.
      d.launched = forced || d.env.world_size > 1;
    } catch (const ConfigError& e) {
      bool launcher_found = false;
      for (const char* rank : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                               "MV2_COMM_WORLD_RANK", "SLURM_PROCID"}) {
        const char* value = std::getenv(rank);
        if (value != nullptr && *value != '\0') launcher_found = true;
      }
      if (forced || launcher_found) {
        d.launched = true;
        d.error = e.what();
      }
    }
    return d;
  }();
  return detection;
}

// Ranks other than 0 stay quiet: no gtest output, no XML and no stdout
// (rank 0 reports for everyone); with DISTTEST_LOG_DIR their stdout and
// stderr, gtest's output included, go to dir/rank-<r>.log. gtest creates its
// XML writer after this runs, so it is dropped when the run starts.
class DropXmlOutput : public ::testing::EmptyTestEventListener {
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    ::testing::TestEventListeners& listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_xml_generator());
  }
};

const bool kQuietRank = [] {
  // Before any descriptor opens here (whichever static initialiser runs
  // first): a log must not land on a closed stdout's number.
  ClaimStandardDescriptors();
  const Detection& d = Detect();
  if (!d.launched || !d.error.empty() || d.env.rank == 0) return false;
  // Said before it goes quiet: a rank started by an enclosing job's
  // variables, rather than by a launcher of this binary, must not just
  // hang, or exit without a word.
  std::fprintf(stderr,
               "[ disttest ] rank %d of %d, launched by %s: rank 0 (at "
               "%s:%d) serves the store and reports for every rank; this "
               "rank's gtest output is dropped (DISTTEST_LOG_DIR keeps it)\n",
               d.env.rank, d.env.world_size, d.env.launcher.c_str(),
               d.env.master_addr.c_str(), d.env.master_port);
  std::fflush(stderr);
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  listeners.Append(new DropXmlOutput);
  // stdout is rank 0's; stderr stays for what must be seen (a crash, the
  // stacks of a hang).
  const char* dir = std::getenv(env::kLogDir);
  if (dir != nullptr && *dir != '\0') {
    std::string path =
        (std::filesystem::path(dir) / fmt::format("rank-{}.log", d.env.rank))
            .string();
    std::string why = MakeOwnDirectory(dir);
    const int fd =
        why.empty() ? CreateOwnFile(path, /*append=*/true, &why) : -1;
    if (fd >= 0) {
      std::fflush(stdout);
      (void)!dup2(fd, STDOUT_FILENO);
      (void)!dup2(fd, STDERR_FILENO);
      close(fd);
      std::setvbuf(stdout, nullptr, _IOLBF, 0);
    } else {
      // Its output goes where it would without the variable, and why.
      std::fprintf(stderr,
                   "[ disttest ] %s=%s: %s; rank %d's output stays on "
                   "stderr\n",
                   env::kLogDir, dir, why.c_str(), d.env.rank);
      delete listeners.Release(listeners.default_result_printer());
      (void)!std::freopen("/dev/null", "w", stdout);
    }
    // The log keeps this rank's own view of each test.
  } else {
    delete listeners.Release(listeners.default_result_printer());
    (void)!std::freopen("/dev/null", "w", stdout);
  }
  return true;
}();

// The job, joined at the first call; a failure to join is remembered, so
// that every later test fails at once rather than wait for the ranks again.
LaunchedJob& Job() {
  static LaunchedJob* job = nullptr;
  static std::string failure;
  if (job == nullptr && failure.empty()) {
    const Detection& d = Detect();
    try {
      if (!d.error.empty()) throw ConfigError(d.error);
      job = &LaunchedJob::Join(d.env);
    } catch (const std::exception& e) {
      failure = e.what();
      // Every rank says why it stops (the gtest output of ranks other
      // than 0 is dropped), once.
      if (!d.error.empty()) {
        // The environment itself is unusable: the error says what.
        std::fprintf(stderr,
                     "[ disttest ] cannot join the launched ranks: %s\n",
                     failure.c_str());
      } else {
        std::fprintf(stderr,
                     "[ disttest ] rank %d of %d on %s (launched by %s) "
                     "cannot join the launched ranks: %s\n",
                     d.env.rank, d.env.world_size, Hostname().c_str(),
                     d.env.launcher.c_str(), failure.c_str());
        if (IsLoopback(d.env.master_addr)) {
          std::fprintf(stderr,
                       "[ disttest ] if %s come from an enclosing job rather "
                       "than from a launcher that started this binary, run "
                       "it with %s=spawn\n",
                       VariablesOf(d.env.launcher), env::kLauncher);
        } else {
          std::fprintf(stderr,
                       "[ disttest ] rank 0 serves the store on %s:%d: this "
                       "node must reach it there (check MASTER_ADDR, the "
                       "port, and any firewall between the nodes)\n",
                       d.env.master_addr.c_str(), d.env.master_port);
        }
      }
      std::fflush(stderr);
    }
  }
  if (job == nullptr) throw Error(failure);
  return *job;
}

// Says goodbye at the end of the run, so that rank 0 keeps serving the
// store until every rank has its last verdict.
class GoodbyeListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (used_) Job().Goodbye();
    // After a signal (StopAfterInterrupt): once every rank has its last
    // verdict, this process ends by it.
    FinishInterrupted();
  }
  static void MarkUsed() { used_ = true; }

 private:
  static inline bool used_ = false;
};

const bool kGoodbyeInstalled = [] {
  if (!Detect().launched) return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(new GoodbyeListener);
  return true;
}();

void Fatal(const TestSpec& spec, const std::string& message) {
  GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, message.c_str(),
                    ::testing::TestPartResult::kFatalFailure);
}

void Skip(const TestSpec& spec, const std::string& why) {
  GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                    ::testing::TestPartResult::kSkip);
}

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

// One distributed step of a test (a fixture, or the test itself): the
// first spec.world_size ranks run it; rank 0 judges and reports it, the
// others mirror its verdict. True when the test goes on.
bool RunStep(LaunchedJob& job, DistributedTest& test, const TestSpec& spec,
             int seq, int step, DistributedFixture* fixture,
             Clock::time_point deadline) {
  const StepKeys keys(seq, step);
  if (job.rank() < spec.world_size) {
    GtestRankProgram program(test, fixture);
    RunLaunchedRank(job, keys, spec.world_size, program, spec.options, deadline,
                    spec.name);
  }
  RankVerdict verdict = RankVerdict::kFailed;
  if (job.rank() == 0) {
    const std::vector<RankReport> reports =
        GatherReports(job, keys, spec, deadline);
    std::vector<Finding> findings = Judge(spec, reports);
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
          "with --gtest_filter=%s\n",
          spec.name.c_str());
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
  if (verdict == RankVerdict::kFailed) job.communicators().Drop();
  return verdict == RankVerdict::kPassed;
}

// Whether gtest's test name `name` is a distributed test's: a part of it
// is "<N>ranks" or "invalid_world_size_..." (registration.h). Plain tests
// may differ between ranks (parameters from the local devices); the ranks
// must agree on the distributed ones.
bool IsDistributedTestName(std::string_view name) {
  while (!name.empty()) {
    const std::size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    const std::size_t digits = part.find_first_not_of("0123456789");
    if ((digits > 0 && digits != std::string_view::npos &&
         part.substr(digits) == "ranks") ||
        part.rfind("invalid_world_size_", 0) == 0) {
      return true;
    }
    if (slash == std::string_view::npos) break;
    name.remove_prefix(slash + 1);
  }
  return false;
}

// The distributed tests this process will run, in order, with its world
// size and repeat count: compared across the ranks before the first test.
launched::RunPlan ThisRunPlan(const LaunchedJob& job) {
  launched::RunPlan plan;
  plan.world_size = job.size();
  plan.repeat = GTEST_FLAG_GET(repeat);
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(j);
      if (info.should_run() && IsDistributedTestName(info.name())) {
        plan.tests.push_back(fmt::format("{}.{}", suite.name(), info.name()));
      }
    }
  }
  return plan;
}

// Why the ranks cannot run this run's tests together (rank 1 given fewer
// tests, another WORLD_SIZE), found at the first test and said by every
// test; "" when they can.
std::string PlansDiffer(LaunchedJob& job, const TestSpec& spec) {
  static bool compared = false;
  static std::string differ;
  if (!compared) {
    compared = true;
    try {
      launched::ComparePlans(job, ThisRunPlan(job),
                             Clock::now() + spec.options.timeout);
    } catch (const std::exception& e) {
      differ = e.what();
      job.liveness().Break(differ);
    }
  }
  return differ;
}

// The test's steps (each fixture, then the test) on the ranks they need:
// the meeting, the fixtures' directories, then each step in turn.
void RunSteps(LaunchedJob& job, DistributedTest& test, const TestSpec& spec,
              int seq) {
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
                 fixtures[i].get(), deadline()) ||
        PendingInterrupt() != 0) {
      return;
    }
  }
  RunStep(job, test, steps.back(), seq, static_cast<int>(fixtures.size()),
          nullptr, deadline());
}

// The first test that breaks the run: a rank other than 0 says so on its
// own stderr too (its gtest output is dropped, and rank 0 may never hear of
// it); the tests after fail at once, saying it again.
void BreakTheRun(LaunchedJob& job, const TestSpec& spec,
                 const std::exception& e) {
  static bool said = false;
  if (job.rank() != 0 && !said) {
    said = true;
    std::fprintf(stderr,
                 "[ disttest ] rank %d of %d on %s: %s: %s; this rank's "
                 "later tests fail at once\n",
                 job.rank(), job.size(), Hostname().c_str(), spec.name.c_str(),
                 e.what());
    std::fflush(stderr);
  }
  job.liveness().Break(e.what());
  job.communicators().Drop();
  Fatal(spec, e.what());
}

}  // namespace

bool LaunchedRun() { return Detect().launched; }

void RunLaunched(DistributedTest& test) {
  TestSpec spec = SpecOf(test);
  LaunchedJob* job = nullptr;
  try {
    spec.options = EffectiveOptions(test);
  } catch (const std::exception& e) {
    return Fatal(spec, e.what());  // A malformed option or variable.
  }
  try {
    RecordProperties(spec);
    job = &Job();
    GoodbyeListener::MarkUsed();
  } catch (const std::exception& e) {
    Fatal(spec, Detect().error.empty()
                    ? fmt::format("disttest cannot join the launched ranks: {}",
                                  e.what())
                    : Detect().error);
    return;
  }
  ::testing::Test::RecordProperty("disttest_launcher", job->env().launcher);
  if (std::string differ = PlansDiffer(*job, spec); !differ.empty()) {
    return Fatal(spec, "not run: " + differ);
  }
  const int seq = job->NextSeq();
  if (std::string broken = job->liveness().broken(); !broken.empty()) {
    Fatal(spec, fmt::format("not run: the launched ranks stopped working "
                            "together in an earlier test ({})",
                            broken));
    return;
  }
  const int n = spec.world_size;
  if (n < 1 || n > kMaxWorldSize) {
    Fatal(spec, fmt::format("world size {} is invalid: it must be in [1, {}]",
                            n, kMaxWorldSize));
    return;
  }
  if (n > job->size()) {
    return Skip(
        spec, fmt::format("needs {} ranks, launched with {}", n, job->size()));
  }
  if (std::string why = ParallelMisfit(spec); !why.empty()) {
    return Skip(spec, why);
  }

  // SIGTERM or SIGINT meanwhile ends this test with its report (each
  // rank's side thread takes its ledger and stacks and cuts the
  // collectives), and gtest skips the rest.
  InterruptGuard interrupts;
  struct AfterInterrupt {
    const TestSpec& spec;
    bool quiet;
    ~AfterInterrupt() { StopAfterInterrupt(spec, quiet, /*launched=*/true); }
  } after{spec, job->rank() != 0};
  // Each step (each fixture, then the test) gets the whole timeout, as
  // in spawned mode.
  try {
    RunSteps(*job, test, spec, seq);
  } catch (const std::exception& e) {
    BreakTheRun(*job, spec, e);
  }
}

}  // namespace disttest::internal
