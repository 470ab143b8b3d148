// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The side thread of a launched process: every kHeartbeatEvery it bumps
// this rank's heartbeat; while a body runs (Arm ... Disarm) it also looks
// for trouble elsewhere (an abort, a rank whose heartbeat stopped, the
// store gone, calls that differ from another rank's in a collective both
// wait in), on which it makes the body's collectives fail, and at the
// body's deadline it prints this process's stacks, tells the others, and
// ends a body that still does not return.
//
//   job.watchdog().Arm(deadline, "Suite.Test/4ranks", keys.Ledger(rank));
//   ... the body ...
//   job.watchdog().Disarm();
//
// The stacks are taken by a stack tool (eu-stack or gdb) that this process
// forks and execs; between fork and exec the child makes only raw system
// calls (stack_dump.cc), as in every fork of a process that runs threads.
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_WATCHDOG_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "env/knobs.h"
#include "harness/launched/communicators.h"
#include "harness/launched/liveness.h"

namespace disttest::internal::launched {

class Watchdog {
 public:
  Watchdog(int rank, Liveness& liveness, Communicators& communicators,
           SideChannel& side)
      : rank_(rank),
        scale_note_(ScaleNote()),
        liveness_(liveness),
        communicators_(communicators),
        side_(side) {}

  // Starts the side thread, which runs until the process ends.
  void Start();
  // Watches a body: past `deadline` the process puts its collective
  // ledger under `ledger_key` (before its collectives are cut: rank 0's
  // report says where each rank was), prints its stacks, tells the others,
  // and ends.
  // While the body waits in a collective, the side thread also puts its
  // call under `calls_prefix` (one key per collective, for its first
  // rank there; "": not at all) and compares it with the call of the first
  // rank that did: calls that differ end the run at once, as trouble
  // elsewhere does, with both calls in the reason.
  // A peer that failed the test (or skipped it) and left it sets
  // `ended_key` (StepKeys::EndedBadly): `grace` later (five times that after
  // a skip), a body that waits in a collective has its collectives cut, as
  // at the timeout (and as a spawned test's ranks are ended then,
  // options().failure_grace): none waits for the timeout in a collective
  // that the peer will never join. A body that computes, or waits in a
  // send or receive, goes on.
  // A peer that passed and left sets `left_key` (StepKeys::LeftPassing),
  // with how many collectives it began on each of its communicators of
  // every rank of the step: a body that waits in a later one of those (the
  // peer never began it, so it can never complete) has its collectives cut
  // four heartbeats after the key was seen. One the peer began may still
  // complete (a broadcast's tree relays without its root), and one of
  // fewer ranks may not have the peer in it: those go on.
  void Arm(Clock::time_point deadline, std::string what,
           std::string ledger_key = "", std::string calls_prefix = "",
           std::string ended_key = "",
           std::chrono::milliseconds grace = std::chrono::milliseconds(0),
           std::string left_key = "");
  void Disarm();
  // This process ends by `how` ("exit()", "quick_exit()") while a body
  // runs: it says so under its stuck key and tells the others, which then
  // stop at once, not after its heartbeat's silence (kDeadAfter). Nothing
  // while no body runs (gtest's own end of the program).
  void ProcessEnds(const char* how);

 private:
  void Loop();
  // The body outlived the test's timeout. Every rank whose body still
  // runs gets here: the hung one, and those blocked in a collective with
  // it. Each prints its process's stacks, tells the others, and makes its
  // collectives fail; a body that still does not return (stuck in its own
  // code) ends the process.
  void TimedOut(const std::string& what, const std::string& ledger_key) {
    Stop(what, ledger_key, 0);
  }
  // The same when SIGTERM or SIGINT came (`sig`; 0: the timeout): the
  // stacks are bounded by a few seconds (the sender waits that long), and
  // the reason says which signal.
  void Stop(const std::string& what, const std::string& ledger_key, int sig);
  // This process's stacks, every line labelled "[rank r] "; heartbeats go
  // on while the tool runs, at most `deadline`.
  std::string OwnStacks(std::chrono::milliseconds deadline);
  // Stop's steps: this rank's ledger to the store under `ledger_key`; the
  // stacks (or why none are taken); and, for a body that does not return
  // in `grace`, its stuck key and the end of this process.
  void PostLedger(const std::string& ledger_key);
  void SayWhereItIs(const std::string& what, int sig, long long kill_ms);
  void EndIfStuck(const std::string& what, int sig,
                  std::chrono::milliseconds grace);
  // With side_.mu held: the reason when this process has waited in a
  // collective for a while that the first rank to wait there entered with
  // another call, else "". Each collective is compared once.
  std::string CallsThatDiffer(const std::string& calls_prefix);
  // With side_.mu held: the reason when this process has waited in a send
  // or receive for a while whose other end still waits in one of another
  // element type or count (seen at two heartbeats), else "".
  std::string MessagesThatDiffer(const std::string& calls_prefix);
  // With side_.mu held: the reason once a peer that ended the test badly
  // (under `ended_key`) has been gone for its grace, else "".
  std::string PeerThatEndedBadly(const std::string& ended_key,
                                 std::chrono::milliseconds grace,
                                 std::uint64_t arm);
  // With side_.mu held: the reason once this process waits in a collective
  // of every rank of the step that a peer which passed it and left (under
  // `left_key`) never began, four heartbeats after it was seen, else "".
  std::string PeerThatLeftPassing(const std::string& left_key,
                                  std::uint64_t arm);

  const int rank_;
  // For a timeout's reason (read here: the side thread must not read the
  // environment).
  const std::string scale_note_;
  Liveness& liveness_;
  Communicators& communicators_;
  SideChannel& side_;
  std::atomic<bool> shut_down_{false};  // The collectives were cut.
  bool interrupted_ = false;            // A signal was handled; side thread.
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Clock::time_point> deadline_;  // Armed; under mu_.
  std::string what_;
  std::string ledger_key_;
  std::string calls_prefix_;
  std::string ended_key_;
  std::string left_key_;
  std::chrono::milliseconds grace_{0};
  std::uint64_t arms_ = 0;  // Arm()s so far: which body; under mu_.
  // When this rank first saw ended_key_ set in body ended_arm_ (side
  // thread).
  std::optional<Clock::time_point> ended_seen_;
  std::uint64_t ended_arm_ = 0;
  // The same for left_key_ (side thread).
  std::optional<Clock::time_point> left_seen_;
  std::uint64_t left_arm_ = 0;
  // The collective (its ledger index) the side thread has put or compared.
  struct Compared {
    std::uint64_t index = 0;
    bool done = false;  // Compared, or the first there.
  };
  std::optional<Compared> compared_;
  // The same for the send or receive it waits in; the stamps this rank
  // put on it, and the other end's stamp when first seen to differ.
  std::optional<Compared> messaged_;
  std::uint64_t messaged_beat_ = 0;
  std::optional<std::uint64_t> messaged_stamp_;
};

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_WATCHDOG_H_
