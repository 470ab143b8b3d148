// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/supervise/worker_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/internal_names.h"
#include "harness/process/resources.h"
#include "harness/rank/pooled_rank.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/report/trace.h"
#include "harness/supervise/supervisor.h"

namespace disttest::internal {

// One pool: a rank group kept between tests.
class WorkerPools::Pool {
 public:
  explicit Pool(const TestSpec& spec)
      : group_(spec, MakeSpawner(LaunchMode::kFork,
                                 [current = current_](auto arena) {
                                   // Only ever called while the pool runs a
                                   // test: when its ranks are forked (also
                                   // when it starts over at a later test).
                                   (*current)(std::move(arena));
                                 })),
        on_gpus_(!spec.visible_devices.empty()) {}

  // The first call spawns the ranks, which run `spec`; each later call
  // hands them the next test through the store. A test ends when every rank
  // has reported its verdict. When every rank passed or skipped, the ranks
  // stay (parked); otherwise they are ended as a test's own ranks are, and
  // alive() turns false.
  std::vector<RankReport> RunTest(const TestSpec& spec, RankEntry entry);
  bool alive() const { return alive_; }
  std::size_t size() const { return group_.ranks().size(); }
  // Tells parked ranks to leave (they reset their connections, so that no
  // TIME_WAIT is left); FinishShutdown() then serves the store while they
  // meet, for 2 s at most, ends and reaps them and removes the queues.
  void RequestShutdown();
  void FinishShutdown();

  // The tests its ranks ran, in order (shared with LastHistory(): no copy
  // per test, which grew with the pool's age).
  std::shared_ptr<std::vector<std::string>> history =
      std::make_shared<std::vector<std::string>>();
  long used = 0;  // When it last ran a test.
  bool on_gpus() const { return on_gpus_; }

 private:
  // Hands the parked ranks their next test (through the arena, or the
  // store).
  void Dispatch(const std::string& name);
  // True once every rank waits for the next test; false when one leaves
  // instead (its communicator failed, its test left a thread running): with
  // the arena at once (every rank parks before its verdict, which has come),
  // through the store when none of that happens within a few seconds.
  bool AwaitParked();

  // The rank code of the test the pool runs now, for ranks forked for it.
  std::shared_ptr<RankEntry> current_ = std::make_shared<RankEntry>();
  RankGroup group_;
  bool on_gpus_;
  bool alive_ = false;
  bool shutting_down_ = false;
  int dispatched_ = 0;  // Tests handed to the parked ranks so far.
};

std::vector<RankReport> WorkerPools::Pool::RunTest(const TestSpec& spec,
                                                   RankEntry entry) {
  ValidateSpec(spec);
  *current_ = std::move(entry);
  if (alive_) {
    // While parked, a rank may have died or said something (a store error
    // while it waited): that is the pool's, not the next test's. Start over.
    group_.ObserveExits();
    group_.DrainChannels();
    bool quiet = true;
    for (const RankGroup::Rank& rank : group_.ranks()) {
      quiet &= !rank.exited && rank.report.results.empty() &&
               rank.report.channel_errors.empty();
    }
    if (!quiet) {
      (void)group_.End("the pool broke while it waited");
      alive_ = false;
    }
  }
  group_.Relabel(spec);
  Supervisor supervisor(group_);  // The clock starts before the spawning.
  if (!alive_) {
    group_.Start();
    alive_ = true;
    dispatched_ = 0;
  } else {
    Dispatch(spec.name);
  }
  supervisor.Run();
  // What a rank printed before its verdict is in the pipe by now (ranks
  // flush before they report); a line left open ends with the test.
  group_.FinishOutput();
  group_.DrainChannels();
  group_.ObserveExits();
  bool clean = true;
  for (const RankGroup::Rank& rank : group_.ranks()) {
    clean &= !rank.exited && !RankFailed(rank.report);
  }
  // A rank that reported may still leave (its communicator failed): parked
  // means asking for the next test.
  if (clean) clean = AwaitParked();
  if (!clean) {
    // Anything else ends the pool, as a test ends its ranks.
    alive_ = false;
    return group_.End("the test ended");
  }
  // Calls that differed though they all returned (a communicator of the
  // test's own), and DISTTEST_TRACE: the verdict and the trace need the
  // ledgers, read while the ranks wait for their next test (which resets
  // them).
  if (group_.ledger() != nullptr &&
      (TraceWanted() || !group_.ledger()->DigestsAgree())) {
    group_.ReadLedgers(/*again=*/true);
  }
  std::vector<RankReport> reports;
  for (RankGroup::Rank& rank : group_.ranks()) {
    rank.report.parked = true;
    reports.push_back(rank.report);
    // What came is this test's (its properties, say): whatever comes
    // while the ranks are parked is the pool's trouble.
    rank.report.results.clear();
  }
  return reports;
}

void WorkerPools::Pool::Dispatch(const std::string& name) {
  ++dispatched_;
  HostArena* arena = group_.arena();
  // Through the store without an arena, or for a name too long for it.
  if (arena == nullptr || name.size() > HostArena::kTestNameBytes) {
    group_.server().Set(PoolKey(dispatched_),
                        std::vector<char>(name.begin(), name.end()));
  }
  if (arena != nullptr) {
    arena->Dispatch(static_cast<unsigned>(dispatched_), name);
  }
}

bool WorkerPools::Pool::AwaitParked() {
  const std::string next = PoolKey(dispatched_ + 1);
  HostArena* arena = group_.arena();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    group_.ObserveExits();
    for (const RankGroup::Rank& rank : group_.ranks()) {
      if (rank.exited) return false;
    }
    const bool parked =
        arena != nullptr
            ? arena->AllParked(static_cast<unsigned>(dispatched_ + 1))
            : group_.server().waiting_on(next) == group_.ranks().size();
    if (parked) return true;
    // A rank parks in the arena before it sends its verdict, and every
    // verdict has come: one that has not parked leaves (a thread its test
    // left running, a communicator that failed).
    if (arena != nullptr) return false;
    if (std::chrono::steady_clock::now() >= until) return false;
    group_.Serve(10);
  }
}

void WorkerPools::Pool::RequestShutdown() {
  if (!alive_) return;
  alive_ = false;
  // An empty name: leave.
  Dispatch("");
  shutting_down_ = true;
}

void WorkerPools::Pool::FinishShutdown() {
  if (!shutting_down_) return;
  shutting_down_ = false;
  // Serve the store while they meet and reset their connections; whoever is
  // left at the deadline is ended (no stacks: nothing is wrong).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto running = [&] {
    for (const RankGroup::Rank& rank : group_.ranks()) {
      if (rank.pid > 0 && !rank.exited) return true;
    }
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < until) {
    group_.Serve(10);
  }
  group_.Kill("the pool was shut down");
  group_.FinishOutput();
  group_.CleanUp();
}

WorkerPools& WorkerPools::Get() {
  static WorkerPools pools;
  return pools;
}

WorkerPools::WorkerPools() : owner_(getpid()) {}

WorkerPools::~WorkerPools() {
  if (getpid() == owner_) {
    ShutdownAll();
  } else {
    KeepTheOwnersPools();
  }
}

void WorkerPools::KeepTheOwnersPools() {
  // Kept, not destroyed (that would end them), and still reachable, so that
  // a leak checker in this child does not count them.
  static auto* kept = new std::vector<std::unique_ptr<Pool>>;
  for (auto& [key, pool] : pools_) kept->push_back(std::move(pool));
  pools_.clear();
}

std::vector<RankReport> WorkerPools::Run(TestSpec spec, RankEntry entry) {
  if (getpid() != owner_) {
    // A fork of the process that owns the pools (a death test's child):
    // their ranks are not this process's to hand tests to. This process
    // starts pools of its own.
    KeepTheOwnersPools();
    owner_ = getpid();
  }
  spec.child_env.emplace_back(env::kInternalPool, "1");
  // Ranks are interchangeable when all that went into them is.
  std::string key = fmt::format(
      "{}|{}|{}|{}|{}", spec.suite, spec.world_size, spec.options.master_addr,
      spec.options.timeout.count(), fmt::join(spec.visible_devices, ";"));
  for (const auto& [name, value] : spec.child_env) {
    key += fmt::format("|{}={}", name, value);
  }
  for (const auto& own : spec.rank_env) {
    key += '|';
    for (const auto& [name, value] : own) {
      key += fmt::format("{}={};", name, value);
    }
  }
  if (pools_.count(key) == 0) {
    MakeRoomFor(spec);
    pools_[key] = std::make_unique<Pool>(spec);
  }
  Pool& pool = *pools_[key];
  if (!pool.alive()) MakeRoomForProcesses(spec.world_size, key);
  pool.used = ++clock_;
  last_ = key;
  last_history_ = pool.history;
  last_history_size_ = pool.history->size();
  std::vector<RankReport> reports;
  try {
    reports = pool.RunTest(spec, std::move(entry));
  } catch (...) {
    pools_.erase(key);
    throw;
  }
  if (!pool.alive()) {
    pools_.erase(key);
  } else {
    pool.history->push_back(spec.name);
  }
  return reports;
}

std::vector<std::string> WorkerPools::LastHistory() const {
  if (last_history_ == nullptr) return {};
  return {
      last_history_->begin(),
      last_history_->begin() + static_cast<std::ptrdiff_t>(last_history_size_)};
}

void WorkerPools::ShutdownAll() {
  std::vector<std::string> all;
  for (const auto& [key, pool] : pools_) all.push_back(key);
  End(all);
}

void WorkerPools::EndOfSuite() {
  if (getpid() == owner_) ShutdownAll();
}

void WorkerPools::MakeRoomFor(const TestSpec& spec) {
  // At most this many pools live at once (each holds its ranks' processes,
  // and their idle event loops wake every 10 ms).
  constexpr std::size_t kMaxPools = 4;
  std::vector<std::string> ending;
  for (const auto& [key, pool] : pools_) {
    if (pool->on_gpus() && !spec.visible_devices.empty()) {
      ending.push_back(key);
    }
  }
  if (ending.empty() && pools_.size() >= kMaxPools) {
    auto oldest = std::min_element(pools_.begin(), pools_.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.second->used < b.second->used;
                                   });
    ending.push_back(oldest->first);
  }
  End(ending);
}

void WorkerPools::MakeRoomForProcesses(int world, const std::string& except) {
  if (getpid() != owner_) return;  // The pools are the owner's.
  std::vector<std::string> idle;
  int ranks = 0;
  for (const auto& [key, pool] : pools_) {
    if (key == except || !pool->alive()) continue;
    idle.push_back(key);
    ranks += static_cast<int>(pool->size());
  }
  if (idle.empty()) return;
  const std::string shortage = ProcessShortage(world);
  if (shortage.empty()) return;
  End(idle);
  std::printf(
      "[ disttest ] ended %zu idle pool%s of reused ranks (%d process%s) to "
      "make room for %d ranks: %s\n",
      idle.size(), idle.size() == 1 ? "" : "s", ranks, ranks == 1 ? "" : "es",
      world, shortage.c_str());
  std::fflush(stdout);
}

void WorkerPools::End(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (auto it = pools_.find(key); it != pools_.end()) {
      it->second->RequestShutdown();
    }
  }
  for (const std::string& key : keys) {
    if (auto it = pools_.find(key); it != pools_.end()) {
      it->second->FinishShutdown();
      pools_.erase(it);
    }
  }
}

}  // namespace disttest::internal
