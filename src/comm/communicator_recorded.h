// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Communicator::Recorded: one operation of a communicator in the rank's
// collective ledger, around its backend's Do*(); the public operations
// (communicator.cc) and the waits of requests (request.cc) run in one.
#ifndef DISTTEST_SRC_COMM_COMMUNICATOR_RECORDED_H_
#define DISTTEST_SRC_COMM_COMMUNICATOR_RECORDED_H_

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "comm/communicator_sockets.h"
#include "comm/ledger.h"
#include "comm/peer_errors.h"
#include "disttest/comm/communicator.h"
#include "disttest/error.h"

namespace disttest {

// One operation in the ledger, from its call to its return (completed) or
// its exception (failed).
class Communicator::Recorded {
 public:
  // `entry`: an operation recorded before (a non-blocking one's, whose wait
  // this is, of number `seq` in its pair) that this one ends, instead of a
  // new one.
  Recorded(Communicator& comm, bool collective,
           const internal::Ledger::Call& call, const Where& where,
           std::uint64_t entry = kNoEntry,
           std::uint64_t seq = internal::Ledger::kNoSeq);
  static constexpr std::uint64_t kNoEntry = UINT64_MAX;

  ~Recorded();
  Recorded(const Recorded&) = delete;
  Recorded& operator=(const Recorded&) = delete;
  // Runs the operation; it completed when `op` returns. A collective that
  // timed out without saying for whom (Gloo's "Timed out waiting 2700ms for
  // recv operation to complete") says it, as the host arena does, from the
  // ranks' ledgers: a rank spawned on this host can read its peers'.
  // `blocks`: the call waits for its peers (all but posting a request), so
  // that while it is in it the ledger says it waits.
  template <typename Op>
  void Run(Op&& op, bool blocks = true) {
    struct Blocked {
      internal::Ledger* ledger;
      Blocked(internal::Ledger* l, std::uint64_t index,
              std::chrono::milliseconds timeout)
          : ledger(l) {
        if (ledger != nullptr) ledger->Block(index, timeout);
      }
      ~Blocked() {
        if (ledger != nullptr) ledger->Unblock();
      }
      Blocked(const Blocked&) = delete;
      Blocked& operator=(const Blocked&) = delete;
    } blocked(blocks ? ledger_ : nullptr, index_,
              // A call whose timeout the test shortened (set_timeout,
              // ScopedTimeout) may be one it waits out on purpose: it is
              // never taken for a deadlock (0: it gives up at once).
              shortened_ ? std::chrono::milliseconds::zero() : timeout_);
    const std::uint64_t cuts = internal::CommunicatorCuts();
    try {
      op();
    } catch (const CommError& e) {
      // A call that did not match its peers' fails the test where it was
      // made, even if the test catches the error (peer_errors.h); one that
      // disttest cut meanwhile (a launched rank's side thread, for calls
      // that differ) by the reason it was cut, which its backend's error (a
      // closed connection) does not say.
      internal::PlaceMismatch(e.what(),
                              internal::CommunicatorCuts() != cuts
                                  ? internal::CommunicatorCutReason()
                                  : std::string(),
                              file_, line_,
                              ledger_ != nullptr ? ledger_->slot() : -1);
      const std::string missing = Missing(e.what());
      if (missing.empty()) throw;
      throw CommError(
          fmt::format("{}; by the ranks' ledgers {}", e.what(), missing));
    }
    completed_ = true;
  }
  // The operation goes on after this call (isend, irecv): its entry stays
  // in flight until its wait ends it.
  void Pending() { pending_ = completed_; }
  // Its entry in the ledger, kNoEntry without one.
  std::uint64_t index() const { return ledger_ == nullptr ? kNoEntry : index_; }
  // Its number: among the communicator's collectives, or among the messages
  // of its pair and tag (a send or receive); kNoSeq without a ledger.
  std::uint64_t seq() const {
    return ledger_ == nullptr ? internal::Ledger::kNoSeq : seq_;
  }

 private:
  std::string Missing(std::string_view what) const;

  // The communicator whose collective this is, while this call holds it
  // for its thread (not in a call its own thread nests in one).
  Communicator* holds_ = nullptr;
  internal::Ledger* ledger_;
  std::uint64_t index_ = 0;
  std::uint32_t comm_ = 0;
  internal::Ledger::Call call_{};
  std::uint64_t seq_ = internal::Ledger::kNoSeq;
  bool collective_ = false;
  int rank_ = 0;  // This rank's in the communicator.
  int size_ = 0;
  std::chrono::milliseconds timeout_{0};
  bool shortened_ = false;  // The test set a shorter timeout than it had.
  bool completed_ = false;
  bool pending_ = false;
  const char* file_;  // Where it was called.
  unsigned line_;
};

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_COMMUNICATOR_RECORDED_H_
