// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// MergeStacks() on stacks as eu-stack and gdb print them.
#include "harness/report/stack_tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace disttest::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// eu-stack -s -i: a rank whose one thread is in `leaf` (at `line`), called
// from the body; addresses differ from rank to rank.
std::string EuStack(int rank, const std::string& leaf, int line) {
  const std::string a = "0x0000" + std::to_string(5000 + rank);
  return "TID " + std::to_string(100 + rank) + ":\n#0  " + a + " " + leaf +
         "\n    /src/" + leaf + ".cc:" + std::to_string(line) + ":3\n#1  " + a +
         " RunDistributedBody\n    /src/model_test.cc:42:9\n#2  " + a +
         " main\n";
}

TEST(StackTreeTest, ParsesEuStackFramesWithTheirSourceLines) {
  EXPECT_THAT(ParseStacks(EuStack(3, "wait", 7)),
              ElementsAre(ElementsAre("wait at /src/wait.cc:7:3",
                                      "RunDistributedBody at "
                                      "/src/model_test.cc:42:9",
                                      "main")));
}

TEST(StackTreeTest, ParsesGdbFramesWithoutAddressesOrArgumentValues) {
  const std::string gdb =
      "Thread 2 (Thread 0x7f12 (LWP 99) \"loop\"):\n"
      "#0  0x00007f in epoll_wait (epfd=3, events=0x55) at epoll.c:30\n"
      "#1  0x00007f in start_thread (arg=0x7f) from /lib/libc.so.6\n"
      "#2  0x00007f in std::function<void ()>::operator()() const "
      "(this=0x7ffd) at std_function.h:591\n"
      "Thread 1 (Thread 0x7f11 (LWP 98) \"t\"):\n"
      "#0  f (x=1) at a.cc:5\n";
  EXPECT_THAT(
      ParseStacks(gdb),
      ElementsAre(ElementsAre("epoll_wait at epoll.c:30", "start_thread",
                              "std::function<void ()>::operator()() "
                              "const at std_function.h:591"),
                  ElementsAre("f at a.cc:5")));
}

TEST(StackTreeTest, HarnessFramesBelowTheTestsCodeStay) {
  const std::string stack =
      "TID 7:\n"
      "#0  0x1 disttest::internal::Wait()\n    /x/src/harness/a.cc:1:1\n"
      "#1  0x1 disttest::internal::Wait2()\n    /x/src/harness/a.cc:2:1\n"
      "#2  0x1 disttest::internal::Wait3()\n    /x/src/harness/a.cc:3:1\n"
      "#3  0x1 user_body\n    /src/model_test.cc:42:9\n"
      "#4  0x1 main\n";
  EXPECT_EQ(MergeStacks({{0, stack}, {1, stack}}),
            "ranks 0-1:\n"
            "  main\n"
            "  user_body at /src/model_test.cc:42:9\n"
            "  disttest::internal::Wait3() at /x/src/harness/a.cc:3:1\n"
            "  disttest::internal::Wait2() at /x/src/harness/a.cc:2:1\n"
            "  disttest::internal::Wait() at /x/src/harness/a.cc:1:1\n");
  // A line of spaces under a frame is no source line.
  EXPECT_THAT(ParseStacks("TID 1:\n#0  0x1 f\n      \n"),
              ElementsAre(ElementsAre("f")));
}

TEST(StackTreeTest, SomethingThatIsNoStackHasNoFrames) {
  EXPECT_TRUE(ParseStacks("/usr/bin/eu-stack: dwfl_linux_proc_report pid "
                          "4966: No such process\n")
                  .empty());
  EXPECT_EQ(MergeStacks({{0, "no stack"}, {1, ""}}), "");
}

TEST(StackTreeTest, SharedFramesOnceAndABranchWhereTheRanksPart) {
  std::vector<std::pair<int, std::string>> stacks;
  for (int r = 0; r < 128; ++r) {
    stacks.emplace_back(
        r, r == 5 ? EuStack(r, "pause", 29) : EuStack(r, "barrier", 450));
  }
  EXPECT_EQ(MergeStacks(stacks),
            "ranks 0-127:\n"
            "  main\n"
            "  RunDistributedBody at /src/model_test.cc:42:9\n"
            "  ranks 0-4, 6-127:\n"
            "    barrier at /src/barrier.cc:450:3\n"
            "  rank 5:\n"
            "    pause at /src/pause.cc:29:3\n");
}

TEST(StackTreeTest, StartUpGtestAndDisttestFramesAreOneLine) {
  const std::string stack =
      "TID 7:\n"
      "#0  0x1 user_wait\n    /src/model.cc:9:1\n"
      "#1  0x1 RunDistributedBody\n    /src/model_test.cc:42:9\n"
      "#2  0x1 disttest::internal::RunRank(int)\n"
      "    /x/src/harness/rank/run_rank.cc:40:26\n"
      "#3  0x1 _M_invoke\n    /usr/include/c++/12/bits/std_function.h:290:30\n"
      "#4  0x1 testing::Test::Run()\n"
      "#5  0x1 main\n"
      "#6  0x1 _start\n";
  EXPECT_EQ(MergeStacks({{0, stack}, {1, stack}}),
            "ranks 0-1:\n"
            "  ... (5 frames of start-up, gtest and disttest)\n"
            "  RunDistributedBody at /src/model_test.cc:42:9\n"
            "  user_wait at /src/model.cc:9:1\n");
  // Two in a row stay.
  const std::string short_stack =
      "TID 7:\n#0  0x1 f\n#1  0x1 testing::Test::Run()\n#2  0x1 main\n";
  EXPECT_EQ(MergeStacks({{0, short_stack}, {1, short_stack}}),
            "ranks 0-1:\n  main\n  testing::Test::Run()\n  f\n");
}

TEST(StackTreeTest, ALongTreeIsCutSayingSo) {
  std::vector<std::pair<int, std::string>> stacks;
  for (int r = 0; r < 50; ++r) {
    stacks.emplace_back(r, EuStack(r, "f" + std::to_string(r), r));
  }
  const std::string tree = MergeStacks(stacks, 10);
  EXPECT_THAT(tree, HasSubstr("ranks 0-49:\n  main\n"));
  EXPECT_THAT(tree, HasSubstr("... (93 more lines of the merged stacks cut; "
                              "each rank's whole stack is in the XML"));
}

}  // namespace
}  // namespace disttest::internal
