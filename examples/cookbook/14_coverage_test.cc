// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Recipe 14: coverage of code that runs only in ranks.
//
// Build with coverage and run as usual; every rank writes its counts before
// it leaves (fork, exec and reused ranks alike), so gcovr and llvm-cov see
// what ran only in ranks:
//
//   cmake -S . -B build-cov -DCMAKE_CXX_FLAGS=--coverage
//     -DCMAKE_EXE_LINKER_FLAGS="--coverage -Wl,-u,__gcov_reset"   (one line)
//   cmake --build build-cov --target cookbook_test
//   ./build-cov/examples/cookbook_test --gtest_filter='Coverage.*'
//   gcovr --root . --filter examples/cookbook/14_coverage_test.cc build-cov
//
// (-Wl,-u,__gcov_reset: a forked rank zeroes the counts it inherited, so
// the parent's code is not counted again by every rank.) For clang,
// -fprofile-instr-generate with LLVM_PROFILE_FILE=cov-%p.profraw, then
// llvm-profdata merge and llvm-cov report. scripts/run-coverage.sh does the
// gcc steps and checks the count of ShardChecksum below (CI runs it).
#include <disttest/disttest.h>

#include <cstdint>
#include <vector>

namespace {

// Called only in rank bodies: the parent process never runs it, so only the
// ranks' counts can show it ran.
std::uint64_t ShardChecksum(int rank, int world) {
  std::uint64_t sum = 0;
  for (int i = rank; i < 1000; i += world) sum += static_cast<std::uint64_t>(i);
  return sum;
}

class Coverage : public disttest::DistributedTest {};

DIST_TEST_F(Coverage, ShardsAddUpToTheWhole, 1, 2, 3) {
  std::uint64_t sum = ShardChecksum(rank(), world_size());
  comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, 999u * 1000u / 2u);
}

class CoverageExec : public disttest::DistributedTest {
 protected:
  CoverageExec() { options().launch = disttest::LaunchMode::kExec; }
};

DIST_TEST_F(CoverageExec, ShardsAddUpToTheWhole, 2) {
  std::uint64_t sum = ShardChecksum(rank(), world_size());
  comm().allreduce(&sum, 1, disttest::ReduceOp::kSum);
  EXPECT_EQ(sum, 999u * 1000u / 2u);
}

}  // namespace
