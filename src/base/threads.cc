// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace disttest::internal {

std::size_t ThreadCount() { return ThreadIds().size(); }

std::vector<pid_t> ThreadIds() {
  // getdents64 into a buffer on the stack, not std::filesystem's path per
  // entry: a pooled rank lists its threads around every test.
  std::vector<pid_t> ids;
  const int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ids;
  alignas(8) char buffer[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      pid_t tid = 0;
      const char* name = entry->d_name;
      const char* end = name + std::strlen(name);
      const auto [last, err] = std::from_chars(name, end, tid);
      if (err == std::errc() && last == end && tid > 0) ids.push_back(tid);
      at += entry->d_reclen;
    }
  }
  close(fd);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::string ThreadName(pid_t tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/comm", tid));
  std::string name;
  std::getline(in, name);
  return name;
}

bool ThreadEnded(pid_t tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/stat", tid));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // "tid (name) S ...": the state follows the name's last ')'.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

std::string AddressSpaceHint(const std::string& error,
                             unsigned long long limit) {
  if (limit == RLIM_INFINITY) return "";
  const bool short_of_memory =
      error.find("Resource temporarily unavailable") != std::string::npos ||
      error.find("Cannot allocate memory") != std::string::npos ||
      error.find("bad_alloc") != std::string::npos;
  if (!short_of_memory) return "";
  return fmt::format(
      " (RLIMIT_AS is {} MiB (ulimit -v): a thread's stack or a buffer could "
      "not be mapped; raise it)",
      limit >> 20);
}

std::string AddressSpaceHint(const std::string& error) {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0) return "";
  return AddressSpaceHint(error, limit.rlim_cur);
}

namespace {
thread_local int t_threads_rank = -1;
std::atomic<bool> g_ranks_are_threads{false};
}  // namespace

bool RanksAreThreads() {
  return g_ranks_are_threads.load(std::memory_order_relaxed);
}

void SetRanksAreThreads() {
  g_ranks_are_threads.store(true, std::memory_order_relaxed);
}

int ThreadsRank() { return t_threads_rank; }

void SetThreadsRank(int rank) { t_threads_rank = rank; }

}  // namespace disttest::internal
