// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/resources.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "base/descriptors.h"
#include "disttest/error.h"

namespace disttest::internal {
namespace {

long long OpenNow() {
  const std::optional<std::vector<int>> fds = OpenDescriptors();
  return fds ? static_cast<long long>(fds->size()) : 0;
}

std::string Limit(rlim_t value) {
  return value == RLIM_INFINITY ? std::string("unlimited")
                                : std::to_string(value);
}

// The first line of `path` as a number; nullopt if it is not one (absent,
// or "max").
std::optional<long long> NumberIn(const std::filesystem::path& path) {
  std::ifstream in(path);
  long long n = 0;
  if (!(in >> n)) return std::nullopt;
  return n;
}

// This process's cgroup directories for `controller`: under cgroup v1 the
// controller's own hierarchy ("4:pids:/user.slice", controllers possibly
// listed together), under v2 the unified one ("0::/user.slice").
struct CgroupDirs {
  std::optional<std::filesystem::path> v1;
  std::optional<std::filesystem::path> unified;
};
CgroupDirs CgroupOf(const std::string& controller) {
  CgroupDirs dirs;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::filesystem::path path =
        std::filesystem::path(line.substr(b + 1)).relative_path();
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == controller && !dirs.v1) {
        dirs.v1 = std::filesystem::path("/sys/fs/cgroup") / controller / path;
      }
    }
    if (controllers.empty() && !dirs.unified) {
      dirs.unified = std::filesystem::path("/sys/fs/cgroup") / path;
    }
  }
  return dirs;
}

// The directory of this process's cgroup that limits its processes: the
// pids controller's under cgroup v1, the unified one under v2.
std::optional<std::filesystem::path> PidsCgroup() {
  CgroupDirs dirs = CgroupOf("pids");
  return dirs.v1 ? dirs.v1 : dirs.unified;
}

}  // namespace

std::string ProcessShortage(int world) {
  // Every cgroup from this process's up to the root limits it.
  if (std::optional<std::filesystem::path> cgroup = PidsCgroup()) {
    for (std::filesystem::path dir = *cgroup;; dir = dir.parent_path()) {
      const std::optional<long long> max = NumberIn(dir / "pids.max");
      const std::optional<long long> now = NumberIn(dir / "pids.current");
      if (max && now && *max - *now < world) {
        return fmt::format(
            "needs {} processes for {} ranks, and the cgroup {} allows {} "
            "more (pids.max {}, pids.current {}): raise pids.max or run fewer "
            "ranks",
            world, world, dir.string(), std::max(0LL, *max - *now), *max, *now);
      }
      if (dir == dir.root_path() || !dir.has_relative_path() ||
          dir.filename() == "cgroup" || dir.filename() == "pids") {
        break;
      }
    }
  }
  // The kernel does not apply RLIMIT_NPROC to root (more exactly, to
  // CAP_SYS_RESOURCE or CAP_SYS_ADMIN); the user's other processes count
  // too, which fork() then reports (see ProcessLimitsText()).
  rlimit limit{};
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY &&
      static_cast<long long>(limit.rlim_cur) < world) {
    return fmt::format(
        "needs {} processes for {} ranks, and RLIMIT_NPROC is {}: raise it "
        "(ulimit -u) or run fewer ranks",
        world, world, Limit(limit.rlim_cur));
  }
  return "";
}

void EnsureProcesses(int world) {
  if (std::string shortage = ProcessShortage(world); !shortage.empty()) {
    throw ConfigError(shortage);
  }
}

namespace {

// The number after "<key> " on a line of `path` ("oom_kill 3").
std::optional<long long> CountIn(const std::filesystem::path& path,
                                 const std::string& key) {
  std::ifstream in(path);
  std::string name;
  long long value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return std::nullopt;
}

}  // namespace

OomCounts ReadOomCounts() {
  OomCounts counts;
  const CgroupDirs dirs = CgroupOf("memory");
  // v1's memory controller first, else the unified hierarchy's.
  for (const auto& [dir, file] : {std::pair{dirs.v1, "memory.oom_control"},
                                  std::pair{dirs.unified, "memory.events"}}) {
    if (!dir) continue;
    if (std::optional<long long> kills = CountIn(*dir / file, "oom_kill")) {
      counts.cgroup = dir->string();
      counts.in_cgroup = kills;
      break;
    }
  }
  counts.system = CountIn("/proc/vmstat", "oom_kill");
  return counts;
}

std::string OomKillerText(const OomCounts& before, const OomCounts& after) {
  if (before.in_cgroup && after.in_cgroup &&
      *after.in_cgroup > *before.in_cgroup) {
    const long long n = *after.in_cgroup - *before.in_cgroup;
    return fmt::format(
        "by the kernel's OOM killer (the memory cgroup {} counted {} OOM "
        "kill{} during the test: the ranks together used more memory than it "
        "allows)",
        after.cgroup, n, n == 1 ? "" : "s");
  }
  if (before.system && after.system && *after.system > *before.system) {
    const long long n = *after.system - *before.system;
    return fmt::format(
        "probably by the kernel's OOM killer (/proc/vmstat counted {} OOM "
        "kill{} on this machine during the test: it ran out of memory)",
        n, n == 1 ? "" : "s");
  }
  return "";
}

std::string ProcessLimitsText() {
  std::string text;
  rlimit limit{};
  if (getrlimit(RLIMIT_NPROC, &limit) == 0) {
    text = fmt::format("RLIMIT_NPROC is {}", Limit(limit.rlim_cur));
  }
  if (std::optional<std::filesystem::path> cgroup = PidsCgroup()) {
    const std::optional<long long> max = NumberIn(*cgroup / "pids.max");
    const std::optional<long long> now = NumberIn(*cgroup / "pids.current");
    if (max && now) {
      text +=
          fmt::format("{}the cgroup {} has pids.max {}, pids.current {}",
                      text.empty() ? "" : "; ", cgroup->string(), *max, *now);
    }
  }
  return text.empty() ? "" : " (" + text + ")";
}

std::string Bytes(std::size_t bytes) {
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < 1024ull * 1024 * 1024) {
    return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  }
  return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
}

std::string OpenFilesLimitText() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return "";
  return fmt::format(" (RLIMIT_NOFILE is {})", Limit(limit.rlim_cur));
}

void EnsureOpenFiles(int world, bool communicator) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const long long parent = 4LL * world + 16;
  const long long rank = communicator ? world + 16LL : 16;
  // Cheap first: a limit far above any need is not counted against.
  if (limit.rlim_cur == RLIM_INFINITY ||
      static_cast<long long>(limit.rlim_cur) >= parent + rank + 4096) {
    return;
  }
  // Ranks inherit the parent's descriptors until they close them, and the
  // parent keeps what is open now (other pools, the test's own files).
  const long long need = OpenNow() + std::max(parent, rank);
  if (static_cast<long long>(limit.rlim_cur) >= need) return;
  if (limit.rlim_max == RLIM_INFINITY ||
      static_cast<long long>(limit.rlim_max) >= need) {
    const rlim_t before = limit.rlim_cur;
    // Room for what the test itself opens, within the hard limit.
    const long long wanted = need + need / 2 + 64;
    limit.rlim_cur = limit.rlim_max != RLIM_INFINITY &&
                             static_cast<long long>(limit.rlim_max) < wanted
                         ? limit.rlim_max
                         : static_cast<rlim_t>(wanted);
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      std::printf(
          "[ disttest ] note: raised the open-files limit (RLIMIT_NOFILE) "
          "from %s to %s for %d ranks\n",
          Limit(before).c_str(), Limit(limit.rlim_cur).c_str(), world);
      std::fflush(stdout);
      return;
    }
    limit.rlim_cur = before;
  }
  throw ConfigError(fmt::format(
      "needs about {} open files for {} ranks, and RLIMIT_NOFILE is {} (hard "
      "limit {}): raise it (ulimit -n) or run fewer ranks",
      need, world, Limit(limit.rlim_cur), Limit(limit.rlim_max)));
}

void EnsureSharedMemory(int world, std::size_t bytes) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return;  // Boost will say what fails.
  const std::size_t free = static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize;
  if (free >= bytes) return;
  throw ConfigError(fmt::format(
      "the result queues of {} rank{} need {} in /dev/shm, which has {} "
      "free: free some (or make /dev/shm larger) or run fewer ranks",
      world, world == 1 ? "" : "s", Bytes(bytes), Bytes(free)));
}

}  // namespace disttest::internal
