// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/resources.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <filesystem>

#include "disttest/error.h"

namespace disttest::internal {
namespace {

long long OpenNow() {
  long long n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

std::string Limit(rlim_t value) {
  return value == RLIM_INFINITY ? std::string("unlimited")
                                : std::to_string(value);
}

}  // namespace

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
