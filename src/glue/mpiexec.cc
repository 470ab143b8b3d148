// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "glue/mpiexec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/child_process.h"
#include "disttest/env/names.h"
#include "glue/launched.h"
#include "harness/process/command_line.h"
#include "harness/process/descendants.h"
#include "harness/process/interrupt.h"
#include "rendezvous/bind.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;

void Raise(const std::string& file, int line, const std::string& text,
           ::testing::TestPartResult::Type type) {
  GTEST_MESSAGE_AT_(file.c_str(), line, text.c_str(), type);
}

// MPIEXEC_EXECUTABLE, else mpiexec on PATH; "" when there is none.
std::string FindMpiexec() {
  const char* named = std::getenv("MPIEXEC_EXECUTABLE");
  if (named != nullptr && *named != '\0') return named;
  return FindProgram("mpiexec");
}

// Which MPI `mpiexec` is ("Open MPI", "MPICH", ...), by its --version; ""
// when it is none that disttest knows (a script of the same name).
std::string AskWhichMpi(const std::string& mpiexec, std::string* said) {
  ChildProcess version = ChildProcess::Start({mpiexec, "--version"});
  if (!version.started() ||
      !version.Wait(Clock::now() + std::chrono::seconds(20))) {
    version.Kill();
    *said = "it did not answer --version within 20 s";
    return "";
  }
  *said = version.Output();
  for (const char* mpi :
       {"Open MPI", "OpenRTE", "MPICH", "HYDRA", "Intel(R) MPI", "MVAPICH"}) {
    if (said->find(mpi) != std::string::npos) return mpi;
  }
  return "";
}

// The same, asked once for each path.
std::string WhichMpi(const std::string& mpiexec, std::string* said) {
  static std::map<std::string, std::pair<std::string, std::string>> known;
  if (auto it = known.find(mpiexec); it != known.end()) {
    *said = it->second.second;
    return it->second.first;
  }
  std::string mpi = AskWhichMpi(mpiexec, said);
  known[mpiexec] = {mpi, *said};
  return mpi;
}

// The ranks' store port, bound here (SO_REUSEADDR, never listening) for as
// long as mpiexec runs: rank 0's store binds it with SO_REUSEADDR too and
// takes it over, while the kernel gives it to no other bind(0) and no
// outgoing connection. A port picked and let go was once bound by mpiexec's
// own daemons before rank 0 came (Open MPI then read the ranks' store
// requests: "tcp_peer_recv_connect_ack: invalid header type"). {fd, port};
// {-1, 0} when none can be bound.
std::pair<int, int> ReserveLoopbackPort() {
  try {
    return BindTcp("127.0.0.1", 0, 0);
  } catch (const std::exception&) {
    return {-1, 0};
  }
}

std::vector<std::string> Words(const char* text) {
  std::vector<std::string> words;
  std::istringstream in(text != nullptr ? text : "");
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The command: mpiexec, its flags, -n W, and this binary running only the
// test, with its verdict in a JSON file.
std::vector<std::string> Command(const std::string& mpiexec,
                                 const std::string& mpi, const TestSpec& spec,
                                 const std::string& json) {
  std::vector<std::string> argv = {mpiexec};
  if (mpi == "Open MPI" || mpi == "OpenRTE") {
    argv.push_back("--oversubscribe");  // More ranks than cores: a test's.
    if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  }
  for (std::string& word : Words(std::getenv(env::kMpiexecFlags))) {
    argv.push_back(std::move(word));
  }
  argv.insert(argv.end(), {"-n", std::to_string(spec.world_size)});
  const std::vector<std::string> self = ReadCommandLine();
  argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (std::size_t i = 1; i < self.size(); ++i) {
    if (!IsParentOnlyFlag(self[i])) argv.push_back(self[i]);
  }
  argv.push_back("--gtest_filter=" + GtestFilterOf(spec.name));
  // The parent runs it: a DISABLED_ test only when asked to.
  argv.push_back("--gtest_also_run_disabled_tests");
  argv.push_back("--gtest_output=json:" + json);
  argv.push_back("--gtest_color=no");
  return argv;
}

// This process's environment for the ranks: launched ranks (even one) on
// loopback, without this run's sharding or launch mode.
std::vector<std::string> RankEnvironment(int port) {
  const std::set<std::string> dropped(std::begin(env::kRemovedFromChild),
                                      std::end(env::kRemovedFromChild));
  std::vector<std::string> out;
  for (std::string& entry : EnvironmentNow()) {
    const std::string name = entry.substr(0, entry.find('='));
    if (dropped.count(name) != 0 || name == env::kLaunch ||
        name == env::kLauncher || name == "MASTER_ADDR" ||
        name == "MASTER_PORT") {
      continue;
    }
    out.push_back(std::move(entry));
  }
  out.push_back(fmt::format("{}=launched", env::kLauncher));
  out.push_back("MASTER_ADDR=127.0.0.1");
  out.push_back(fmt::format("MASTER_PORT={}", port));
  return out;
}

// SIGTERM to mpiexec (it ends its ranks), then SIGKILL to it and to every
// process it left: each only if it is still the process that was there (a
// pid mpiexec's end freed may be another's by then).
void End(ChildProcess& mpiexec) {
  if (mpiexec.pid() <= 0) return;
  std::vector<std::pair<pid_t, unsigned long long>> below;
  for (pid_t pid : DescendantsOf({mpiexec.pid()})) {
    below.emplace_back(pid, StartedAt(pid));
  }
  kill(mpiexec.pid(), SIGTERM);
  if (!mpiexec.Wait(Clock::now() + std::chrono::seconds(5))) mpiexec.Kill();
  for (const auto& [pid, started] : below) {
    if (started != 0 && StartedAt(pid) == started) kill(pid, SIGKILL);
  }
}

// The skip message rank 0 printed for `name` ("file:line: Skipped\n...").
std::string SkipMessage(const std::string& out) {
  const std::size_t at = out.find(": Skipped\n");
  if (at == std::string::npos) return "";
  const std::size_t from = at + 10;
  const std::size_t end = out.find("\n[  SKIPPED ]", from);
  return out.substr(from,
                    end == std::string::npos ? std::string::npos : end - from);
}

// Raises the failures, or the skip, of one test's run in gtest's JSON.
const char* RaiseRun(const TestSpec& spec, const nlohmann::json& test,
                     const std::string& out) {
  const nlohmann::json failures =
      test.value("failures", nlohmann::json::array());
  for (const auto& f : failures) {
    const std::string text = f.value("failure", "");
    const std::size_t nl = text.find('\n');
    const std::string where = text.substr(0, nl);
    const std::size_t colon = where.rfind(':');
    const bool located = colon != std::string::npos && nl != std::string::npos;
    Raise(located ? where.substr(0, colon) : spec.file,
          located ? std::atoi(where.c_str() + colon + 1) : spec.line,
          located ? text.substr(nl + 1) : text,
          ::testing::TestPartResult::kNonFatalFailure);
  }
  if (!failures.empty()) return "failed";
  if (test.value("result", "") == "SKIPPED") {
    Raise(spec.file, spec.line, SkipMessage(out),
          ::testing::TestPartResult::kSkip);
    return "skipped";
  }
  return "passed";
}

// Raises rank 0's verdict of the test from its JSON report, and returns it
// ("passed", "skipped", "failed"); null when the report holds no run of it
// (a test gtest filtered out or did not run is no verdict).
const char* RaiseReport(const TestSpec& spec, const std::string& json,
                        const std::string& out) {
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (!report.is_object()) return nullptr;
  try {
    for (const auto& suite : report.at("testsuites")) {
      for (const auto& test : suite.at("testsuite")) {
        if (fmt::format("{}.{}", suite.value("name", ""),
                        test.value("name", "")) != spec.name) {
          continue;
        }
        // Run, and by disttest's launched rank 0 (which records the
        // launcher of each test it reaches): a test that gtest listed but
        // never ran (a global SetUp that skipped) is no verdict.
        if (test.value("status", "") != "RUN" ||
            !test.contains("disttest_launcher")) {
          return nullptr;
        }
        return RaiseRun(spec, test, out);
      }
    }
  } catch (const nlohmann::json::exception&) {
    return nullptr;  // Not gtest's report.
  }
  return nullptr;
}

// `out` less gtest's own lines of rank 0's run (this test's are the
// parent's), and rank 0's rerun line (the parent gives its own).
std::string WithoutGtestLines(const std::string& out) {
  static constexpr const char* kDropped[] = {
      "[ RUN",
      "[       OK",
      "[  FAILED",
      "[  PASSED",
      "[  SKIPPED",
      "[==========]",
      "[----------]",
      "Running main()",
      "Note: Google Test filter",
      " 1 FAILED TEST",
      "[ disttest ] rerun this test alone"};
  std::string kept;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    bool drop = line.empty();
    for (const char* prefix : kDropped) {
      drop = drop || line.rfind(prefix, 0) == 0;
    }
    if (!drop) kept += line + "\n";
  }
  return kept;
}

// What mpiexec says of a rank a signal ended, as that rank's failure: "rank
// 1 with PID 0 on node vm exited on signal 11 (Segmentation fault)" (Open
// MPI's words); none where it says nothing of the kind.
void RaiseSignalledRanks(const TestSpec& spec, const std::string& out) {
  constexpr std::string_view kRank = "process rank ";
  constexpr std::string_view kSignal = " exited on signal ";
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const std::size_t rank_at = line.find(kRank);
    const std::size_t signal_at = line.find(kSignal);
    if (rank_at == std::string::npos || signal_at == std::string::npos ||
        signal_at < rank_at) {
      continue;
    }
    const int rank = std::atoi(line.c_str() + rank_at + kRank.size());
    const std::string signal = line.substr(signal_at + kSignal.size());
    Raise(spec.file, spec.line,
          fmt::format("[rank {}/{}] was killed by signal {}, mpiexec says",
                      rank, spec.world_size,
                      signal.substr(0, signal.find_last_not_of(". ") + 1)),
          ::testing::TestPartResult::kNonFatalFailure);
  }
}

std::string Indented(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += "\n  " + line;
  return out;
}

// What made the test's ranks mpiexec's, for its messages.
const char* Who(const TestSpec& spec) {
  return spec.options.backend == Backend::kMpi
             ? "Backend::kMpi (its ranks are started by mpiexec)"
             : "LaunchMode::kMpiexec";
}

// The mpiexec to use and which MPI it is; false, with a skip or failure
// raised, where there is none fit.
bool FindUsableMpiexec(const TestSpec& spec, std::string* mpiexec,
                       std::string* mpi) {
  *mpiexec = FindMpiexec();
  if (mpiexec->empty()) {
    Raise(spec.file, spec.line,
          fmt::format("{}: no mpiexec on PATH (set MPIEXEC_EXECUTABLE; "
                      "Debian: openmpi-bin)",
                      Who(spec)),
          ::testing::TestPartResult::kSkip);
    return false;
  }
  if (access(mpiexec->c_str(), X_OK) != 0) {
    Raise(spec.file, spec.line,
          fmt::format("{}: MPIEXEC_EXECUTABLE={}: {}", Who(spec), *mpiexec,
                      std::strerror(errno)),
          ::testing::TestPartResult::kFatalFailure);
    return false;
  }
  std::string said;
  *mpi = WhichMpi(*mpiexec, &said);
  if (mpi->empty()) {
    Raise(spec.file, spec.line,
          fmt::format("{}: {} is not MPI's mpiexec (not "
                      "Open MPI's, MPICH's, Intel MPI's or MVAPICH's, by its "
                      "--version):{}",
                      Who(spec), *mpiexec, Indented(said.substr(0, 2000))),
          ::testing::TestPartResult::kFatalFailure);
    return false;
  }
  return true;
}

// A directory of this process's own for rank 0's report, removed with
// whatever is in it; path "" when none could be made.
struct ReportDir {
  ReportDir() {
    std::string name =
        (std::filesystem::temp_directory_path() / "disttest-mpiexec-XXXXXX")
            .string();
    if (mkdtemp(name.data()) != nullptr) {
      path = name;
    } else {
      why = fmt::format("cannot make {}: {}", name, std::strerror(errno));
    }
  }
  ~ReportDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
  ReportDir(const ReportDir&) = delete;
  ReportDir& operator=(const ReportDir&) = delete;
  std::string path;
  std::string why;  // Why there is none.
};

// However the test ends: after a SIGTERM or SIGINT, it failed and the rest
// are skipped (StopAfterInterrupt).
struct StopIfInterrupted {
  const TestSpec& spec;
  ~StopIfInterrupted() {
    StopAfterInterrupt(spec, /*quiet=*/false, /*launched=*/false);
  }
};

// mpiexec and its ranks are ended, unless they ended by themselves, however
// the test ends (an exception included).
struct EndUnlessEnded {
  ChildProcess& run;
  bool ended = false;
  ~EndUnlessEnded() {
    if (!ended) End(run);
  }
};

// Waits for mpiexec until it ends, `deadline`, or a SIGTERM or SIGINT to
// this process; true when it ended by itself (else it is ended here).
bool RunToTheEnd(ChildProcess& run, Clock::time_point deadline) {
  while (Clock::now() < deadline && PendingInterrupt() == 0) {
    const auto soon = Clock::now() + std::chrono::milliseconds(100);
    if (run.Wait(std::min(deadline, soon))) return true;
  }
  End(run);
  return false;
}

struct Outcome {
  bool ended = false;      // By itself, before the deadline.
  bool succeeded = false;  // With status 0.
  std::string out;         // What mpiexec and the ranks wrote.
  std::string command;
  const char* verdict = nullptr;  // Rank 0's ("passed", ...); null: none.
};

// The test's verdict beyond rank 0's failures (raised already): an mpiexec
// that did not end, ended without a report, or failed after a report of a
// pass or skip fails the test; a failing test shows what the ranks wrote
// and how to rerun it.
void Judge(const TestSpec& spec, const Outcome& o) {
  if (!o.ended) {
    Raise(spec.file, spec.line,
          fmt::format("mpiexec did not end within the test's timeout and "
                      "grace, or disttest was interrupted (ended by "
                      "disttest); its command: {}; its output:{}",
                      o.command, Indented(o.out)),
          ::testing::TestPartResult::kFatalFailure);
  } else if (o.verdict == nullptr) {
    Raise(spec.file, spec.line,
          fmt::format("mpiexec ended without rank 0's report of the test; "
                      "its command: {}; its output:{}",
                      o.command, Indented(o.out)),
          ::testing::TestPartResult::kFatalFailure);
  } else if (!o.succeeded && !::testing::Test::HasFailure()) {
    // A rank (or mpiexec) failed after rank 0's report.
    Raise(spec.file, spec.line,
          fmt::format("rank 0 reported the test {}, but mpiexec ended with "
                      "a failure; its output:{}",
                      o.verdict, Indented(o.out)),
          ::testing::TestPartResult::kFatalFailure);
  }
  if (!::testing::Test::HasFailure()) return;
  if (o.ended && o.verdict != nullptr) {
    std::printf(
        "[ disttest ] mpiexec's output (what the ranks wrote to stderr, and "
        "rank 0's report):%s\n",
        Indented(WithoutGtestLines(o.out)).c_str());
  }
  const std::string rerun = RerunCommand(spec.name);
  std::printf("[ disttest ] rerun this test alone: %s%s\n",
              rerun.find("DISTTEST_LAUNCH=") == std::string::npos &&
                      spec.options.backend != Backend::kMpi
                  ? "DISTTEST_LAUNCH=mpiexec "
                  : "",
              rerun.c_str());
  std::fflush(stdout);
}

}  // namespace

void RunUnderMpiexec(const TestSpec& spec) {
  // SIGTERM or SIGINT (ctest's TIMEOUT) ends mpiexec and its ranks first.
  InterruptGuard interrupts;
  const StopIfInterrupted stop{spec};
  std::string mpiexec;
  std::string mpi;
  if (!FindUsableMpiexec(spec, &mpiexec, &mpi)) return;
  const ReportDir dir;
  if (dir.path.empty()) {
    return Raise(spec.file, spec.line,
                 fmt::format("{}: no directory for rank 0's report: {}",
                             Who(spec), dir.why),
                 ::testing::TestPartResult::kFatalFailure);
  }
  const std::string json = dir.path + "/report.json";
  const std::vector<std::string> argv = Command(mpiexec, mpi, spec, json);
  const auto [reserved, port] = ReserveLoopbackPort();
  const FdGuard reservation(reserved);
  ChildProcess run = ChildProcess::Start(argv, RankEnvironment(port));
  EndUnlessEnded guard{run};
  if (!run.started()) {
    return Raise(spec.file, spec.line,
                 fmt::format("{}: cannot start {}: {}", Who(spec), mpiexec,
                             std::strerror(errno)),
                 ::testing::TestPartResult::kFatalFailure);
  }
  // The ranks keep the test's own deadline; this one is for mpiexec.
  const bool ended = RunToTheEnd(run, Clock::now() + spec.options.timeout +
                                          spec.options.failure_grace +
                                          std::chrono::seconds(60));
  guard.ended = true;  // By itself, or ended by RunToTheEnd.
  Outcome outcome;
  outcome.ended = ended;
  outcome.succeeded = ended && run.succeeded();
  outcome.out = run.Output();
  outcome.command = fmt::format("{}", fmt::join(argv, " "));
  outcome.verdict = RaiseReport(spec, json, outcome.out);
  RaiseSignalledRanks(spec, outcome.out);
  Judge(spec, outcome);
}

}  // namespace disttest::internal
