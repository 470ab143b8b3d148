// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Pool dispatch (host_arena.h): pooled ranks park for their next test in
// the arena, and the parent hands it to all of them at once.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "comm/host_arena.h"
#include "comm/host_arena_layout.h"

namespace disttest {

namespace {
constexpr std::uint32_t kNameInStore = UINT32_MAX;
}  // namespace

void HostArena::Park(int rank, std::uint32_t n) {
  ranks_[rank].parked.store(n, std::memory_order_release);
}

bool HostArena::AllParked(std::uint32_t n) const {
  for (int q = 0; q < world_; ++q) {
    if (ranks_[q].parked.load(std::memory_order_acquire) != n) return false;
  }
  return true;
}

void HostArena::Dispatch(std::uint32_t n, const std::string& name) {
  Header& h = *header_;
  // Every rank has parked for `n`: none reads the last name any more.
  if (name.size() > kTestNameBytes) {
    h.name_size.store(kNameInStore, std::memory_order_relaxed);
  } else {
    std::memcpy(h.test_name, name.data(), name.size());
    h.name_size.store(static_cast<std::uint32_t>(name.size()),
                      std::memory_order_relaxed);
  }
  h.dispatched.store(n, std::memory_order_release);
  internal::FutexWakeAll(&h.dispatched);
}

std::optional<std::string> HostArena::AwaitTest(std::uint32_t n) {
  Header& h = *header_;
  for (;;) {
    const std::uint32_t now = h.dispatched.load(std::memory_order_acquire);
    if (now >= n) break;
    internal::FutexWait(&h.dispatched, now, 1'000'000'000LL);
  }
  const std::uint32_t size = h.name_size.load(std::memory_order_relaxed);
  if (size == kNameInStore) return std::nullopt;
  return std::string(h.test_name, size);
}

}  // namespace disttest
