// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What checking that every rank made the same call costs a collective in the
// same-host arena (host_arena.h): forked ranks run the same collectives with
// the check on and off, in alternating rounds, and rank 0 times them.
// Prints the median nanoseconds per operation of each and the difference.
//
//   ./build/bench/collective_check_cost             # 1, 2, 4 and 8 ranks
//   ./build/bench/collective_check_cost --ops=50000 --rounds=11
//
// One rank never waits, so its row is the check alone. On a machine with
// fewer cores than ranks every barrier waits for the scheduler, so the time
// there is mostly hand-offs, and the difference is within their noise.
#include <sys/mman.h>
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
#include "comm/host_arena.h"

namespace disttest::internal {
struct HostArenaBenchmark {
  static void SetChecks(HostArena& arena, bool on) { arena.check_calls_ = on; }
};
}  // namespace disttest::internal

namespace {

using Clock = std::chrono::steady_clock;

enum class Op { kBarrier, kAllReduce8 };

// Forks `world` ranks that each run `ops` collectives; returns rank 0's
// nanoseconds per operation.
double Round(int world, Op op, bool checks, int ops) {
  auto arena = disttest::HostArena::Create(world);
  disttest::internal::HostArenaBenchmark::SetChecks(*arena, checks);
  auto* result =
      static_cast<double*>(mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      const std::chrono::milliseconds timeout(30000);
      float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      arena->Barrier(r, timeout);  // Everyone is up.
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < ops; ++i) {
        if (op == Op::kBarrier) {
          arena->Barrier(r, timeout);
        } else {
          arena->AllReduce(r, v, 8, disttest::DataType::kFloat32,
                           disttest::ReduceOp::kMax, timeout);
        }
      }
      if (r == 0) {
        *result = std::chrono::duration<double, std::nano>(Clock::now() - start)
                      .count() /
                  ops;
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  const double ns = *result;
  munmap(result, sizeof(double));
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = bench::Flag(argc, argv, "ops", 20000);
  const int rounds = bench::Flag(argc, argv, "rounds", 7);
  std::printf(
      "collectives in the host arena, ns per operation (median of %d rounds "
      "of %d)\n",
      rounds, ops);
  std::printf("| operation | ranks | checked | unchecked | the check |\n");
  std::printf("|---|---|---|---|---|\n");
  for (Op op : {Op::kBarrier, Op::kAllReduce8}) {
    for (int world : {1, 2, 4, 8}) {
      std::vector<double> on, off;
      for (int i = 0; i < rounds; ++i) {
        // Alternating, so that drift in the machine's load hits both.
        on.push_back(Round(world, op, true, ops));
        off.push_back(Round(world, op, false, ops));
      }
      const double a = bench::Median(on);
      const double b = bench::Median(off);
      std::printf("| %s | %d | %.0f | %.0f | %+.0f |\n",
                  op == Op::kBarrier ? "barrier" : "allreduce(8 x float32)",
                  world, a, b, a - b);
      std::fflush(stdout);
    }
  }
  return 0;
}
