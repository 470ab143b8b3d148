// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The child binary of sanitizer_test, built with a sanitizer (ASan with
// UBSan halting, or LeakSanitizer alone): one rank leaks, reads freed memory
// or overflows an int, and the others do nothing wrong. sanitizer_test runs
// it and checks that the verdict names that rank with the report. Nothing
// here is run on its own by ctest.
#include <disttest/disttest.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

void* volatile g_sink = nullptr;

__attribute__((noinline)) void LeakForty() {
  g_sink = new char[40];  // marker-leak
  g_sink = nullptr;
}

// The compiler sees the bug too; this file makes it on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wuse-after-free"
__attribute__((noinline)) int ReadAfterFree() {
  int* p = new int[4]{1, 2, 3, 4};
  delete[] p;
  return static_cast<volatile int*>(p)[1];  // marker-use-after-free
}
#pragma GCC diagnostic pop

__attribute__((noinline)) int AddOne(int x) {
  return x + 1;  // marker-overflow
}

class Sanitized : public disttest::DistributedTest {
 protected:
  Sanitized() {
    const char* mode = std::getenv("SANITIZER_LAUNCH");
    if (mode != nullptr && std::string(mode) == "exec") {
      options().launch = disttest::LaunchMode::kExec;
    }
    if (std::getenv("SANITIZER_POOLED") != nullptr) {
      options().reuse_workers = true;
    }
  }
};

DIST_TEST_F(Sanitized, LeaksInRank2, 4) {
  if (rank() == 2) LeakForty();
}

DIST_TEST_F(Sanitized, ReadsFreedMemoryInRank1, 4) {
  if (rank() == 1) {
    EXPECT_NE(ReadAfterFree(), -1);
  }
}

DIST_TEST_F(Sanitized, OverflowsInRank3, 4) {
  volatile int big = INT_MAX;
  if (rank() == 3) {
    EXPECT_NE(AddOne(big), 0);
  }
}

// Memory that a rank keeps to the end of its body, or frees, is no leak.
DIST_TEST_F(Sanitized, KeepsAndFreesMemory, 4) {
  static std::vector<int>* kept = new std::vector<int>(rank() + 1);
  auto freed = std::make_unique<int[]>(1000);
  freed[0] = rank();
  EXPECT_EQ(kept->size(), static_cast<std::size_t>(rank() + 1));
  EXPECT_EQ(freed[0], rank());
}

// A rank that failed is not checked for leaks: its failure is the news.
DIST_TEST_F(Sanitized, LeaksAndFailsInRank2, 4) {
  if (rank() == 2) {
    LeakForty();
    ADD_FAILURE() << "rank 2 fails on purpose";
  }
}

// Rank 0 fails while ranks 1-3, whose bodies passed, are in their leak
// checks, which take a while here (a heap of many blocks to scan). The
// grace after a failure is 1 ms, but a rank in its leak check is not
// stuck: ranks 1-3 pass, and the test fails for rank 0 alone.
class SanitizedShortGrace : public Sanitized {
 protected:
  SanitizedShortGrace() {
    options().failure_grace = std::chrono::milliseconds(1);
  }
};

DIST_TEST_F(SanitizedShortGrace, FailsInRank0WhileTheOthersCheckLeaks, 4) {
  if (rank() != 0) {
    static auto* kept = new std::vector<std::unique_ptr<long>>;
    for (long i = 0; i < 1'000'000; ++i) {
      kept->push_back(std::make_unique<long>(i));
    }
    store().set("body-done-" + std::to_string(rank()), {'1'});
    return;
  }
  store().wait({"body-done-1", "body-done-2", "body-done-3"});
  ADD_FAILURE() << "rank 0 fails on purpose";
}

}  // namespace
