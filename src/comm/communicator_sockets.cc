// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/communicator_sockets.h"

#include <atomic>
#include <mutex>

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

}  // namespace disttest::internal
