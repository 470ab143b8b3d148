// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the collective ledger (src/comm/ledger.h) costs an operation: the
// same operations of a communicator whose backend does nothing, in a process
// with a ledger installed and in one without, in alternating rounds (each
// round a fresh fork, so both start alike). Prints the median nanoseconds per
// operation of each and the difference, which is the ledger's cost: the
// record at the call, the clock read, the copy of the caller's file name,
// and the end.
//
//   ./build/bench/ledger_cost                 # barrier, allreduce, send
//   ./build/bench/ledger_cost --ops=1000000 --rounds=11
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_args.h"
#include "comm/ledger.h"
#include "disttest/comm/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

class NoOpCommunicator : public disttest::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend_name() const override { return "no-op"; }

 protected:
  void DoBarrier() override {}
  void DoAllReduce(void*, std::size_t, disttest::DataType,
                   disttest::ReduceOp) override {}
  void DoBroadcast(void*, std::size_t, disttest::DataType, int) override {}
  void DoAllGather(const void*, void*, std::size_t,
                   disttest::DataType) override {}
  void DoSend(const void*, std::size_t, disttest::DataType, int,
              std::uint32_t) override {}
  void DoRecv(void*, std::size_t, disttest::DataType, int,
              std::uint32_t) override {}
};

enum class Op { kBarrier, kAllReduce, kSend };
const char* Name(Op op) {
  return op == Op::kBarrier     ? "barrier"
         : op == Op::kAllReduce ? "allreduce"
                                : "send";
}

// Nanoseconds per operation, measured in a fresh child.
double Round(Op op, bool ledger, int ops) {
  auto* result =
      static_cast<double*>(mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  const pid_t pid = fork();
  if (pid == 0) {
    if (ledger) {
      disttest::internal::Ledger::Install(
          disttest::internal::LedgerMemory::Create(1), 0);
      disttest::internal::Ledger::Current()->BeginTest();
      disttest::internal::EnterPhase(disttest::internal::RankPhase::kBody);
    }
    NoOpCommunicator comm;
    float v[8] = {};
    comm.barrier();  // Registers the communicator.
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < ops; ++i) {
      switch (op) {
        case Op::kBarrier:
          comm.barrier();
          break;
        case Op::kAllReduce:
          comm.allreduce(v, 8, disttest::ReduceOp::kSum);
          break;
        case Op::kSend:
          comm.send(v, 8, 0);
          break;
      }
    }
    *result =
        std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
        ops;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double ns = *result;
  munmap(result, sizeof(double));
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = bench::Flag(argc, argv, "ops", 2000000);
  const int rounds = bench::Flag(argc, argv, "rounds", 9);
  std::printf("%-10s %12s %12s %12s\n", "operation", "no ledger", "ledger",
              "ledger cost");
  for (Op op : {Op::kBarrier, Op::kAllReduce, Op::kSend}) {
    std::vector<double> off, on;
    for (int i = 0; i < rounds; ++i) {
      off.push_back(Round(op, false, ops));
      on.push_back(Round(op, true, ops));
    }
    const double a = bench::Median(off), b = bench::Median(on);
    std::printf("%-10s %9.1f ns %9.1f ns %9.1f ns\n", Name(op), a, b, b - a);
  }
  return 0;
}
