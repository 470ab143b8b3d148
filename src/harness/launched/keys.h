// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Every key a launched job keeps in its store (rank 0 serves it). Who sets
// and reads each: the table in docs/how-it-works.md#a-launched-job.
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_KEYS_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_KEYS_H_

#include <fmt/format.h>

#include <string>

namespace disttest::internal::launched {

inline constexpr char kAbortKey[] = "launched/abort";
inline constexpr char kEndKey[] = "launched/end";

inline constexpr char kPlanKey[] = "launched/plan";
inline constexpr char kPlansKey[] = "launched/plans";
inline std::string PlanSeenKey(int rank) {
  return fmt::format("launched/plan/{}", rank);
}

// Counted up by each process that joins as rank `rank`: a second one is a
// launcher's mistake (two with one RANK) or another job on the same
// address and port. It sets kDuplicateKey (why), which fails rank 0's tests.
inline std::string ClaimKey(int rank) {
  return fmt::format("launched/claims/{}", rank);
}
inline constexpr char kDuplicateKey[] = "launched/duplicate";

// Set by each rank once it has connected to the store (its hostname).
inline std::string JoinedKey(int rank) {
  return fmt::format("launched/joined/{}", rank);
}
inline std::string AliveKey(int rank) {
  return fmt::format("launched/alive/{}", rank);
}
inline std::string StuckKey(int rank) {
  return fmt::format("launched/stuck/{}", rank);
}
inline std::string ByeKey(int rank) {
  return fmt::format("launched/bye/{}", rank);
}
inline std::string AtKey(int seq, int rank) {
  return fmt::format("launched/{}/at/{}", seq, rank);
}
inline std::string StartKey(int seq) {
  return fmt::format("launched/{}/start", seq);
}
inline std::string FixtureDirsKey(int seq) {
  return fmt::format("launched/{}/fixture-dirs", seq);
}
// Whether rank `rank` sees the fixture directories of test `seq`.
inline std::string FixtureSeenKey(int seq, int rank) {
  return fmt::format("launched/{}/fixture-seen/{}", seq, rank);
}
// What rank 0 found in every rank's FixtureSeenKey: "ok", or the failure.
inline std::string FixturesSeenKey(int seq) {
  return fmt::format("launched/{}/fixtures-seen", seq);
}
// What a rank other than 0 recorded in test `seq` outside its body (the
// fixture's constructor and SetUp(), TearDown() and its destructor): the
// count, and each as an encoded RankMessage; rank 0 reports them.
inline std::string OutsideKey(int seq, int rank) {
  return fmt::format("launched/{}/outside/{}", seq, rank);
}
inline std::string OutsideMessageKey(int seq, int rank, int i) {
  return fmt::format("launched/{}/outside/{}/{}", seq, rank, i);
}
// Rank 0's word on those: "failed" when it failed the test for them, else
// "ok"; the others mirror it.
inline std::string OutsideVerdictKey(int seq) {
  return fmt::format("launched/{}/outside-verdict", seq);
}
inline std::string CommunicatorPrefix(int generation, const std::string& key) {
  return fmt::format("launched/comm/{}/{}", generation, key);
}

// The keys of one step (a fixture, or the test itself) of test `seq`.
class StepKeys {
 public:
  StepKeys(int seq, int step)
      : base_(fmt::format("launched/{}/{}/", seq, step)) {}
  std::string Message(int rank, std::size_t i) const {
    return fmt::format("{}msg/{}/{}", base_, rank, i);
  }
  std::string Done(int rank) const {
    return fmt::format("{}done/{}", base_, rank);
  }
  std::string Verdict() const { return base_ + "verdict"; }
  // The first rank that failed or skipped the step and left it: "failed 3"
  // (set once its add of EndedBadlyCount() made 1); its peers still in the
  // step cut their collectives after the failure grace (watchdog.h).
  std::string EndedBadly() const { return base_ + "ended_badly"; }
  std::string EndedBadlyCount() const { return base_ + "ended_badly/n"; }
  // The first rank that passed the step and left it: "<rank> <size>", the
  // step's size, then "<key>:<n>" for each of its communicators of that
  // size (its LedgerKey, in hex, and the collectives it began there): its
  // peers still in a later collective of one cut it (watchdog.h).
  std::string LeftPassing() const { return base_ + "left_passing"; }
  std::string LeftPassingCount() const { return base_ + "left_passing/n"; }
  // Set by a rank whose world communicator failed in the step (an operation
  // threw: it may be out of step with its peers' or hold a message no rank
  // took), before its done: after the verdict, every rank makes new
  // communicators for the next test, even where the test passed.
  std::string CommFailed() const { return base_ + "comm_failed"; }
  // A rank's collective ledger as its watchdog found it at the timeout.
  std::string Ledger(int rank) const {
    return fmt::format("{}ledger/{}", base_, rank);
  }
  std::string StorePrefix() const { return base_ + "store"; }
  // Where the ranks that wait in a collective put their calls, to be
  // compared (watchdog.h).
  std::string CallsPrefix() const { return base_ + "calls/"; }

 private:
  std::string base_;
};

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_KEYS_H_
