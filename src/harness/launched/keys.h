// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Every key a launched job keeps in its store, in one table. Rank 0 serves
// the store; each process has two connections to it (the main thread's and
// the side thread's, job.h).
//
//   key                                    set by     read by
//   external/alive/<r>                     r's side   everyone's liveness
//   external/abort                         anyone     everyone: the run is
//                                                     over, and why
//   external/stuck/<r>                     r          rank 0: r's body hangs
//   external/bye/<r>, external/end         r; 0       0; everyone (Goodbye)
//   external/plan                          rank 0     everyone: its run
//   external/plan/<r>                      r          rank 0: "ok" or how
//                                                     r's run differs
//   external/plans                         rank 0     everyone ("ok" or
//                                                     the differences)
//   external/<seq>/at/<r>                  r          rank 0 (the meeting)
//   external/<seq>/start                   rank 0     everyone ("ok" or why
//                                                     not)
//   external/<seq>/fixture-dirs            rank 0     everyone
//   external/<seq>/<step>/msg/<r>/<i>      r          rank 0: r's results
//   external/<seq>/<step>/done/<r>         r          rank 0 ("<count>
//                                                     <verdict>")
//   external/<seq>/<step>/verdict          rank 0     everyone
//   external/<seq>/<step>/store/...        the step   the test's own keys
//   external/comm/<generation>/<key>/...   Gloo       Gloo (its rendezvous)
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_KEYS_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_KEYS_H_

#include <fmt/format.h>

#include <string>

namespace disttest::internal::launched {

inline constexpr char kAbortKey[] = "external/abort";
inline constexpr char kEndKey[] = "external/end";

inline constexpr char kPlanKey[] = "external/plan";
inline constexpr char kPlansKey[] = "external/plans";
inline std::string PlanSeenKey(int rank) {
  return fmt::format("external/plan/{}", rank);
}

// Set by each rank once it has connected to the store (its hostname).
inline std::string JoinedKey(int rank) {
  return fmt::format("external/joined/{}", rank);
}
inline std::string AliveKey(int rank) {
  return fmt::format("external/alive/{}", rank);
}
inline std::string StuckKey(int rank) {
  return fmt::format("external/stuck/{}", rank);
}
inline std::string ByeKey(int rank) {
  return fmt::format("external/bye/{}", rank);
}
inline std::string AtKey(int seq, int rank) {
  return fmt::format("external/{}/at/{}", seq, rank);
}
inline std::string StartKey(int seq) {
  return fmt::format("external/{}/start", seq);
}
inline std::string FixtureDirsKey(int seq) {
  return fmt::format("external/{}/fixture-dirs", seq);
}
// Whether rank `rank` sees the fixture directories of test `seq`.
inline std::string FixtureSeenKey(int seq, int rank) {
  return fmt::format("external/{}/fixture-seen/{}", seq, rank);
}
// What rank 0 found in every rank's FixtureSeenKey: "ok", or the failure.
inline std::string FixturesSeenKey(int seq) {
  return fmt::format("external/{}/fixtures-seen", seq);
}
inline std::string CommunicatorPrefix(int generation, const std::string& key) {
  return fmt::format("external/comm/{}/{}", generation, key);
}

// The keys of one step (a fixture, or the test itself) of test `seq`.
class StepKeys {
 public:
  StepKeys(int seq, int step)
      : base_(fmt::format("external/{}/{}/", seq, step)) {}
  std::string Message(int rank, std::size_t i) const {
    return fmt::format("{}msg/{}/{}", base_, rank, i);
  }
  std::string Done(int rank) const {
    return fmt::format("{}done/{}", base_, rank);
  }
  std::string Verdict() const { return base_ + "verdict"; }
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
