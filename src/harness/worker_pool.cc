// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/worker_pool.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "disttest/comm/gloo_communicator.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "harness/spawned_rank_host.h"

namespace disttest::internal {

std::string PoolKey(int n) { return fmt::format("disttest/pool/{}", n); }

bool PooledRank() { return std::getenv(env::kInternalPool) != nullptr; }

bool ReusableCommunicator(Communicator* comm) {
  return comm == nullptr || !comm->failed();
}

RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store,
                      const ReportFn& report) {
  const std::chrono::milliseconds timeout = store.timeout();
  for (int n = 1;; ++n) {
    // Waiting for the next test has no deadline: the parent decides, and a
    // parent that dies takes this process with it (PR_SET_PDEATHSIG).
    store.set_timeout(std::chrono::hours(24 * 365));
    // Parked, the communicator's event loop sleeps instead of waking every
    // 10 ms (and taking CPU from the tests that run meanwhile).
    auto* gloo = dynamic_cast<GlooCommunicator*>(comm);
    if (gloo != nullptr) gloo->PauseEventLoop();
    std::vector<char> name = store.get(PoolKey(n));
    if (gloo != nullptr) gloo->ResumeEventLoop();
    store.set_timeout(timeout);
    if (name.empty()) return RankVerdict::kPassed;
    // Every rank has finished the last test: what it left running goes now.
    EndLeftovers("an earlier test on this rank");
    const std::string test(name.begin(), name.end());
    RankVerdict verdict = RankVerdict::kFailed;
    try {
      std::unique_ptr<RankProgram> next = first.Next(test);
      if (next == nullptr) {
        throw Error(
            fmt::format("this binary has no distributed test {}", test));
      }
      PrefixStore own(PoolKey(n), store);
      verdict = next->Run(env, comm, own, report);
    } catch (const std::exception& e) {
      report({RankMessage::Kind::kFatalFailure, first.file(), first.line(),
              fmt::format("a pooled rank could not start {}: {}", test,
                          e.what())});
    }
    const bool again = Succeeded(verdict) && ReusableCommunicator(comm);
    ReportVerdict(report, verdict);
    if (!again) return verdict;
  }
}

}  // namespace disttest::internal
