// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/descendants.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace disttest::internal {
namespace {

// The whole of a small file; nullopt where it cannot be opened, "" where
// it cannot be read. A /proc file of a process that ends between the open
// and the read fails with ESRCH, which std::ifstream turns into an
// exception (basic_filebuf::underflow), not an end: a rank that dies while
// its descendants are looked for is gone, not an error of the test.
std::optional<std::string> Slurp(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0) out.clear();
      break;
    }
  }
  close(fd);
  return out;
}

// The state letter of /proc/<pid>/stat ('Z': a zombie), or 0 if it is gone.
char State(pid_t pid) {
  const std::string stat =
      Slurp(fmt::format("/proc/{}/stat", pid)).value_or("");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

// The parent of `pid` from /proc/<pid>/stat; 0 when it is gone.
pid_t ParentOf(pid_t pid) {
  const std::string stat =
      Slurp(fmt::format("/proc/{}/stat", pid)).value_or("");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return 0;
  return static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));
}

}  // namespace

unsigned long long StartedAt(pid_t pid) {
  const std::string stat =
      Slurp(fmt::format("/proc/{}/stat", pid)).value_or("");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  // Fields after the command: state is field 3, starttime field 22.
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

unsigned long long NowInTicks() {
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const long hz = sysconf(_SC_CLK_TCK);
  return static_cast<unsigned long long>(now.tv_sec) * hz +
         static_cast<unsigned long long>(now.tv_nsec) / (1000000000L / hz);
}

std::set<pid_t> DescendantsOf(const std::set<pid_t>& roots) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != name.npos) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (const pid_t parent = ParentOf(pid); parent > 0) {
      children.emplace(parent, pid);
    }
  }
  std::set<pid_t> found;
  std::vector<pid_t> next(roots.begin(), roots.end());
  while (!next.empty()) {
    const pid_t pid = next.back();
    next.pop_back();
    auto [first, last] = children.equal_range(pid);
    for (auto it = first; it != last; ++it) {
      if (found.insert(it->second).second) next.push_back(it->second);
    }
  }
  return found;
}

std::vector<pid_t> Children() {
  // No child at all, alive or a zombie, of any thread: one call instead of
  // reading /proc (a rank between pooled tests, a test's rank at its end).
  siginfo_t info{};
  // __WALL: also children whose exit signal is not SIGCHLD.
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 &&
      errno == ECHILD) {
    return {};
  }
  std::set<pid_t> found;
  std::error_code ec;
  bool listed = false;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task", ec)) {
    // A thread that ends meanwhile reads as one without children.
    const std::optional<std::string> children = Slurp(task.path() / "children");
    if (!children) continue;
    std::istringstream in(*children);
    listed = true;
    pid_t pid;
    while (in >> pid) found.insert(pid);
  }
  if (!listed) {
    // A kernel without /proc/<pid>/task/<tid>/children: every process's
    // parent, from its stat.
    const pid_t self = getpid();
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = Slurp(entry.path() / "stat").value_or("");
      const std::size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state;
      pid_t ppid = 0;
      if (rest >> state >> ppid && ppid == self) {
        found.insert(static_cast<pid_t>(std::atoi(name.c_str())));
      }
    }
  }
  return {found.begin(), found.end()};
}

bool Stopped(pid_t pid) {
  const char state = State(pid);
  return state == 'T' || state == 't';
}

std::string DescribeProcess(pid_t pid) {
  std::string cmdline =
      Slurp(fmt::format("/proc/{}/cmdline", pid)).value_or("");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  if (cmdline.empty()) {
    cmdline = Slurp(fmt::format("/proc/{}/comm", pid)).value_or("");
    while (!cmdline.empty() && cmdline.back() == '\n') cmdline.pop_back();
  }
  // A kExec rank is a fork of the zygote, and so is what it forks without
  // exec: their command line is the zygote's, whose filter names no test.
  const std::string placeholder = std::string(" ") + kZygotePlaceholderFilter;
  if (const std::size_t at = cmdline.find(placeholder);
      at != std::string::npos) {
    cmdline.erase(at, placeholder.size());
    if (cmdline.size() > 70) cmdline = cmdline.substr(0, 67) + "...";
    return cmdline + ", a fork of a kExec rank";
  }
  if (cmdline.size() > 100) cmdline = cmdline.substr(0, 97) + "...";
  return cmdline;
}

bool EnvironmentHas(pid_t pid, const std::string& entry) {
  const std::string environ =
      Slurp(fmt::format("/proc/{}/environ", pid)).value_or("");
  std::size_t start = 0;
  while (start < environ.size()) {
    std::size_t end = environ.find('\0', start);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(start, end - start, entry) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::vector<std::string> EndChildren(const std::function<bool(pid_t)>& pick) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  std::vector<std::string> ended;
  std::set<pid_t> picked;
  // Killing a child hands its own children to this process (a subreaper):
  // go on until no picked child is left, or the deadline.
  while (Clock::now() < deadline) {
    std::vector<pid_t> now;
    for (pid_t pid : Children()) {
      if (picked.count(pid) != 0 || pick == nullptr || pick(pid)) {
        now.push_back(pid);
      }
    }
    if (now.empty()) break;
    for (pid_t pid : now) {
      if (picked.insert(pid).second && State(pid) != 'Z') {
        ended.push_back(fmt::format("{} ({})", pid, DescribeProcess(pid)));
      }
      kill(pid, SIGKILL);
    }
    for (pid_t pid : now) {
      while (waitpid(pid, nullptr, WNOHANG) == 0 && Clock::now() < deadline) {
        poll(nullptr, 0, 1);
      }
    }
  }
  return ended;
}

}  // namespace disttest::internal
