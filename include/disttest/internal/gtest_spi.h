// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// gtest-spi.h's EXPECT_FATAL_FAILURE_ON_ALL_THREADS and
// EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS, as gtest has them, except where
// the ranks are threads of one process (LaunchMode::kThreads): there they
// would take every rank's failures (another rank's failure met this rank's
// expectation, and the test passed) and miss the rank's own (its thread
// reports to a reporter of its own). There the macro fails the rank's
// test, saying so, and runs nothing (the body goes on, as after an
// EXPECT_*). The per-thread forms
// (EXPECT_FATAL_FAILURE, EXPECT_NONFATAL_FAILURE) are gtest's own.
//
// disttest.h includes it, after gtest-spi.h: a test file that includes
// gtest-spi.h again (before or after) keeps these.
#ifndef DISTTEST_INTERNAL_GTEST_SPI_H_
#define DISTTEST_INTERNAL_GTEST_SPI_H_

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

namespace disttest::internal {

// Whether `macro`, at file:line, may intercept every thread of the process:
// false where the ranks are threads, and then the calling rank's test has
// failed, saying why.
bool MayInterceptAllThreads(const char* macro, const char* file, int line);

}  // namespace disttest::internal

#undef EXPECT_FATAL_FAILURE_ON_ALL_THREADS
#define EXPECT_FATAL_FAILURE_ON_ALL_THREADS(statement, substr)                \
  do {                                                                        \
    if (!::disttest::internal::MayInterceptAllThreads(                        \
            "EXPECT_FATAL_FAILURE_ON_ALL_THREADS", __FILE__, __LINE__)) {     \
      break;                                                                  \
    }                                                                         \
    class GTestExpectFatalFailureHelper {                                     \
     public:                                                                  \
      static void Execute() { statement; }                                    \
    };                                                                        \
    ::testing::TestPartResultArray gtest_failures;                            \
    ::testing::internal::SingleFailureChecker gtest_checker(                  \
        &gtest_failures, ::testing::TestPartResult::kFatalFailure, (substr)); \
    {                                                                         \
      ::testing::ScopedFakeTestPartResultReporter gtest_reporter(             \
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, \
          &gtest_failures);                                                   \
      GTestExpectFatalFailureHelper::Execute();                               \
    }                                                                         \
  } while (::testing::internal::AlwaysFalse())

#undef EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS
#define EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(statement, substr)             \
  do {                                                                        \
    if (!::disttest::internal::MayInterceptAllThreads(                        \
            "EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS", __FILE__, __LINE__)) {  \
      break;                                                                  \
    }                                                                         \
    ::testing::TestPartResultArray gtest_failures;                            \
    ::testing::internal::SingleFailureChecker gtest_checker(                  \
        &gtest_failures, ::testing::TestPartResult::kNonFatalFailure,         \
        (substr));                                                            \
    {                                                                         \
      ::testing::ScopedFakeTestPartResultReporter gtest_reporter(             \
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, \
          &gtest_failures);                                                   \
      if (::testing::internal::AlwaysTrue()) {                                \
        statement;                                                            \
      }                                                                       \
    }                                                                         \
  } while (::testing::internal::AlwaysFalse())

#endif  // DISTTEST_INTERNAL_GTEST_SPI_H_
