// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Collective assertions: every rank passes its own value, and the check is
// whether the ranks agree.
//
//   DIST_TEST_F(Training, SameChecksumEverywhere, 4) {
//     DIST_EXPECT_ALL_EQ(Checksum(model));   // each rank's checksum
//     DIST_ASSERT_ALL_TRUE(loss < 10.0);     // true on every rank
//     comm().barrier();                      // safe: see below
//   }
//
// When the ranks disagree, every rank fails with the same table, grouped by
// value ("43: rank 1" / "42: ranks 0, 2, 3"), so the odd rank out is obvious
// at any world size. Values are compared by their gtest-printed form
// (::testing::PrintToString), so any printable type works.
//
// These are collectives: every rank must reach the same assertion, in the
// same order, as for any comm() call. In return the fatal forms
// (DIST_ASSERT_*) return from the function on every rank together, so no
// rank is left waiting in a later collective for one that has left. They
// work in a DIST_TEST_F body, in SetUpRank()/TearDownRank() and in any
// function those call, on the test's comm(); the _ON forms
// (DIST_EXPECT_ALL_EQ_ON(comm, value), ...) on any communicator.
#ifndef DISTTEST_COLLECTIVE_ASSERTIONS_H_
#define DISTTEST_COLLECTIVE_ASSERTIONS_H_

#include <gtest/gtest.h>

#include <string>

#include "disttest/comm/communicator.h"

namespace disttest::internal {

// The outcome of a collective check: converts to true when the ranks agree.
class Agreement {
 public:
  explicit Agreement(std::string failure) : failure_(std::move(failure)) {}
  explicit operator bool() const { return failure_.empty(); }
  const std::string& message() const { return failure_; }

 private:
  std::string failure_;
};

// The communicator of the rank this thread runs; throws Error outside a rank
// or without one.
Communicator& CurrentCommunicator();

// Gathers every rank's `printed` value; a failure message with the table of
// values when they differ. `expression` is the asserted source text.
// `macro` names the assertion in the message.
// On `comm` (null: CurrentCommunicator()).
Agreement AllEqual(const char* macro, const char* expression,
                   const std::string& printed, Communicator* comm = nullptr);

// Gathers every rank's `value`; a failure naming the ranks where it is false.
Agreement AllTrue(const char* macro, const char* expression, bool value,
                  Communicator* comm = nullptr);

}  // namespace disttest::internal

#define DISTTEST_COLLECTIVE_(agreement, on_failure)                          \
  GTEST_AMBIGUOUS_ELSE_BLOCKER_                                              \
  if (const ::disttest::internal::Agreement disttest_agreement_ = agreement) \
    ;                                                                        \
  else                                                                       \
    on_failure(disttest_agreement_.message().c_str())

// One assertion: `macro` and `text` (the asserted source, stringized by the
// public macro) for the message, on `comm` (null: the test's comm()).
#define DISTTEST_ALL_EQ_(macro, text, value, comm, on_failure)               \
  DISTTEST_COLLECTIVE_(                                                      \
      ::disttest::internal::AllEqual(macro, text,                            \
                                     ::testing::PrintToString(value), comm), \
      on_failure)
#define DISTTEST_ALL_TRUE_(macro, text, condition, comm, on_failure)         \
  DISTTEST_COLLECTIVE_(::disttest::internal::AllTrue(                        \
                           macro, text, static_cast<bool>(condition), comm), \
                       on_failure)
#define DISTTEST_ON_(comm) &static_cast<::disttest::Communicator&>(comm)

// Every rank's `value` must be equal (as printed by gtest).
#define DIST_EXPECT_ALL_EQ(value)                                \
  DISTTEST_ALL_EQ_("DIST_EXPECT_ALL_EQ", #value, value, nullptr, \
                   GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_EQ(value)                                \
  DISTTEST_ALL_EQ_("DIST_ASSERT_ALL_EQ", #value, value, nullptr, \
                   GTEST_FATAL_FAILURE_)

// `condition` must hold on every rank.
#define DIST_EXPECT_ALL_TRUE(condition)                                      \
  DISTTEST_ALL_TRUE_("DIST_EXPECT_ALL_TRUE", #condition, condition, nullptr, \
                     GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_TRUE(condition)                                      \
  DISTTEST_ALL_TRUE_("DIST_ASSERT_ALL_TRUE", #condition, condition, nullptr, \
                     GTEST_FATAL_FAILURE_)

// The same on a communicator of the test's own (one it made with
// CreateCommunicator(), with or without options().init_distributed): every
// rank of `comm` must reach it.
//   DIST_EXPECT_ALL_EQ_ON(*mine, Checksum(model));
#define DIST_EXPECT_ALL_EQ_ON(comm, value)                                     \
  DISTTEST_ALL_EQ_("DIST_EXPECT_ALL_EQ_ON", #value, value, DISTTEST_ON_(comm), \
                   GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_EQ_ON(comm, value)                                     \
  DISTTEST_ALL_EQ_("DIST_ASSERT_ALL_EQ_ON", #value, value, DISTTEST_ON_(comm), \
                   GTEST_FATAL_FAILURE_)
#define DIST_EXPECT_ALL_TRUE_ON(comm, condition)                       \
  DISTTEST_ALL_TRUE_("DIST_EXPECT_ALL_TRUE_ON", #condition, condition, \
                     DISTTEST_ON_(comm), GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_TRUE_ON(comm, condition)                       \
  DISTTEST_ALL_TRUE_("DIST_ASSERT_ALL_TRUE_ON", #condition, condition, \
                     DISTTEST_ON_(comm), GTEST_FATAL_FAILURE_)

#endif  // DISTTEST_COLLECTIVE_ASSERTIONS_H_
