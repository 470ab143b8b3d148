// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Liveness of a launched job: which ranks are alive (each one's side thread
// bumps launched/alive/<r> twice a second), why the run cannot go on (the
// abort key: the first reason any rank gave), and the waits that notice
// both instead of waiting a whole timeout for a rank that died.
//
//   Liveness& live = job.liveness();
//   live.Await({key}, deadline, {0}, "the start of Suite.Test");  // throws
//   if (std::string why = live.broken(); !why.empty()) ...
//   live.Break("rank 2 stopped its heartbeat ...");  // every rank sees it
//
// A rank counts as dead when its heartbeat has not changed for kDeadAfter
// (times DISTTEST_TIMEOUT_SCALE);
// one that has not sent its first heartbeat is starting, not dead.
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_LIVENESS_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_LIVENESS_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/rendezvous/tcp_store.h"
#include "env/knobs.h"

namespace disttest::internal::launched {

using Clock = std::chrono::steady_clock;

// No heartbeat for this long: the rank is dead (or its machine stalls).
inline constexpr std::chrono::milliseconds kDeadAfter{5000};
// The heartbeat a rank sends while it takes its stacks after a signal or
// its timeout ("dumping 3"): alive, and about to say where it hangs.
inline constexpr std::string_view kDumpingBeat = "dumping ";

// Why rank 0 has no result of a rank whose body outlived the timeout.
inline constexpr char kStuck[] =
    "it was still in its body at the test's timeout (it printed its stacks "
    "to its stderr)";

// The side thread's connection to the store, and the lock it holds while
// it uses it (also held while the process environment changes: resolving a
// name reads it).
struct SideChannel {
  std::mutex mu;
  std::unique_ptr<TcpStore> store;
};

class Liveness {
 public:
  // `store` is the main thread's connection (set before first use).
  Liveness(int rank, int size, const std::unique_ptr<TcpStore>& store,
           SideChannel& side)
      : rank_(rank),
        size_(size),
        dead_after_(ScaledUp(kDeadAfter)),
        main_(store),
        side_(side) {}

  // Why the run cannot go on ("" while it can): this process's own
  // reason, or the abort key another rank set.
  std::string broken();
  // Fails the run on every rank: the reason goes to the store, where every
  // waiting rank sees it, and every later test here fails at once.
  void Break(const std::string& reason);

  // Waits until every key in `keys` is set, polling (with backoff) so that
  // it can notice an abort and ranks in `from` (keys[i] is from[i]'s) that
  // stopped heartbeating. Throws Error (abort, dead rank) or TimeoutError
  // ("<what>: rank 3 did not arrive before the test's timeout").
  void Await(const std::vector<std::string>& keys, Clock::time_point deadline,
             const std::vector<int>& from, const std::string& what);

  // A wait for results (rank 0's for the ranks', the others' for rank
  // 0's verdict): until all are in, the ranks still missing have stopped
  // heartbeating, or `deadline`. An abort does not end it: whoever can
  // still report does. Returns why each missing rank is missing.
  // With `cut_on_interrupt` (rank 0's waits), a SIGTERM or SIGINT ends it
  // too, soon enough for the report and the XML before the sender's kill:
  // a quarter of the time mpirun leaves before its SIGKILL (1 s by default),
  // else 6 s (a rank outside an operation takes its stacks for up to 3 s,
  // and its body 2 s more to return before it says it is stuck); counted
  // from the signal's arrival.
  std::map<int, std::string> AwaitResults(const std::vector<std::string>& keys,
                                          const std::vector<int>& from,
                                          Clock::time_point deadline,
                                          bool cut_on_interrupt = false);

  // Another rank whose heartbeat this rank has seen unchanged for at least
  // `silent` (it may have died, and the heartbeat bound will say so), or
  // -1. Without a store request: what TroubleElsewhere() saw last.
  int SilentRank(std::chrono::milliseconds silent);

  // The side thread, with side.mu held: this rank's heartbeat.
  void Beat(const std::string& value);
  // The side thread, with side.mu held: why a running body cannot complete
  // (an abort, a rank whose heartbeat stopped), or "".
  std::string TroubleElsewhere();

 private:
  struct Seen {
    std::string value;
    Clock::time_point since;  // When `value` was first seen.
  };

  std::string Value(const char* key);
  void CheckHeartbeats(const std::vector<int>& from, Clock::time_point now);
  // "stopped its heartbeat ... ago ..." when rank `r` seems dead, else "".
  // Both threads look (each through its own store connection) and share
  // what they saw, so that a death the side thread noticed during a body
  // counts at once afterwards.
  std::string Dead(int r, Clock::time_point now, TcpStore& store);
  // How long rank `r`'s heartbeat has not changed, as last looked at (0:
  // never seen beating, or last seen taking its stacks after a signal).
  std::chrono::milliseconds SilentFor(int r, Clock::time_point now);
  void SetBroken(const std::string& reason);

  const int rank_;
  const int size_;
  // kDeadAfter x DISTTEST_TIMEOUT_SCALE (read once, here: the side thread
  // must not read the environment the main thread changes).
  const std::chrono::milliseconds dead_after_;
  TcpStore& store() { return *main_; }

  const std::unique_ptr<TcpStore>& main_;
  SideChannel& side_;
  std::mutex broken_mu_;
  std::string broken_;  // Why the run cannot go on; under broken_mu_.
  std::mutex beats_mu_;
  std::map<int, Seen> beats_;  // The last heartbeat seen of each rank.
};

// Until rank 0 announces the end of the run (kEndKey), its store goes, or
// half a minute has passed.
void WaitForTheEnd(TcpStore& store);

// How long rank 0 waits at the end for the others, and they for it.
inline constexpr std::chrono::milliseconds kGoodbyeWait{30000};
// After a signal: how long a rank outside an operation takes its own stacks
// (the watchdog), and how long a body may take to return once its
// collectives are cut, before the rank says it is stuck.
inline constexpr std::chrono::milliseconds kInterruptStacks{3000};
inline constexpr std::chrono::milliseconds kBodyReturnGrace{2000};
// How long rank 0 still waits for results once a SIGTERM or SIGINT came
// (AwaitResults' cut_on_interrupt).
std::chrono::milliseconds WaitAfterInterrupt();

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_LIVENESS_H_
