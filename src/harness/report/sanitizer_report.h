// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Sanitizer reports in ranks: a report that AddressSanitizer, LeakSanitizer,
// UBSan, ThreadSanitizer or MemorySanitizer writes in a rank's output is that
// rank's failure, with the report's first lines in the verdict.
//
//   SanitizerScanner scanner;            // the parent's, one per rank
//   scanner.Line("==41==ERROR: AddressSanitizer: heap-use-after-free ...");
//   ...
//   if (auto report = scanner.Take()) failure = report->str();
//
//   // In a rank, after a test's body (a no-op without LeakSanitizer):
//   if (auto leaks = LeaksOfThisTest()) report(failure, *leaks);
#ifndef DISTTEST_SRC_HARNESS_REPORT_SANITIZER_REPORT_H_
#define DISTTEST_SRC_HARNESS_REPORT_SANITIZER_REPORT_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace disttest::internal {

struct SanitizerReport {
  // The kept lines of a report, and the report's last ones after them.
  static constexpr std::size_t kMaxLines = 12;

  // "LeakSanitizer: detected memory leaks", "runtime error: signed integer
  // overflow: ..." (UBSan's), without the "==pid==ERROR: " before it.
  std::string headline;
  // The first frame with a source line ("leaky_test.cc:42"), or where
  // UBSan says; empty when the report has none.
  std::string where;
  std::vector<std::string> lines;  // The first report's first lines.
  bool cut = false;                // It had more lines than these.
  std::string summary;             // Its "SUMMARY: ..." line, if it came.
  int count = 0;                   // Reports seen (the first is kept).
  // When the parent saw the first report's first line; empty in a rank.
  std::optional<std::chrono::steady_clock::time_point> at;

  // The failure's text: the headline and where, then the kept lines.
  std::string str() const;
};

// Reads a rank's output a line at a time and keeps its first sanitizer
// report. Lines without a report cost a few comparisons.
class SanitizerScanner {
 public:
  // One whole line, with or without its newline.
  void Line(std::string_view line);
  // What was found since the last Take(), and forgets it.
  std::optional<SanitizerReport> Take();

 private:
  std::optional<SanitizerReport> report_;
  bool in_first_ = false;     // Still reading the first report's lines.
  bool frames_only_ = false;  // It is UBSan's: only its stack is kept.
  bool shadow_ = false;       // Past the part worth keeping.
  int frames_ = 0;            // Frames in a row so far.
};

// Under LeakSanitizer (ASan's or the standalone one): the leaks that exist
// now, as a failure's text, and the whole report written to the rank's
// stderr. Empty without LeakSanitizer, with detect_leaks=0, without leaks,
// and when the leaks are the same as at the last call (an earlier test's,
// already reported, in a process that runs several).
std::optional<std::string> LeaksOfThisTest();
// Whether LeaksOfThisTest() checks anything here: LeakSanitizer is linked
// in and not told detect_leaks=0.
bool LeakSanitizerRuns();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_REPORT_SANITIZER_REPORT_H_
