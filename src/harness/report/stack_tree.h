// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The stacks of many ranks as one tree, as LLNL's STAT draws them: a frame
// that several ranks share is printed once, with the ranks, and the tree
// branches where they part.
//
//   std::string tree = MergeStacks({{0, stack0}, {1, stack1}, ...});
//   // ranks 0-127:
//   //   main
//   //   ...
//   //   RunDistributedBody at model_test.cc:42
//   //   ranks 0-126:
//   //     disttest::HostArena::Wait at host_arena.cc:450
//   //   rank 127:
//   //     __libc_pause at pause.c:29
//
// A stack is what DumpStacks() gives for one process (eu-stack's or gdb's
// "thread apply all bt"): every thread of the rank is a path from its
// outermost frame in; frames are compared by function and source line, not
// by address or arguments. Outermost call first.
#ifndef DISTTEST_SRC_HARNESS_REPORT_STACK_TREE_H_
#define DISTTEST_SRC_HARNESS_REPORT_STACK_TREE_H_

#include <string>
#include <utility>
#include <vector>

namespace disttest::internal {

// The frames of each thread in `stack`, innermost first, each as
// "function at file:line" (or "function"); empty if `stack` holds none
// (a line saying why there is no stack).
std::vector<std::vector<std::string>> ParseStacks(const std::string& stack);

// The merged tree of the (rank, stack) pairs whose stacks have frames, at
// most `max_lines` lines (then cut, saying so); "" if none has frames.
std::string MergeStacks(const std::vector<std::pair<int, std::string>>& stacks,
                        std::size_t max_lines = 400);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_STACK_TREE_H_
