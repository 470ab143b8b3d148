// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/watchdog.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "harness/launched/keys.h"
#include "harness/process/interrupt.h"
#include "harness/process/stack_dump.h"
#include "harness/report/collective_report.h"
#include "harness/report/trace.h"

namespace disttest::internal::launched {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kHeartbeatEvery{500};
constexpr milliseconds kSignalTick{50};
// How long the stack tool may take; after a signal, whose sender waits a
// few seconds at most.
constexpr milliseconds kStackDeadline{10000};
// How long a body must have waited in a collective for its call to go to
// the store, to be compared with the other ranks' there.
constexpr std::chrono::nanoseconds kCompareAfter{milliseconds(400)};

}  // namespace

void Watchdog::Start() {
  std::thread([this] { Loop(); }).detach();
}

void Watchdog::Arm(Clock::time_point deadline, std::string what,
                   std::string ledger_key, std::string calls_prefix,
                   std::string ended_key, std::chrono::milliseconds grace,
                   std::string left_key) {
  std::lock_guard<std::mutex> lock(mu_);
  deadline_ = deadline;
  what_ = std::move(what);
  ledger_key_ = std::move(ledger_key);
  calls_prefix_ = std::move(calls_prefix);
  ended_key_ = std::move(ended_key);
  left_key_ = std::move(left_key);
  grace_ = grace;
  ++arms_;
  cv_.notify_all();
}

void Watchdog::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  deadline_.reset();
  cv_.notify_all();
}

void Watchdog::ProcessEnds(const char* how) {
  // Each lock tried for a while, not waited for: exit() may come from a
  // signal handler on a thread that holds one (the side thread's), and the
  // process must end all the same.
  auto take = [](std::mutex& mu) {
    std::unique_lock<std::mutex> lock(mu, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return lock;
  };
  std::string what;
  {
    std::unique_lock<std::mutex> lock = take(mu_);
    if (!lock.owns_lock() || !deadline_) return;
    what = what_;
  }
  const std::string why = fmt::format(
      "called {} while {} ran (in its body, or a thread of it): its process "
      "ended before the test did",
      how, what);
  std::unique_lock<std::mutex> lock = take(side_.mu);
  if (!lock.owns_lock()) return;
  try {
    side_.store->set(StuckKey(rank_), why);
    // As Liveness::Break: the first reason any rank gave stands.
    if (!side_.store->check({kAbortKey})) {
      side_.store->set(kAbortKey,
                       fmt::format("rank {}: rank {} {}", rank_, rank_, why));
    }
  } catch (const std::exception&) {
    // The store is gone: the others will notice that too.
  }
}

void Watchdog::Loop() {
  long long beat = 0;
  int failures = 0;
  auto next_beat = Clock::now();
  for (;;) {
    bool armed = false;
    std::string what, ledger_key, calls_prefix, ended_key, left_key;
    milliseconds grace{0};
    std::uint64_t arm = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Woken often for a signal: a launcher gives its ranks little time
      // after passing one on (mpirun: 1 s, then SIGKILL).
      cv_.wait_for(lock, kSignalTick);
      armed = deadline_.has_value();
      what = what_;
      ledger_key = ledger_key_;
      calls_prefix = calls_prefix_;
      ended_key = ended_key_;
      left_key = left_key_;
      grace = grace_;
      arm = arms_;
      if (armed && Clock::now() >= *deadline_) {
        lock.unlock();
        TimedOut(what, ledger_key);
      } else if (const int sig = PendingInterrupt();
                 armed && sig != 0 && !interrupted_) {
        // ctest's TIMEOUT, a cancelled job, Ctrl-C: this test ends now,
        // with its report, and the rest are skipped (glue/launched.cc).
        interrupted_ = true;
        lock.unlock();
        Stop(what, ledger_key, sig);
      }
    }
    if (Clock::now() < next_beat) continue;
    next_beat = Clock::now() + kHeartbeatEvery;
    std::string trouble;
    bool calls_differ = false;
    try {
      std::lock_guard<std::mutex> side(side_.mu);
      liveness_.Beat(std::to_string(++beat));
      if (armed) trouble = liveness_.TroubleElsewhere();
      if (armed && trouble.empty() && !shut_down_) {
        trouble = CallsThatDiffer(calls_prefix);
        if (trouble.empty()) trouble = MessagesThatDiffer(calls_prefix);
        calls_differ = !trouble.empty();
      }
      if (armed && trouble.empty() && !shut_down_) {
        trouble = PeerThatEndedBadly(ended_key, grace, arm);
      }
      if (armed && trouble.empty() && !shut_down_) {
        trouble = PeerThatLeftPassing(left_key, arm);
      }
      failures = 0;
    } catch (const std::exception& e) {
      // Gone for good (rank 0 ended) after a few failures in a row.
      if (!armed && ++failures >= 3) return;
      if (armed) {
        trouble =
            fmt::format("the store is gone (did rank 0 end?): {}", e.what());
      }
    }
    if (!trouble.empty() && !shut_down_) {
      // Still the body it was found in (a test that ended meanwhile, or the
      // next one, is not cut for it).
      if (armed) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!deadline_ || arms_ != arm) continue;
        // A bug of the program, noted while its body is still armed (its
        // end disarms under mu_): the test fails for it even if it catches
        // the error its call throws once cut (peer_errors.h; a process's
        // one rank notes it, from any thread).
        if (calls_differ) (void)MismatchOfCalls(trouble);
      }
      shut_down_ = true;
      liveness_.Break(trouble);
      communicators_.ShutDown(trouble);
    }
  }
}

std::string Watchdog::PeerThatEndedBadly(const std::string& ended_key,
                                         milliseconds grace,
                                         std::uint64_t arm) {
  if (arm != ended_arm_) {  // Another body: its own grace.
    ended_arm_ = arm;
    ended_seen_.reset();
  }
  if (ended_key.empty() || !side_.store->check({ended_key})) return "";
  const std::vector<char> v = side_.store->get(ended_key);
  // "<verdict> <rank>", by the first rank that ended so (StepKeys).
  const std::string value(v.begin(), v.end());
  const std::size_t space = value.find(' ');
  const std::string verdict = value.substr(0, space);
  const std::string who =
      space == std::string::npos ? "?" : value.substr(space + 1);
  if (who == std::to_string(rank_)) return "";
  const auto now = Clock::now();
  if (!ended_seen_) ended_seen_ = now;
  // At least four heartbeats: long enough to see a peer go silent (below).
  const milliseconds wait =
      std::max(verdict == "skipped" ? 5 * grace : grace, 4 * kHeartbeatEvery);
  if (now - *ended_seen_ < wait) return "";
  // Only a body that waits in a collective then, which cannot complete
  // without the rank that left: one that computes, or waits on a peer
  // still here, goes on.
  Ledger* ledger = Ledger::Current();
  if (ledger == nullptr || !ledger->OpenCollective() ||
      ledger->memory().ProgressOf(ledger->slot()).blocked == 0) {
    return "";
  }
  // A rank silent for a few heartbeats may have died, and the one that left
  // may have failed for that (its connection to the dead one closed): the
  // heartbeat bound names the dead one soon; until then, or until it beats
  // again, no cut in the name of the one that left.
  if (liveness_.SilentRank(3 * kHeartbeatEvery) >= 0) return "";
  return fmt::format(
      "rank {} {} the test and left it, and this rank was still in it {} ms "
      "later (options().failure_grace{}, and at least four heartbeats)",
      who, verdict, wait.count(),
      verdict == "skipped" ? " x 5, after a skip" : "");
}

std::string Watchdog::PeerThatLeftPassing(const std::string& left_key,
                                          std::uint64_t arm) {
  if (arm != left_arm_) {  // Another body: its own wait.
    left_arm_ = arm;
    left_seen_.reset();
  }
  Ledger* ledger = Ledger::Current();
  if (left_key.empty() || ledger == nullptr) return "";
  // Local looks first: most heartbeats find the body computing. A call
  // whose timeout the test shortened may be one it waits out on purpose
  // (timeout_ms 0): never cut.
  const std::optional<LedgerRecord> open = ledger->OpenCollective();
  const Progress progress = ledger->memory().ProgressOf(ledger->slot());
  if (!open || progress.blocked == 0 || progress.timeout_ms == 0) return "";
  if (!side_.store->check({left_key})) return "";
  const std::vector<char> v = side_.store->get(left_key);
  // "<rank> <size> <key>:<n> ..." (StepKeys::LeftPassing).
  std::istringstream in(std::string(v.begin(), v.end()));
  int who = -1;
  int size = 0;
  if (!(in >> who >> size) || who == rank_ ||
      ledger->comm_size(open->comm) != size) {
    return "";
  }
  // The collectives it began on this communicator: one it began may still
  // complete without it (a broadcast's tree relays on), one past them never.
  const std::string mine = fmt::format("{:x}:", ledger->comm_key(open->comm));
  // (Not listed: unknown there, past the ledger's communicators: no cut.)
  std::optional<std::uint64_t> began;
  for (std::string item; in >> item;) {
    if (item.starts_with(mine)) {
      began = std::strtoull(item.c_str() + mine.size(), nullptr, 10);
    }
  }
  if (!began || open->seq < *began) return "";
  // Four heartbeats after it was seen: long enough for a silent rank to be
  // named instead (it may have died, and the one that left passed anyway).
  const auto now = Clock::now();
  if (!left_seen_) left_seen_ = now;
  if (now - *left_seen_ < 4 * kHeartbeatEvery) return "";
  if (liveness_.SilentRank(3 * kHeartbeatEvery) >= 0) return "";
  return fmt::format(
      "rank {} passed the test and left it ({}) while this rank waited in {} "
      "(collective #{} on {}), which needs all {} ranks: it can never "
      "complete",
      who,
      *began == 0
          ? std::string("it began no collective there")
          : fmt::format("its last collective there was #{}", *began - 1),
      open->str(), open->seq, CommTitle(ledger->comm_name(open->comm)), size);
}

std::string Watchdog::CallsThatDiffer(const std::string& calls_prefix) {
  Ledger* ledger = Ledger::Current();
  if (ledger == nullptr || calls_prefix.empty()) return "";
  const std::optional<LedgerRecord> open = ledger->OpenCollective();
  if (!open || MonotonicNs() - open->entered_ns < kCompareAfter.count()) {
    return "";
  }
  const std::uint64_t key = ledger->comm_key(open->comm);
  if (key == 0) return "";  // Past the communicators the ledger tells apart.
  if (compared_ && compared_->index == open->index && compared_->done) {
    return "";
  }
  const std::string base =
      fmt::format("{}{:x}/{}", calls_prefix, key, open->seq);
  // What the ranks must agree on; each one's own call says the rest.
  const std::string call = open->agreed();
  const std::string mine =
      fmt::format("rank {} called {} {}", rank_, open->str(), open->where());
  if (!compared_ || compared_->index != open->index) {
    compared_ = Compared{open->index, false};
    if (side_.store->add(base + "/n", 1) == 1) {
      side_.store->set(base, call + "\n" + mine);  // The first one here.
      compared_->done = true;
      return "";
    }
  }
  // The first one's call is set a moment after its add: else next beat.
  if (!side_.store->check({base})) return "";
  compared_->done = true;
  const std::vector<char> value = side_.store->get(base);
  const std::string theirs(value.begin(), value.end());
  const std::size_t end = theirs.find('\n');
  if (end == std::string::npos || theirs.compare(0, end, call) == 0) return "";
  return fmt::format(
      "collective #{} on {} does not match across the ranks: {}; {}", open->seq,
      CommTitle(ledger->comm_name(open->comm)), theirs.substr(end + 1), mine);
}

std::string Watchdog::MessagesThatDiffer(const std::string& calls_prefix) {
  Ledger* ledger = Ledger::Current();
  if (ledger == nullptr || calls_prefix.empty()) return "";
  const std::optional<LedgerRecord> open =
      ledger->memory().WaitingMessage(ledger->slot());
  if (!open || open->seq == Ledger::kNoSeq ||
      MonotonicNs() - open->entered_ns < kCompareAfter.count()) {
    return "";
  }
  const std::uint64_t key = ledger->comm_key(open->comm);
  const int here = ledger->comm_rank(open->comm);
  // (A message to the rank itself is paired in the communicator's front.)
  if (key == 0 || here < 0 || open->peer == here) return "";
  // Numbers in a pair that both ends count alike: not where a send or
  // receive of the communicator failed in this test (it took its number,
  // and its message pairs with the next), nor a call whose timeout the
  // test shortened (waited out on purpose, perhaps), nor calls from
  // several threads. Such a message waits for its timeout, as before.
  const Progress progress = ledger->memory().ProgressOf(ledger->slot());
  if (progress.timeout_ms == 0 || progress.threads ||
      ledger->Read(rank_).transfers_of(key).failed > 0) {
    return "";
  }
  if (!messaged_ || messaged_->index != open->index) {
    messaged_ = Compared{open->index, false};
    messaged_stamp_.reset();
  }
  if (messaged_->done) return "";
  // Both ends of a message name it alike: its communicator, sender,
  // receiver, tag and number in their pair. Each end puts its call there at
  // every heartbeat while it waits in it, stamped: the other end takes a
  // difference only from one whose stamp moves (still waiting in that
  // call, not one that gave up).
  const bool send = open->op == LedgerOp::kSend;
  const std::string base = fmt::format(
      "{}message/{:x}/{}-{}/{}/{}/", calls_prefix, key,
      send ? here : open->peer, send ? open->peer : here, open->tag, open->seq);
  // What the two ends must agree on; then who this end is, its stamp and
  // its call.
  const std::string shape =
      fmt::format("{} x {}", open->count, static_cast<int>(open->type));
  side_.store->set(base + (send ? "send" : "recv"),
                   fmt::format("{}\n{} {} {}\n{} {}", shape, rank_, here,
                               ++messaged_beat_, open->str(), open->where()));
  const std::string other = base + (send ? "recv" : "send");
  if (!side_.store->check({other})) return "";
  const std::vector<char> value = side_.store->get(other);
  const std::string theirs(value.begin(), value.end());
  const std::size_t first = theirs.find('\n');
  const std::size_t second =
      first == std::string::npos ? first : theirs.find('\n', first + 1);
  if (second == std::string::npos || theirs.compare(0, first, shape) == 0) {
    messaged_->done = true;  // They pair: nothing to compare again.
    return "";
  }
  int world = -1;
  int there = -1;
  std::uint64_t stamp = 0;
  std::istringstream who(theirs.substr(first + 1, second - first - 1));
  if (!(who >> world >> there >> stamp)) return "";
  if (!messaged_stamp_ || *messaged_stamp_ == stamp) {
    if (!messaged_stamp_) messaged_stamp_ = stamp;
    return "";
  }
  messaged_->done = true;
  const std::string me = RankThere(rank_, here);
  const std::string peer = RankThere(world, there);
  const std::string mine =
      fmt::format("{} called {} {}", me, open->str(), open->where());
  const std::string its =
      fmt::format("{} called {}", peer, theirs.substr(second + 1));
  return fmt::format(
      "{} on {}: its send and its receive do not match (a message pairs "
      "only with a receive of its element type and count): {}; {}",
      MessageHead(open->seq, send ? me : peer, send ? peer : me, open->tag),
      CommTitle(ledger->comm_name(open->comm)), send ? mine : its,
      send ? its : mine);
}

std::string Watchdog::OwnStacks(milliseconds deadline) {
  // Yama (ptrace_scope 1) lets a process be traced only by its ancestors
  // and by the tracer it declares, with that one's descendants: the tool
  // is this process's child.
  prctl(PR_SET_PTRACER, getpid(), 0, 0, 0);
  StackTool tool;
  {
    // The main thread changes the environment under this lock.
    std::lock_guard<std::mutex> side(side_.mu);
    tool = FindStackTool();
  }
  const pid_t self = getpid();
  std::atomic<bool> taken{false};
  std::string stacks;
  auto take = [&] {
    try {
      stacks = DumpStacks({self}, deadline, tool)[0];
    } catch (const std::exception& e) {
      stacks = fmt::format("the stacks could not be taken: {}\n", e.what());
    }
    taken = true;
  };
  std::thread taker;
  try {
    taker = std::thread(take);
  } catch (const std::exception&) {
    take();  // No thread to spare: without heartbeats meanwhile.
  }
  // This rank is alive, and says where it hangs: heartbeats go on.
  long long beat = 0;
  while (!taken) {
    try {
      std::lock_guard<std::mutex> side(side_.mu);
      liveness_.Beat(fmt::format("{}{}", kDumpingBeat, ++beat));
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  if (taker.joinable()) taker.join();
  std::string text;
  std::size_t start = 0;
  while (start < stacks.size()) {
    std::size_t end = stacks.find('\n', start);
    if (end == std::string::npos) end = stacks.size();
    text += fmt::format("[rank {}] {}\n", rank_,
                        std::string_view(stacks).substr(start, end - start));
    start = end + 1;
  }
  return text;
}

void Watchdog::PostLedger(const std::string& ledger_key) {
  Ledger* ledger = Ledger::Current();
  if (ledger == nullptr || ledger_key.empty()) return;
  try {
    std::lock_guard<std::mutex> side(side_.mu);
    side_.store->set(ledger_key, EncodeLedger(ledger->Read(rank_),
                                              TraceWanted() ? kTraceRing : 16));
  } catch (const std::exception&) {
    // The store is gone: rank 0 reports without it.
  }
}

void Watchdog::SayWhereItIs(const std::string& what, int sig,
                            long long kill_ms) {
  const std::string when =
      sig == 0 ? "at the test's timeout"
               : fmt::format("when disttest got {}", InterruptText(sig));
  // After a signal, a body in an operation has its place in the ledger:
  // no time goes to its stacks. Nor where the sender kills this process
  // before they could be taken and reported (mpirun: 1 s after SIGTERM).
  bool in_operation = false;
  if (Ledger* ledger = Ledger::Current(); ledger != nullptr && sig != 0) {
    const RankLedgerView view = ledger->Read(rank_);
    in_operation = !view.records.empty() &&
                   view.records.back().state == LedgerState::kEntered;
  }
  const bool no_time =
      kill_ms >= 0 && milliseconds(kill_ms) < 2 * kInterruptStacks;
  const std::string instead =
      in_operation ? "it is in an operation of its ledger"
      : no_time    ? fmt::format(
                         "no time for its stacks: mpirun sends "
                            "SIGKILL {} ms after its SIGTERM",
                         kill_ms)
                : "the stacks of this process";
  const bool stacks = !in_operation && !no_time;
  std::fprintf(stderr,
               "[ disttest ] rank %d: %s is still in its body %s; %s (pid "
               "%d)%s\n",
               rank_, what.c_str(), when.c_str(), instead.c_str(), getpid(),
               stacks ? ":" : "");
  std::fflush(stderr);
  if (stacks) {
    const std::string stacks =
        OwnStacks(sig == 0 ? kStackDeadline : kInterruptStacks);
    (void)!write(STDERR_FILENO, stacks.data(), stacks.size());
  }
}

void Watchdog::EndIfStuck(const std::string& what, int sig,
                          milliseconds grace) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cv_.wait_for(lock, grace, [&] { return !deadline_.has_value(); })) {
    return;
  }
  // Stuck in its own code: nothing can stop it. This process ends
  // once rank 0 has reported (leaving earlier would make a launcher
  // such as mpirun end rank 0 too).
  std::fprintf(stderr,
               "[ disttest ] rank %d: the body of %s does not return; "
               "this process ends when rank 0 has reported\n",
               rank_, what.c_str());
  std::fflush(nullptr);
  try {
    std::lock_guard<std::mutex> side(side_.mu);
    // Rank 0 waits no longer; after a signal, it says so (kStuck is the
    // timeout's).
    side_.store->set(
        StuckKey(rank_),
        sig == 0 ? std::string("1")
                 : fmt::format("its body was still running when disttest "
                               "got {}, and did not return once its "
                               "collectives were cut",
                               InterruptText(sig)));
    side_.store->set(ByeKey(rank_), "1");
    WaitForTheEnd(*side_.store);
  } catch (const std::exception&) {
  }
  std::fflush(nullptr);
  _exit(1);
}

void Watchdog::Stop(const std::string& what, const std::string& ledger_key,
                    int sig) {
  // Where this rank's collectives are, before anything changes them.
  PostLedger(ledger_key);
  // -1: no kill is known to come.
  const long long kill_ms =
      sig != 0 ? TimeBeforeTheKill().value_or(milliseconds(-1)).count() : -1;
  SayWhereItIs(what, sig, kill_ms);
  const std::string why = sig == 0
                              ? fmt::format("{} timed out{}", what, scale_note_)
                              : fmt::format("disttest got {} while {} ran",
                                            InterruptText(sig), what);
  liveness_.Break(why);
  shut_down_ = true;
  communicators_.ShutDown(why);
  // Where the sender kills soon (mpirun), a body that does not return is
  // not waited for past an eighth of that: this rank's word then reaches
  // rank 0 before it stops waiting (a quarter), and it must still report.
  EndIfStuck(what, sig,
             kill_ms >= 0
                 ? std::min(kBodyReturnGrace, milliseconds(kill_ms / 8))
                 : kBodyReturnGrace);
}

}  // namespace disttest::internal::launched
