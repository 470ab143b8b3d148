// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/liveness.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <thread>

#include "disttest/error.h"
#include "harness/launched/keys.h"
#include "harness/process/interrupt.h"

namespace disttest::internal::launched {
namespace {

using std::chrono::milliseconds;

// The pause of polling waits: from 50 us, doubling, to 10 ms.
class Backoff {
 public:
  void Pause() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min<std::chrono::microseconds>(pause_ * 2, milliseconds(10));
  }

 private:
  std::chrono::microseconds pause_{50};
};

}  // namespace

milliseconds WaitAfterInterrupt() {
  // A quarter of the time before the sender's kill: the reports still in
  // flight come in that (the ranks in an operation send theirs within the
  // watchdog's tick), and the rest is for the report and the XML, also on
  // a loaded machine. Where the kill is not known: what a rank outside an
  // operation takes (its stacks, then its body's time to return before it
  // says it is stuck), and a second to report.
  const std::optional<milliseconds> kill = TimeBeforeTheKill();
  return kill ? *kill / 4
              : kInterruptStacks + kBodyReturnGrace + milliseconds(1000);
}

std::string Liveness::broken() {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    reason = broken_;
  }
  if (reason.empty()) {
    try {
      if (store().check({kAbortKey})) reason = Value(kAbortKey);
    } catch (const std::exception& e) {
      reason = fmt::format("the store is gone (did rank 0 end?): {}", e.what());
    }
    if (!reason.empty()) SetBroken(reason);
  }
  return reason;
}

void Liveness::SetBroken(const std::string& reason) {
  std::lock_guard<std::mutex> lock(broken_mu_);
  if (broken_.empty()) broken_ = reason;
}

void Liveness::Break(const std::string& reason) {
  // Read alike on every rank: the one that saw it first says so.
  const std::string text = fmt::format("rank {}: {}", rank_, reason);
  try {
    std::lock_guard<std::mutex> lock(side_.mu);
    if (!side_.store->check({kAbortKey})) {
      side_.store->set(kAbortKey, text);
      SetBroken(text);
    } else {
      // Another rank said first (this one may be passing its word on).
      std::vector<char> v = side_.store->get(kAbortKey);
      SetBroken(std::string(v.begin(), v.end()));
    }
  } catch (const std::exception&) {
    // The store is gone (rank 0 ended): the others will notice too.
    SetBroken(text);
  }
}

void Liveness::Await(const std::vector<std::string>& keys,
                     Clock::time_point deadline, const std::vector<int>& from,
                     const std::string& what) {
  Backoff backoff;
  auto next_health = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    if (store().check(keys)) return;
    if (store().check({kAbortKey})) throw Error(Value(kAbortKey));
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<int> missing, never;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (store().check({keys[i]})) continue;
        missing.push_back(from[i]);
        if (from[i] != rank_ && !store().check({JoinedKey(from[i])})) {
          never.push_back(from[i]);
        }
      }
      std::string why = fmt::format(
          "{}: rank{} {} did not arrive before the test's timeout", what,
          missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
      if (!never.empty()) {
        why += fmt::format(
            "; rank{} {} never reached the store at {}:{} (a firewall "
            "between the nodes, a wrong MASTER_ADDR or port, or a rank that "
            "never started)",
            never.size() == 1 ? "" : "s", fmt::join(never, ", "),
            store().host(), store().port());
      }
      throw TimeoutError(why);
    }
    if (now >= next_health) {
      CheckHeartbeats(from, now);
      next_health = now + std::chrono::seconds(1);
    }
    backoff.Pause();
  }
}

std::map<int, std::string> Liveness::AwaitResults(
    const std::vector<std::string>& keys, const std::vector<int>& from,
    Clock::time_point deadline, bool cut_on_interrupt) {
  Backoff backoff;
  auto next_health = Clock::now() + std::chrono::seconds(1);
  std::map<int, std::string> dead;
  std::optional<Clock::time_point> cut_at;
  std::string cut_why;
  for (;;) {
    if (store().check(keys)) return {};
    const auto now = Clock::now();
    if (const int sig = PendingInterrupt();
        cut_on_interrupt && sig != 0 && !cut_at) {
      // From the signal's arrival: the time rank 0 took to get here (its
      // own body's end, its report) counts too.
      const milliseconds wait = WaitAfterInterrupt();
      cut_at = InterruptArrivedAt() + wait;
      cut_why = fmt::format("none came in the {} ms after disttest got {}",
                            wait.count(), InterruptText(sig));
    }
    const bool cut = cut_at && now >= *cut_at;
    const bool late = now >= deadline;
    const bool health = now >= next_health;
    if (late || health || cut) {
      next_health = now + std::chrono::seconds(1);
      std::map<int, std::string> missing;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (store().check({keys[i]})) continue;
        const int r = from[i];
        if (store().check({StuckKey(r)})) {
          // It says so itself, and has told the others; why, after a signal.
          const std::string said = Value(StuckKey(r).c_str());
          dead[r] = said == "1" ? kStuck : said;
        }
        std::string why = Dead(r, now, store());
        if (!why.empty() && dead.count(r) == 0) {
          dead[r] = why;
          Break(fmt::format("rank {} {}", r, why));  // The job is not whole.
        }
        auto it = dead.find(r);
        missing[r] = it != dead.end() ? it->second : "";
      }
      bool all_dead = true;
      for (auto& [r, why] : missing) {
        if (why.empty()) all_dead = false;
      }
      if (late || all_dead || cut) {
        for (auto& [r, why] : missing) {
          if (!why.empty()) continue;
          why = cut ? cut_why : kStuck;
          // Cut before its silence reached the bound (a launcher's SIGTERM
          // soon after a rank died, as srun --kill-on-bad-exit sends): say
          // it went silent all the same, when it did for 2/5 of the bound
          // (four heartbeats in a regular build) or more.
          if (const auto silent = SilentFor(r, now);
              cut && silent >= dead_after_ * 2 / 5) {
            why += fmt::format(
                ", and it stopped its heartbeat {} ms ago: it died, or its "
                "machine stalls",
                silent.count());
          }
        }
        return missing;
      }
    }
    backoff.Pause();
  }
}

void Liveness::Beat(const std::string& value) {
  side_.store->set(AliveKey(rank_), value);
}

std::string Liveness::TroubleElsewhere() {
  if (side_.store->check({kAbortKey})) {
    std::vector<char> v = side_.store->get(kAbortKey);
    return std::string(v.begin(), v.end());
  }
  const auto now = Clock::now();
  for (int r = 0; r < size_; ++r) {
    std::string why = Dead(r, now, *side_.store);
    if (!why.empty()) return fmt::format("rank {} {}", r, why);
  }
  return "";
}

std::string Liveness::Value(const char* key) {
  std::vector<char> v = store().get(key);
  return std::string(v.begin(), v.end());
}

void Liveness::CheckHeartbeats(const std::vector<int>& from,
                               Clock::time_point now) {
  for (int r : from) {
    std::string why = Dead(r, now, store());
    if (!why.empty()) {
      std::string reason = fmt::format("rank {} {}", r, why);
      Break(reason);
      throw Error(reason);
    }
  }
}

std::string Liveness::Dead(int r, Clock::time_point now, TcpStore& store) {
  if (r == rank_) return "";
  const std::string key = AliveKey(r);
  std::string beat;
  if (store.check({key})) {
    std::vector<char> v = store.get(key);
    beat.assign(v.begin(), v.end());
  } else if (!store.check({JoinedKey(r)})) {
    // Not joined yet: starting (a slow node), not dead; the wait's own
    // deadline covers one that never comes.
    return "";
  }
  // Joined, and silent since (its watchdog beats from the moment it joins):
  // its silence counts from this reader's first look, as a stopped beat's.
  // (A rank whose first beat was lost with its link is not taken for one
  // that is starting, and waited for until the timeout.)
  std::lock_guard<std::mutex> lock(beats_mu_);
  auto [it, fresh] = beats_.try_emplace(r, Seen{beat, now});
  if (fresh || it->second.value != beat) {
    it->second = {beat, now};
    return "";
  }
  if (now - it->second.since <= dead_after_) return "";
  const auto silent =
      std::chrono::duration_cast<milliseconds>(now - it->second.since).count();
  if (beat.empty()) {
    return fmt::format(
        "sent no heartbeat in the {} ms since it joined: it died, or its "
        "machine stalls",
        silent);
  }
  return fmt::format(
      "stopped its heartbeat {} ms ago: it died, or its machine stalls",
      silent);
}

int Liveness::SilentRank(std::chrono::milliseconds silent) {
  const auto now = Clock::now();
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && SilentFor(r, now) >= silent) return r;
  }
  return -1;
}

std::chrono::milliseconds Liveness::SilentFor(int r, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(beats_mu_);
  auto it = beats_.find(r);
  // A rank that was taking its stacks after the signal (kDumpingBeat) was
  // alive then: its body may since be stuck, which it says itself.
  if (it == beats_.end() || it->second.value.empty() ||
      it->second.value.rfind(kDumpingBeat, 0) == 0) {
    return milliseconds(0);
  }
  return std::chrono::duration_cast<milliseconds>(now - it->second.since);
}

void WaitForTheEnd(TcpStore& store) {
  const auto deadline = Clock::now() + ScaledUp(kGoodbyeWait);
  try {
    while (Clock::now() < deadline && !store.check({kEndKey})) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  } catch (const std::exception&) {
    // Rank 0's store went with its process: the run is over.
  }
}

}  // namespace disttest::internal::launched
