// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "glue/mpiexec.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "disttest/env/names.h"
#include "harness/process/command_line.h"
#include "harness/process/descendants.h"

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
// when it is none that disttest knows (a script of the same name). Asked
// once for each path.
std::string WhichMpi(const std::string& mpiexec, std::string* said) {
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

// A port no process listens on a moment ago, for the ranks' store.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  int port = 0;
  if (fd >= 0 &&
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
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
  argv.push_back("--gtest_filter=" + spec.name);
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
// process it left.
void End(ChildProcess& mpiexec) {
  const std::set<pid_t> below = DescendantsOf({mpiexec.pid()});
  kill(mpiexec.pid(), SIGTERM);
  if (!mpiexec.Wait(Clock::now() + std::chrono::seconds(5))) mpiexec.Kill();
  for (pid_t pid : below) kill(pid, SIGKILL);
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

// Raises rank 0's verdict of the test from its JSON report; false when
// the report holds no verdict of it.
bool RaiseReport(const TestSpec& spec, const std::string& json,
                 const std::string& out) {
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) return false;
  for (const auto& suite :
       report.value("testsuites", nlohmann::json::array())) {
    for (const auto& test : suite.value("testsuite", nlohmann::json::array())) {
      if (fmt::format("{}.{}", suite.value("name", ""),
                      test.value("name", "")) != spec.name) {
        continue;
      }
      for (const auto& f : test.value("failures", nlohmann::json::array())) {
        const std::string text = f.value("failure", "");
        const std::size_t nl = text.find('\n');
        const std::string where = text.substr(0, nl);
        const std::size_t colon = where.rfind(':');
        const std::string file =
            colon == std::string::npos ? spec.file : where.substr(0, colon);
        const int line = colon == std::string::npos
                             ? spec.line
                             : std::atoi(where.c_str() + colon + 1);
        Raise(file, line, nl == std::string::npos ? text : text.substr(nl + 1),
              ::testing::TestPartResult::kNonFatalFailure);
      }
      if (test.value("result", "") == "SKIPPED" && !test.contains("failures")) {
        Raise(spec.file, spec.line, SkipMessage(out),
              ::testing::TestPartResult::kSkip);
      }
      return true;
    }
  }
  return false;
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
  static const std::regex kSignalled(
      "process rank ([0-9]+) with PID [0-9]+ on node \\S+ exited on signal "
      "([0-9]+) \\(([^)]*)\\)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), kSignalled);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    Raise(spec.file, spec.line,
          fmt::format("[rank {}/{}] was killed by signal {} ({}), mpiexec "
                      "says",
                      m[1].str(), spec.world_size, m[2].str(), m[3].str()),
          ::testing::TestPartResult::kNonFatalFailure);
  }
}

std::string Indented(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += "\n  " + line;
  return out;
}

}  // namespace

void RunUnderMpiexec(const TestSpec& spec) {
  const std::string mpiexec = FindMpiexec();
  if (mpiexec.empty()) {
    return Raise(spec.file, spec.line,
                 "LaunchMode::kMpiexec: no mpiexec on PATH (set "
                 "MPIEXEC_EXECUTABLE; Debian: openmpi-bin)",
                 ::testing::TestPartResult::kSkip);
  }
  if (access(mpiexec.c_str(), X_OK) != 0) {
    return Raise(spec.file, spec.line,
                 fmt::format("LaunchMode::kMpiexec: MPIEXEC_EXECUTABLE={}: {}",
                             mpiexec, std::strerror(errno)),
                 ::testing::TestPartResult::kFatalFailure);
  }
  std::string said;
  const std::string mpi = WhichMpi(mpiexec, &said);
  if (mpi.empty()) {
    return Raise(spec.file, spec.line,
                 fmt::format("LaunchMode::kMpiexec: {} is not MPI's mpiexec "
                             "(not Open MPI's, MPICH's, Intel MPI's or "
                             "MVAPICH's, by its --version):{}",
                             mpiexec, Indented(said.substr(0, 2000))),
                 ::testing::TestPartResult::kFatalFailure);
  }
  const std::string json =
      fmt::format("{}/disttest-mpiexec-{}-{}.json",
                  std::filesystem::temp_directory_path().string(), getpid(),
                  FreeLoopbackPort());
  const std::vector<std::string> argv = Command(mpiexec, mpi, spec, json);
  ChildProcess run =
      ChildProcess::Start(argv, RankEnvironment(FreeLoopbackPort()));
  // The ranks keep the test's own deadline; this one is for mpiexec.
  const auto deadline = Clock::now() + spec.options.timeout +
                        spec.options.failure_grace + std::chrono::seconds(60);
  const bool ended = run.started() && run.Wait(deadline);
  if (!ended) End(run);
  const std::string out = run.Output();
  const bool reported = RaiseReport(spec, json, out);
  RaiseSignalledRanks(spec, out);
  std::filesystem::remove(json);
  const std::string command = fmt::format("{}", fmt::join(argv, " "));
  if (!ended) {
    Raise(spec.file, spec.line,
          fmt::format("mpiexec did not end within the test's timeout and "
                      "grace (ended by disttest); its command: {}; its "
                      "output:{}",
                      command, Indented(out)),
          ::testing::TestPartResult::kFatalFailure);
  } else if (!reported) {
    Raise(spec.file, spec.line,
          fmt::format("mpiexec ended without rank 0's report of the test; "
                      "its command: {}; its output:{}",
                      command, Indented(out)),
          ::testing::TestPartResult::kFatalFailure);
  } else if (!run.succeeded() && !::testing::Test::HasFailure()) {
    // Rank 0 reported a pass, yet a rank (or mpiexec) failed after it.
    Raise(spec.file, spec.line,
          fmt::format("rank 0 reported a pass, but mpiexec ended with a "
                      "failure; its output:{}",
                      Indented(out)),
          ::testing::TestPartResult::kFatalFailure);
  }
  if (::testing::Test::HasFailure()) {
    if (ended && reported) {
      std::printf(
          "[ disttest ] mpiexec's output (what the ranks wrote to stderr, "
          "and rank 0's report):%s\n",
          Indented(WithoutGtestLines(out)).c_str());
    }
    const std::string rerun = RerunCommand(spec.name);
    std::printf("[ disttest ] rerun this test alone: %s%s\n",
                rerun.find("DISTTEST_LAUNCH=") == std::string::npos
                    ? "DISTTEST_LAUNCH=mpiexec "
                    : "",
                rerun.c_str());
    std::fflush(stdout);
  }
}

}  // namespace disttest::internal
