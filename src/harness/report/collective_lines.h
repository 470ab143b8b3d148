// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The lines of the collective reports (collective_report.h), one per rank
// before grouping, and their grouping: ranks whose lines read the same but
// for the times are one line, "ranks 0-2 (3 ranks) are in ..., for
// 29.8-30.0 s". What the incomplete collectives' report and the mismatched
// calls' share.
//
//   std::vector<std::string> out = Grouped({0, 1}, {line0, line1});
#ifndef DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_LINES_H_
#define DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_LINES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace disttest::internal {

// A line about one rank before grouping: its text with a kTime mark for
// each duration, which may differ between the ranks of one group, and
// {is}-style marks for the words that agree with the subject.
inline constexpr char kTime = '\x01';

struct Line {
  std::string pattern;
  std::vector<std::int64_t> times;  // One per kTime, in order.
};

// The lines of `lines` (one per rank of `ranks`) grouped by pattern, in
// order of their first rank.
std::vector<std::string> Grouped(const std::vector<int>& ranks,
                                 const std::vector<Line>& lines);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_COLLECTIVE_LINES_H_
