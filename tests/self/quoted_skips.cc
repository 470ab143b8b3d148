// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// For the harness drivers (verdicts_test, faults_test, launched_test): a
// driver's failure message quotes its child's output, and a child's gtest
// prints "[  SKIPPED ]" lines. ctest (gtest_discover_tests gives every test
// SKIP_REGULAR_EXPRESSION "\[  SKIPPED \]") would then count the failed
// driver test as skipped, and the run would pass. This wraps gtest's result
// printer so that failure messages print such lines as "[  skipped ]"; the
// driver's own skips still print as gtest prints them.
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace disttest::testing {
namespace {

class QuotedSkips : public ::testing::TestEventListener {
 public:
  explicit QuotedSkips(::testing::TestEventListener* printer)
      : printer_(printer) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    std::string message = result.message();
    const std::string token = "[  SKIPPED ]";
    for (std::size_t at = message.find(token); at != std::string::npos;
         at = message.find(token, at)) {
      message.replace(at, token.size(), "[  skipped ]");
    }
    printer_->OnTestPartResult(
        ::testing::TestPartResult(result.type(), result.file_name(),
                                  result.line_number(), message.c_str()));
  }

  void OnTestProgramStart(const ::testing::UnitTest& u) override {
    printer_->OnTestProgramStart(u);
  }
  void OnTestIterationStart(const ::testing::UnitTest& u, int i) override {
    printer_->OnTestIterationStart(u, i);
  }
  void OnEnvironmentsSetUpStart(const ::testing::UnitTest& u) override {
    printer_->OnEnvironmentsSetUpStart(u);
  }
  void OnEnvironmentsSetUpEnd(const ::testing::UnitTest& u) override {
    printer_->OnEnvironmentsSetUpEnd(u);
  }
  void OnTestSuiteStart(const ::testing::TestSuite& s) override {
    printer_->OnTestSuiteStart(s);
  }
  void OnTestStart(const ::testing::TestInfo& t) override {
    printer_->OnTestStart(t);
  }
  void OnTestDisabled(const ::testing::TestInfo& t) override {
    printer_->OnTestDisabled(t);
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    printer_->OnTestEnd(t);
  }
  void OnTestSuiteEnd(const ::testing::TestSuite& s) override {
    printer_->OnTestSuiteEnd(s);
  }
  void OnEnvironmentsTearDownStart(const ::testing::UnitTest& u) override {
    printer_->OnEnvironmentsTearDownStart(u);
  }
  void OnEnvironmentsTearDownEnd(const ::testing::UnitTest& u) override {
    printer_->OnEnvironmentsTearDownEnd(u);
  }
  void OnTestIterationEnd(const ::testing::UnitTest& u, int i) override {
    printer_->OnTestIterationEnd(u, i);
  }
  void OnTestProgramEnd(const ::testing::UnitTest& u) override {
    printer_->OnTestProgramEnd(u);
  }

 private:
  std::unique_ptr<::testing::TestEventListener> printer_;
};

// Before main(): the drivers use gtest_main.
const bool kInstalled = [] {
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  ::testing::TestEventListener* printer = listeners.default_result_printer();
  if (printer == nullptr) return false;
  listeners.Release(printer);
  listeners.Append(new QuotedSkips(printer));
  return true;
}();

}  // namespace
}  // namespace disttest::testing
