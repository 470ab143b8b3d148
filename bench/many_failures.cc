// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What 100,000 failing EXPECTs cost in one rank of a distributed test,
// beside the same EXPECTs in a plain TEST(): every failure travels from the
// rank to the parent through its result queue and is re-raised there.
//
//   ./build/bench/many_failures                 # 100000 failures, 5 runs
//   ./build/bench/many_failures --failures=20000 --runs=3
//
// It runs itself as a child for each case (the cases fail, by design), its
// output to /dev/null, and prints the median wall time of each and their
// ratios to the plain test.
#include <disttest/disttest.h>
#include <disttest/env/names.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_args.h"
#include "env/internal_names.h"

namespace {

int Failures() {
  const char* n = std::getenv("MANY_FAILURES_COUNT");
  return n != nullptr ? std::atoi(n) : 100000;
}

TEST(ManyFailuresPlain, Fails) {
  const int n = Failures();
  for (int i = 0; i < n; ++i) EXPECT_EQ(i, -1) << "failure " << i;
}

class ManyFailures : public disttest::DistributedTest {
 protected:
  ManyFailures() { options().init_distributed = false; }
};

DIST_TEST_F(ManyFailures, Fails, 1) {
  const int n = Failures();
  for (int i = 0; i < n; ++i) EXPECT_EQ(i, -1) << "failure " << i;
}

// The same on rank 1 of 2, beside a rank that passes.
DIST_TEST_F(ManyFailures, FailsOnRank1, 2) {
  if (rank() != 1) return;
  const int n = Failures();
  for (int i = 0; i < n; ++i) EXPECT_EQ(i, -1) << "failure " << i;
}

class ManyFailuresExec : public ManyFailures {
 protected:
  ManyFailuresExec() { options().launch = disttest::LaunchMode::kExec; }
};

DIST_TEST_F(ManyFailuresExec, Fails, 1) {
  const int n = Failures();
  for (int i = 0; i < n; ++i) EXPECT_EQ(i, -1) << "failure " << i;
}

// Runs this binary on `filter`, its output to /dev/null; seconds.
double RunCase(const std::string& filter, int failures) {
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    setenv("MANY_FAILURES_COUNT", std::to_string(failures).c_str(), 1);
    std::string flag = "--gtest_filter=" + filter;
    execl("/proc/self/exe", "many_failures", flag.c_str(), "--child",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  // The child of RunCase, or a re-executed rank: run the tests.
  bool child = std::getenv(disttest::env::kInternalChildTest) != nullptr;
  for (int i = 1; i < argc; ++i) child |= std::strcmp(argv[i], "--child") == 0;
  if (child) {
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
  }
  const int failures = bench::Flag(argc, argv, "failures", 100000);
  const int runs = bench::Flag(argc, argv, "runs", 5);
  std::vector<double> plain, forked, exec, second;
  for (int i = 0; i < runs; ++i) {
    plain.push_back(RunCase("ManyFailuresPlain.Fails", failures));
    forked.push_back(RunCase("ManyFailures.Fails/1ranks", failures));
    exec.push_back(RunCase("ManyFailuresExec.Fails/1ranks", failures));
    second.push_back(RunCase("ManyFailures.FailsOnRank1/2ranks", failures));
  }
  const double p = bench::Median(plain);
  const double f = bench::Median(forked);
  const double e = bench::Median(exec);
  const double s = bench::Median(second);
  std::printf(
      "%d failing EXPECTs, median of %d runs: plain TEST %.2f s; one rank of "
      "DIST_TEST_F, forked %.2f s (%.1fx), re-executed %.2f s (%.1fx); rank 1 "
      "of 2, forked %.2f s (%.1fx)\n",
      failures, runs, p, f, f / p, e, e / p, s, s / p);
  return 0;
}
