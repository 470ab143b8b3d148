// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/rank_control.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "disttest/error.h"

namespace disttest::internal {
namespace {

std::atomic<RankControl*> current{nullptr};

}  // namespace

bool RankControl::HasEnded(int rank) const {
  if (pids_ == nullptr) return false;
  const pid_t pid = pids_->Pid(rank);
  if (pid <= 0 || pid == getpid()) return false;
  // The parent keeps an ended rank as a zombie until the test ends: its
  // state says it has ended ("Z"), even before the parent has seen it.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return errno == ENOENT;
  char line[512] = {};
  const std::size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = std::strrchr(line, ')');
  if (n == 0 || close == nullptr || close[1] != ' ') return false;
  return close[2] == 'Z' || close[2] == 'X' || close[2] == 'x';
}

void RankControl::CheckRank(const char* what, int rank) const {
  if (rank < 0 || rank >= world_size_) {
    throw ConfigError(
        fmt::format("{}({}, ...) in rank {}: there is no rank {} "
                    "in a world of {} (ranks 0 to {})",
                    what, rank, rank_, rank, world_size_, world_size_ - 1));
  }
}

void RankControl::Expect(int rank, const ExpectedEnd& end) {
  CheckRank("ExpectRankToEnd", rank);
  if (end.signal && (end.value < 1 || end.value > SIGRTMAX)) {
    throw ConfigError(fmt::format(
        "ExpectRankToEnd({}, RankEnd::KilledBy({})): {} is no signal (1 to "
        "{})",
        rank, end.value, end.value, SIGRTMAX));
  }
  if (!end.signal && (end.value < 0 || end.value > 255)) {
    throw ConfigError(fmt::format(
        "ExpectRankToEnd({}, RankEnd::ExitsWith({})): an exit status is 0 to "
        "255",
        rank, end.value));
  }
  if (!end.signal && end.value >= kExitFailed && end.value <= kExitExecFailed) {
    throw ConfigError(fmt::format(
        "ExpectRankToEnd({}, RankEnd::ExitsWith({})): statuses {} to {} are "
        "how disttest itself ends a rank (failed, skipped, set-up and exec "
        "errors); exit with another one",
        rank, end.value, static_cast<int>(kExitFailed),
        static_cast<int>(kExitExecFailed)));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = declared_.emplace(rank, end);
    if (!added && !it->second.SameEnd(end)) {
      throw ConfigError(fmt::format(
          "ExpectRankToEnd({}, ...) in rank {}: this rank declared before that "
          "rank {} will {}; it cannot also {} (a rank ends one way)",
          rank, rank_, rank, it->second.str(), end.str()));
    }
  }
  ExpectedEnd declared = end;
  declared.declared_ns = MonotonicNs();
  declared.after_end = HasEnded(rank);
  report_({RankMessage::Kind::kExpectEnd, "", -1,
           EncodeExpectedEnd(rank, declared)});
}

void RankControl::Signal(int rank, int signal) const {
  CheckRank("SignalRank", rank);
  if (signal < 0 || signal > SIGRTMAX) {
    throw ConfigError(fmt::format("SignalRank({}, {}): {} is no signal", rank,
                                  signal, signal));
  }
  if (pids_ == nullptr) {
    throw Error(fmt::format(
        "SignalRank({}, {}): this rank has no ledger, where the ranks' "
        "process ids are",
        rank, signal));
  }
  const pid_t pid = pids_->Pid(rank);
  if (pid <= 0) {
    throw Error(fmt::format("SignalRank({}, {}): rank {} has not started yet",
                            rank, signal, rank));
  }
  // The parent keeps an ended rank unreaped until the test ends, so its id
  // names no other process meanwhile.
  if (kill(pid, signal) != 0) {
    throw Error(fmt::format("SignalRank({}, {}): rank {} (pid {}): {}", rank,
                            signal, rank, pid, std::strerror(errno)));
  }
}

RankControl* CurrentRankControl() {
  return current.load(std::memory_order_acquire);
}

void SetRankControl(RankControl* control) {
  current.store(control, std::memory_order_release);
}

}  // namespace disttest::internal
