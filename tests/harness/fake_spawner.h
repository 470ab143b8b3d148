// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helper: a RankSpawner whose ranks are scripts, not processes, so that
// the supervisor's decisions (grace, timeout, verdict, pool end) are tested
// in-process, without forking. A scripted rank sends its results into its
// real result queue at given times after its spawn, and exits (or not) at a
// given time; Kill ends it as SIGKILL would.
//
//   FakeSpawner::Script passes = {{{10ms, Done(RankVerdict::kPassed)}}, 20ms};
//   auto spawner = std::make_unique<FakeSpawner>(
//       std::vector<FakeSpawner::Script>{passes, FakeSpawner::Hangs()});
//   std::vector<RankReport> r = RunTest(spec, std::move(spawner));
#ifndef DISTTEST_TESTS_HARNESS_FAKE_SPAWNER_H_
#define DISTTEST_TESTS_HARNESS_FAKE_SPAWNER_H_

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/channel/result_channel.h"
#include "harness/rank_verdict.h"
#include "harness/spawn/rank_spawner.h"

namespace disttest::internal {

// A rank's verdict message.
inline RankMessage Done(RankVerdict v) {
  return {RankMessage::Kind::kDone, "", -1, NameOf(v)};
}

class FakeSpawner : public RankSpawner {
 public:
  // Above any pid_max (2^22): no process has such a pid, so that a signal
  // that reached the kernel by mistake would hit nothing.
  static constexpr pid_t kFirstPid = 1 << 23;

  struct Script {
    // What the rank sends, each at its time after its spawn, in order.
    std::vector<std::pair<std::chrono::milliseconds, RankMessage>> sends;
    // When it exits by itself (with `exit_code`); nullopt: it runs until
    // it is killed.
    std::optional<std::chrono::milliseconds> exits_after;
    int exit_code = 0;
  };
  // A rank that never reports and never exits.
  static Script Hangs() { return {}; }

  // `stack_requests`, when given, counts the ranks whose stacks were taken
  // (it outlives the spawner, which the group owns).
  explicit FakeSpawner(std::vector<Script> scripts,
                       int* stack_requests = nullptr)
      : scripts_(std::move(scripts)), stack_requests_(stack_requests) {}

  pid_t Spawn(const SpawnRequest& request) override {
    Process p;
    p.script = scripts_.at(static_cast<std::size_t>(request.rank.rank));
    p.start = Clock::now();
    p.channel = ResultChannel::Open(request.result_queue);
    processes_.push_back(std::move(p));
    return kFirstPid + static_cast<pid_t>(processes_.size()) - 1;
  }
  int OpenPidFd(pid_t) override { return -1; }
  std::optional<RankOutcome> Ended(pid_t pid, std::string*) override {
    Process& p = Of(pid);
    if (p.killed) return RankOutcome::FromWaitStatus(SIGKILL);
    Deliver(p);
    if (p.script.exits_after &&
        Clock::now() >= p.start + *p.script.exits_after) {
      return RankOutcome::FromWaitStatus(W_EXITCODE(p.script.exit_code, 0));
    }
    return std::nullopt;
  }
  std::optional<RankOutcome> Reap(pid_t pid, Clock::time_point) override {
    return Ended(pid, nullptr);
  }
  void Kill(pid_t pid) override { Of(pid).killed = true; }
  void KillGroup(pid_t) override {
    for (Process& p : processes_) p.killed = true;
  }
  bool Stopped(pid_t) override { return false; }
  std::vector<std::string> Stacks(const std::vector<pid_t>& pids,
                                  std::chrono::milliseconds) override {
    std::vector<std::string> stacks;
    for (pid_t pid : pids) {
      stacks.push_back("#0 stack of fake rank " +
                       std::to_string(pid - kFirstPid) + "\n");
    }
    if (stack_requests_ != nullptr) {
      *stack_requests_ += static_cast<int>(pids.size());
    }
    return stacks;
  }

 protected:
  [[noreturn]] void RunChild(const SpawnRequest&) override { std::abort(); }

 private:
  struct Process {
    Script script;
    Clock::time_point start;
    std::unique_ptr<ResultChannel> channel;
    std::size_t sent = 0;
    bool killed = false;
  };

  Process& Of(pid_t pid) {
    return processes_.at(static_cast<std::size_t>(pid - kFirstPid));
  }
  void Deliver(Process& p) {
    while (p.sent < p.script.sends.size() &&
           Clock::now() >= p.start + p.script.sends[p.sent].first) {
      p.channel->Send(p.script.sends[p.sent].second, std::chrono::seconds(1));
      ++p.sent;
    }
  }

  std::vector<Script> scripts_;
  std::vector<Process> processes_;
  int* stack_requests_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_TESTS_HARNESS_FAKE_SPAWNER_H_
