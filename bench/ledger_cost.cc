// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the collective ledger (src/comm/ledger.h) costs an operation: the
// same operations of a communicator whose backend does nothing, in a process
// with a ledger installed and in one without, in alternating rounds (each
// round a fresh fork, so both start alike). Prints the median nanoseconds per
// operation of each and the difference, which is the ledger's cost: the
// record at the call, the clock read, the copy of the caller's file name,
// and the end. Then what the account of requests (src/comm/request_account.h)
// costs a non-blocking operation, as isend() and wait() do it, and the
// account at a test's end.
//
//   ./build/bench/ledger_cost                 # barrier, allreduce, send, isend
//   ./build/bench/ledger_cost --ops=1000000 --rounds=11
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench_args.h"
#include "comm/ledger.h"
#include "comm/request_account.h"
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
  std::unique_ptr<disttest::RequestState> DoISend(const void*, std::size_t,
                                                  disttest::DataType, int,
                                                  std::uint32_t) override {
    return std::make_unique<Done>();
  }

 private:
  class Done : public disttest::RequestState {
    void Wait(std::chrono::milliseconds) override {}
  };
};

enum class Op { kBarrier, kAllReduce, kSend, kISend };
const char* Name(Op op) {
  return op == Op::kBarrier     ? "barrier"
         : op == Op::kAllReduce ? "allreduce"
         : op == Op::kSend      ? "send"
                                : "isend+wait";
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
        case Op::kISend:
          comm.isend(v, 8, 0).wait();
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
  for (Op op : {Op::kBarrier, Op::kAllReduce, Op::kSend, Op::kISend}) {
    std::vector<double> off, on;
    for (int i = 0; i < rounds; ++i) {
      off.push_back(Round(op, false, ops));
      on.push_back(Round(op, true, ops));
    }
    const double a = bench::Median(off), b = bench::Median(on);
    std::printf("%-10s %9.1f ns %9.1f ns %9.1f ns\n", Name(op), a, b, b - a);
  }
  // The account's own work for one request, as isend() and its wait() do
  // it (its description made, entered, taken out), and the account at the
  // end of a test with none left in flight.
  using disttest::internal::RequestMade;
  using disttest::internal::RequestWaited;
  using disttest::internal::TakeRequestProblems;
  std::vector<double> per_request, at_end;
  for (int round = 0; round < rounds; ++round) {
    Clock::time_point start = Clock::now();
    for (int i = 0; i < ops; ++i) {
      RequestWaited(
          RequestMade(fmt::format("isend({} x {} to rank {}, tag {}) on {}", 8,
                                  "float32", 1, i, "world"),
                      __FILE__, __LINE__, /*rank_of_comm=*/-1));
    }
    per_request.push_back(
        std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
        ops);
    start = Clock::now();
    for (int i = 0; i < ops; ++i) TakeRequestProblems(/*ended=*/true);
    at_end.push_back(
        std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
        ops);
  }
  std::printf("request account: %.1f ns a request; at a test's end %.1f ns\n",
              bench::Median(per_request), bench::Median(at_end));
  return 0;
}
