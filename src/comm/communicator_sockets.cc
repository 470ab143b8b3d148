// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/communicator_sockets.h"

#include <atomic>
#include <mutex>
#include <string>

#include "base/sockets.h"

namespace disttest::internal {
namespace {

std::atomic<bool> watching{false};

std::mutex& Mutex() {
  static std::mutex mu;
  return mu;
}

std::set<ino_t>& Noted() {
  static auto* noted = new std::set<ino_t>;
  return *noted;
}

}  // namespace

void WatchCommunicatorSockets() { watching = true; }

bool WatchingCommunicatorSockets() { return watching; }

void NoteCommunicatorSockets(const std::map<ino_t, int>& before) {
  if (!watching) return;
  const std::map<ino_t, int> fresh = NewSince(before);
  std::lock_guard<std::mutex> lock(Mutex());
  for (const auto& entry : fresh) Noted().insert(entry.first);
}

std::set<ino_t> CommunicatorSockets() {
  std::lock_guard<std::mutex> lock(Mutex());
  return Noted();
}

namespace {
std::atomic<std::uint64_t> cuts{0};
std::string& CutReason() {
  static auto* reason = new std::string;
  return *reason;
}
}  // namespace

void CutCommunicators(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(Mutex());
    CutReason() = why;
  }
  cuts.fetch_add(1, std::memory_order_acq_rel);
}

std::uint64_t CommunicatorCuts() {
  return cuts.load(std::memory_order_acquire);
}

std::string CommunicatorCutReason() {
  std::lock_guard<std::mutex> lock(Mutex());
  return CutReason();
}

}  // namespace disttest::internal
