// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/threads.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace disttest::internal {

std::size_t ThreadCount() { return ThreadIds().size(); }

std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> ids;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    pid_t tid = 0;
    const auto [end, err] =
        std::from_chars(name.data(), name.data() + name.size(), tid);
    if (err == std::errc() && end == name.data() + name.size()) {
      ids.push_back(tid);
    }
  }
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
