// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/launched_rank_host.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "comm/ledger.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/knobs.h"
#include "harness/report/trace.h"

namespace disttest::internal::launched {
namespace {

// Puts a step's rank environment (RANK, WORLD_SIZE, ...) in the process
// environment, remembering what was there, once per name; Restore() puts
// it back. Under the side thread's lock, so that the side thread, which may
// resolve names (getaddrinfo reads the environment), never sees it change.
class RankEnvironment {
 public:
  explicit RankEnvironment(SideChannel& side) : side_(side) {}
  ~RankEnvironment() { Restore(); }
  RankEnvironment(const RankEnvironment&) = delete;
  RankEnvironment& operator=(const RankEnvironment&) = delete;

  void Set(const RankEnv& env) {
    std::lock_guard<std::mutex> lock(side_.mu);
    std::set<std::string> seen;
    for (const auto& [name, value] : env.Variables()) {
      if (seen.insert(name).second) {
        const char* old = std::getenv(name.c_str());
        saved_.emplace_back(name, old != nullptr
                                      ? std::optional<std::string>(old)
                                      : std::nullopt);
      }
      setenv(name.c_str(), value.c_str(), 1);
    }
  }

  void Restore() {
    std::lock_guard<std::mutex> lock(side_.mu);
    for (const auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    saved_.clear();
  }

 private:
  SideChannel& side_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The last operations of a rank that go with its verdict: all it kept
// when tracing.
std::size_t LedgerRecords() { return TraceWanted() ? kTraceRing : 8; }

class LaunchedRankHost : public RankHost {
 public:
  LaunchedRankHost(LaunchedJob& job, const StepKeys& keys, int n,
                   Clock::time_point deadline, std::string what,
                   bool compare_calls, std::chrono::milliseconds failure_grace)
      : compare_calls_(compare_calls),
        failure_grace_(failure_grace),
        job_(job),
        keys_(keys),
        n_(n),
        deadline_(deadline),
        what_(std::move(what)),
        environment_(job.side()),
        store_(keys.StorePrefix(), job.store()) {}

  ~LaunchedRankHost() override { job_.watchdog().Disarm(); }

  RankEnv Enter() override {
    RankEnv env = StepEnv(job_.env(), n_);
    // The body sees the rank environment a spawned rank would, for code
    // that reads it; the launcher's comes back after the step.
    environment_.Set(env);
    // Watched from here: connecting can hang on a dead peer too.
    job_.watchdog().Arm(deadline_, what_, keys_.Ledger(job_.rank()),
                        compare_calls_ ? keys_.CallsPrefix() : "",
                        keys_.EndedBadly(), failure_grace_,
                        keys_.LeftPassing());
    return env;
  }

  Store& store() override { return store_; }

  Communicator* Connect(const RankEnv& /*env*/, const Options& options,
                        std::chrono::milliseconds timeout) override {
    return job_.communicators().For(n_, options, timeout);
  }

  void Report(const RankMessage& m) override {
    results_.push_back(MarkedIfItFollows(m));
    reported_ns_.push_back(MonotonicNs());
  }

  RankVerdict Finish(RankVerdict verdict, Communicator* comm) override {
    job_.watchdog().Disarm();
    environment_.Restore();
    const int r = job_.rank();
    try {
      for (std::size_t i = 0; i < results_.size(); ++i) {
        job_.store().set(keys_.Message(r, i),
                         EncodeRankMessage(results_[i], 1 << 20));
      }
      // With its collective ledger, for rank 0's report when the test
      // failed anywhere (a few hundred bytes; no extra request), and how long
      // before reading it each result came (for the trace).
      std::string done = fmt::format("{} {}", results_.size(), NameOf(verdict));
      if (Ledger* ledger = Ledger::Current()) {
        const RankLedgerView view = ledger->Read(r);
        for (const std::int64_t t : reported_ns_) {
          done +=
              fmt::format(" {}", std::max<std::int64_t>(0, view.read_ns - t));
        }
        done += '\n' + EncodeLedger(view, LedgerRecords());
      }
      if (verdict != RankVerdict::kPassed && n_ > 1 &&
          job_.store().add(keys_.EndedBadlyCount(), 1) == 1) {
        job_.store().set(keys_.EndedBadly(),
                         fmt::format("{} {}", NameOf(verdict), r));
      }
      if (verdict == RankVerdict::kPassed && n_ > 1 &&
          job_.store().add(keys_.LeftPassingCount(), 1) == 1) {
        std::string left = fmt::format("{} {}", r, n_);
        if (Ledger* ledger = Ledger::Current()) {
          const std::uint32_t comms =
              std::min<std::uint32_t>(ledger->comms(), LedgerMemory::kComms);
          for (std::uint32_t id = 0; id < comms; ++id) {
            if (ledger->comm_size(id) != n_ || ledger->comm_key(id) == 0) {
              continue;
            }
            left += fmt::format(" {:x}:{}", ledger->comm_key(id),
                                ledger->SeqsTaken(id));
          }
        }
        job_.store().set(keys_.LeftPassing(), left);
      }
      // Before its verdict: every rank reads it once the verdict is out.
      if (comm != nullptr && comm->failed()) {
        job_.store().set(keys_.CommFailed(), std::to_string(r));
      }
      job_.store().set(keys_.Done(r), done);
    } catch (const std::exception&) {
      SayHere();
      throw;
    }
    return verdict;
  }

 private:
  // Rank 0 may not have been told (its store is out of reach, and it reads
  // a rank's results only once its verdict has come): this rank's failures
  // go to its own stderr, the one output of a rank other than 0 that is
  // kept, rather than nowhere.
  void SayHere() const {
    for (const RankMessage& m : results_) {
      if (m.kind != RankMessage::Kind::kFatalFailure &&
          m.kind != RankMessage::Kind::kNonFatalFailure) {
        continue;
      }
      const std::string where =
          m.file.empty() ? "" : fmt::format("{}:{}: ", m.file, m.line);
      std::fprintf(stderr,
                   "[ disttest ] rank %d of %d, %s (rank 0 may not have been "
                   "told): %s%s\n",
                   job_.rank(), n_, what_.c_str(), where.c_str(),
                   m.message.c_str());
    }
    std::fflush(stderr);
  }

  const bool compare_calls_;
  const std::chrono::milliseconds failure_grace_;
  LaunchedJob& job_;
  const StepKeys& keys_;
  const int n_;
  const Clock::time_point deadline_;
  const std::string what_;
  RankEnvironment environment_;
  PrefixStore store_;
  std::vector<RankMessage> results_;
  std::vector<std::int64_t> reported_ns_;  // When each came.
};

}  // namespace

RankEnv StepEnv(const LauncherEnv& job, int n) {
  RankEnv env;
  env.rank = job.rank;
  env.world_size = n;
  env.local_size = std::min(job.local_size.value_or(job.world_size), n);
  env.local_rank =
      std::min(job.local_rank.value_or(job.rank), env.local_size - 1);
  env.master_addr = job.master_addr;
  env.master_port = job.master_port;
  return env;
}

RankVerdict RunLaunchedRank(LaunchedJob& job, const StepKeys& keys, int n,
                            RankProgram& program, const Options& options,
                            Clock::time_point deadline,
                            const std::string& what) {
  LaunchedRankHost host(job, keys, n, deadline, what,
                        options.compare_calls && CompareCallsWhileWaiting(),
                        options.failure_grace);
  return RunRank(program, options, host);
}

}  // namespace disttest::internal::launched
