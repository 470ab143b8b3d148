// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Whether this process is a rank of a launched run (the launcher's
// variables), and what follows from it: a rank other than 0 goes quiet at
// start, every rank joins the job at its first test and says goodbye at the
// end. Apart from the run of each test (launched.cc).
#include "glue/launched_detection.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "base/own_files.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/launch/launcher_env.h"
#include "env/internal_names.h"
#include "glue/launched.h"
#include "harness/process/command_line.h"
#include "harness/process/interrupt.h"
#include "harness/process/process_hygiene.h"
#include "launch/launch_internal.h"

namespace disttest::internal {
namespace {

using launched::LaunchedJob;

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
      const auto set = [](const char* name) {
        const char* value = std::getenv(name);
        return value != nullptr && *value != '\0';
      };
      bool launcher_found = false;
      for (const char* rank : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                               "MV2_COMM_WORLD_RANK"}) {
        launcher_found = launcher_found || set(rank);
      }
      // A Slurm batch script's own shell (SLURM_PROCID=0, no step) is no
      // launcher's rank: its tests spawn their ranks, as anywhere.
      launcher_found =
          launcher_found || (set("SLURM_PROCID") &&
                             (set("SLURM_STEP_ID") || set("SLURM_STEPID") ||
                              set("SLURM_STEP_NUM_TASKS")));
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
  // Another process joined as one of the ranks after the last test's
  // verdict: the run fails all the same, before gtest writes its report.
  void OnEnvironmentsTearDownStart(const ::testing::UnitTest&) override {
    if (!used_ || Job().rank() != 0) return;
    if (const std::string duplicate = Job().Duplicate(); !duplicate.empty()) {
      GTEST_MESSAGE_AT_(nullptr, -1, duplicate.c_str(),
                        ::testing::TestPartResult::kNonFatalFailure);
    }
  }
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

}  // namespace

bool LaunchedRun() { return Detect().launched; }

const LauncherEnv* LaunchedEnvOrNull() {
  const Detection& d = Detect();
  return d.launched && d.error.empty() ? &d.env : nullptr;
}

const std::string& LauncherEnvError() { return Detect().error; }

LaunchedJob& JoinLaunchedJob() {
  LaunchedJob& job = Job();
  GoodbyeListener::MarkUsed();
  return job;
}

}  // namespace disttest::internal
