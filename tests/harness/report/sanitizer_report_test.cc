// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/sanitizer_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::optional<SanitizerReport> Scan(std::string_view text) {
  SanitizerScanner scanner;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) nl = text.size() - 1;
    scanner.Line(text.substr(0, nl + 1));
    text.remove_prefix(nl + 1);
  }
  return scanner.Take();
}

constexpr std::string_view kLeak =
    "\n"
    "=================================================================\n"
    "==4242==ERROR: LeakSanitizer: detected memory leaks\n"
    "\n"
    "Direct leak of 40 byte(s) in 1 object(s) allocated from:\n"
    "    #0 0x7f1c in operator new[](unsigned long) "
    "(/lib/x86_64-linux-gnu/libasan.so.8+0xdb2)\n"
    "    #1 0x55a1 in LeakForty /src/tests/leaky_test.cc:21\n"
    "    #2 0x55b2 in Leaky_Body::TestBody() /src/tests/leaky_test.cc:48\n"
    "    #3 0x55c3 in disttest::Run() /src/glue/rank_program.cc:157\n"
    "    #4 0x55d4 in disttest::RunRank() /src/harness/rank/run_rank.cc:50\n"
    "    #5 0x55e5 in main /src/main.cc:3\n"
    "\n"
    "SUMMARY: AddressSanitizer: 40 byte(s) leaked in 1 allocation(s).\n";

TEST(SanitizerScannerTest, ALeakReportIsKeptWithWhereItWasAllocated) {
  std::optional<SanitizerReport> r = Scan(kLeak);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headline, "LeakSanitizer: detected memory leaks");
  EXPECT_EQ(r->where, "leaky_test.cc:21");
  EXPECT_EQ(r->summary,
            "SUMMARY: AddressSanitizer: 40 byte(s) leaked in 1 allocation(s).");
  EXPECT_EQ(r->count, 1);
  ASSERT_GE(r->lines.size(), 2u);
  EXPECT_EQ(r->lines[0],
            "Direct leak of 40 byte(s) in 1 object(s) allocated from:");
  // Four frames of a stack, then "...".
  EXPECT_EQ(r->lines.size(), 5u);
  EXPECT_TRUE(r->cut);
  const std::string text = r->str();
  EXPECT_THAT(text, ::testing::StartsWith(
                        "LeakSanitizer: detected memory leaks, at "
                        "leaky_test.cc:21\n  Direct leak of 40 byte(s)"));
  EXPECT_THAT(text, HasSubstr("\n  ...\n  SUMMARY: AddressSanitizer: 40 byte"));
  EXPECT_THAT(text, HasSubstr("(the whole report is in the rank's output)"));
  EXPECT_THAT(text, Not(HasSubstr("main.cc")));
}

TEST(SanitizerScannerTest, AnAsanReportDropsRegistersAndShadowBytes) {
  std::optional<SanitizerReport> r = Scan(
      "==77==ERROR: AddressSanitizer: heap-use-after-free on address "
      "0x602000000014 at pc 0x55 bp 0x7ff sp 0x7fe\n"
      "READ of size 4 at 0x602000000014 thread T0\n"
      "    #0 0x55 in ReadAfterFree() /src/uaf_test.cc:30:10\n"
      "    #1 0x56 in Body() /src/uaf_test.cc:55:5\n"
      "\n"
      "0x602000000014 is located 4 bytes inside of 16-byte region\n"
      "freed by thread T0 here:\n"
      "    #0 0x7f in operator delete[](void*) (/lib/libasan.so.8+0xdc)\n"
      "\n"
      "SUMMARY: AddressSanitizer: heap-use-after-free /src/uaf_test.cc:30:10 "
      "in ReadAfterFree()\n"
      "Shadow bytes around the buggy address:\n"
      "  0x0c047fff8000: fa fa 00 00 fa fa fd fd fa fa fa fa fa fa fa fa\n"
      "==77==ABORTING\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headline,
            "AddressSanitizer: heap-use-after-free on address 0x602000000014");
  EXPECT_EQ(r->where, "uaf_test.cc:30");
  EXPECT_THAT(r->str(), Not(HasSubstr("Shadow")));
  EXPECT_THAT(r->str(), Not(HasSubstr("ABORTING")));
  EXPECT_THAT(r->str(), HasSubstr("freed by thread T0 here:"));
}

TEST(SanitizerScannerTest, UbsanSaysWhereOnItsFirstLine) {
  std::optional<SanitizerReport> r = Scan(
      "/src/dir/overflow_test.cc:33:12: runtime error: signed integer "
      "overflow: 2147483647 + 1 cannot be represented in type 'int'\n"
      "the next line is the test's own output: x = 1\n"
      "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior "
      "/src/dir/overflow_test.cc:33:12\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headline,
            "runtime error: signed integer overflow: 2147483647 + 1 cannot be "
            "represented in type 'int'");
  EXPECT_EQ(r->where, "overflow_test.cc:33:12");
  EXPECT_TRUE(r->lines.empty());  // Not the test's own output.
  EXPECT_THAT(r->summary, HasSubstr("UndefinedBehaviorSanitizer"));
}

TEST(SanitizerScannerTest, ThreadSanitizerWithoutItsPidAndLaterReportsCounted) {
  std::optional<SanitizerReport> r = Scan(
      "==================\n"
      "WARNING: ThreadSanitizer: data race (pid=912)\n"
      "  Write of size 4 at 0x7b04 by thread T1:\n"
      "    #0 Increment() /src/race_test.cc:12 (race_test+0x12)\n"
      "SUMMARY: ThreadSanitizer: data race /src/race_test.cc:12 in Increment\n"
      "==================\n"
      "WARNING: ThreadSanitizer: data race (pid=912)\n"
      "  Read of size 4 at 0x7b08 by thread T2:\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headline, "ThreadSanitizer: data race");
  EXPECT_EQ(r->count, 2);
  EXPECT_THAT(r->str(), HasSubstr("; 1 more report after it)"));
  EXPECT_THAT(r->str(), Not(HasSubstr("0x7b08")));
}

TEST(SanitizerScannerTest, OrdinaryOutputIsNoReport) {
  EXPECT_FALSE(
      Scan("[ RUN      ] Suite.Test\n"
           "ERROR: the config file is missing: a.json\n"
           "WARNING: MySanitizer is not a word: it has a space\n"
           "==12==WARNING: AddressSanitizer failed to allocate 0x10\n"
           "a runtime error: that starts the line\n"
           "caught: runtime error: the config is bad\n"
           "main.cc:12: caught: runtime error: the config is bad\n"
           "AddressSanitizer:DEADLYSIGNAL\n"
           "\n"));
}

TEST(SanitizerScannerTest, UbsanWithoutLineInformation) {
  for (const char* where : {"<unknown>", "(overflow_test+0x1f2c)", "a.cc:3"}) {
    SCOPED_TRACE(where);
    std::optional<SanitizerReport> r = Scan(
        std::string(where) + ": runtime error: load of misaligned address\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->headline, "runtime error: load of misaligned address");
  }
}

TEST(SanitizerScannerTest, ALeakCheckThatDiesIsAReport) {
  // What LeakSanitizer says when it cannot stop the threads (a debugger
  // holds one): no colon on the line.
  std::optional<SanitizerReport> r = Scan(
      "==2211==LeakSanitizer has encountered a fatal error.\n"
      "==2211==HINT: For debugging, try setting environment variable "
      "LSAN_OPTIONS=verbosity=1:log_threads=1\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headline, "LeakSanitizer has encountered a fatal error.");
}

TEST(SanitizerScannerTest, TakeForgetsWhatItReturned) {
  SanitizerScanner scanner;
  scanner.Line("==1==ERROR: LeakSanitizer: detected memory leaks\n");
  EXPECT_TRUE(scanner.Take());
  EXPECT_FALSE(scanner.Take());
  scanner.Line("    #1 0x55a1 in LeakForty /src/tests/leaky_test.cc:21\n");
  EXPECT_FALSE(scanner.Take());
}

}  // namespace
}  // namespace disttest::internal
