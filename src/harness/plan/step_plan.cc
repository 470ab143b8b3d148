// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/plan/step_plan.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/launch/config.h"
#include "env/internal_names.h"
#include "harness/plan/gpu_placement.h"

extern char** environ;

namespace disttest::internal {

std::vector<TestSpec> PlanSteps(const TestSpec& spec,
                                const std::vector<FixtureStep>& fixtures) {
  std::vector<TestSpec> steps;
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    TestSpec& step = steps.emplace_back(spec);
    step.world_size = fixtures[i].world_size;
    step.fixture = fixtures[i].name;
    step.child_env.emplace_back(env::kInternalChildFixture, std::to_string(i));
  }
  steps.push_back(spec);
  return steps;
}

std::string PlaceStepsOnGpus(std::vector<TestSpec>& steps, int gpus_per_rank) {
  for (TestSpec& step : steps) {
    std::string why = PlaceOnGpus(step, gpus_per_rank);
    if (why.empty()) continue;
    if (!step.fixture.empty()) why = fmt::format("{}: {}", step.fixture, why);
    return why;
  }
  return "";
}

std::string ParallelMisfit(const TestSpec& spec) {
  if (!spec.options.parallel) return "";
  try {
    Layout::CheckSizes(*spec.options.parallel);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("options().parallel splits no world: {}", e.what()));
  }
  try {
    Layout fits(spec.world_size, *spec.options.parallel);
  } catch (const ConfigError& e) {
    return fmt::format("options().parallel does not fit {} ranks: {}",
                       spec.world_size, e.what());
  }
  return "";
}

FixtureDirs::~FixtureDirs() {
  for (const std::filesystem::path& dir : dirs_) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) {
      std::fprintf(stderr, "[ disttest ] warning: cannot remove %s: %s\n",
                   dir.c_str(), ec.message().c_str());
    }
  }
  // Its end of the names: it removes what is left (none).
  if (remover_names_ >= 0) close(remover_names_);
  if (remover_ > 0) {
    while (waitpid(remover_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

bool FixtureDirs::StartRemover() {
  // A socket, not a pipe: a send to a remover that is gone fails without
  // SIGPIPE (MSG_NOSIGNAL), which would end the test program.
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return false;
  }
  // Reads the names until the socket closes, then removes them. Ctrl-C and
  // the like, which reach the whole process group, do not end it before.
  static const char kScript[] =
      "trap '' INT TERM HUP QUIT; while IFS= read -r d; do set -- \"$@\" "
      "\"$d\"; done; [ $# -eq 0 ] || rm -rf -- \"$@\"";
  char sh[] = "/bin/sh";
  char dash_c[] = "-c";
  char script[sizeof kScript];
  std::memcpy(script, kScript, sizeof kScript);
  char name[] = "disttest-fixture-dirs";
  char* argv[] = {sh, dash_c, script, name, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, sh, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    return false;
  }
  remover_ = pid;
  remover_names_ = fds[1];
  return true;
}

std::filesystem::path FixtureDirs::Create(const std::string& fixture) {
  std::string safe;
  for (char c : fixture) {
    safe += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  }
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern =
      (base / fmt::format("disttest-{}-XXXXXX", safe)).string();
  if (pattern.find('\n') != std::string::npos) {
    throw ConfigError(fmt::format(
        "the temporary directory {} has a newline in its name; set TMPDIR",
        base.string()));
  }
  if (mkdtemp(pattern.data()) == nullptr) {
    throw Error(
        fmt::format("cannot create a directory for fixture {} in {}: {}",
                    fixture, base.string(), std::strerror(errno)));
  }
  dirs_.emplace_back(pattern);
  if (remover_ < 0 && !StartRemover()) remover_ = 0;  // Tried once.
  if (remover_names_ >= 0) {
    // A name a line.
    const std::string line = pattern + "\n";
    if (send(remover_names_, line.data(), line.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(line.size())) {
      close(remover_names_);
      remover_names_ = -1;
    }
  }
  return dirs_.back();
}

std::string FixtureDirs::Joined() const {
  std::string out;
  for (const std::filesystem::path& dir : dirs_) {
    if (!out.empty()) out += '\n';
    out += dir.string();
  }
  return out;
}

std::vector<std::string> FixtureDirs::Split(const std::string& joined) {
  std::vector<std::string> dirs;
  std::size_t start = 0;
  while (start <= joined.size()) {
    std::size_t end = joined.find('\n', start);
    if (end == std::string::npos) end = joined.size();
    dirs.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

}  // namespace disttest::internal
