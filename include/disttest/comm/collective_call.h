// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CollectiveCall: what one rank asked a collective to do, the description
// that ranks compare before they use each other's data.
//
//   CollectiveCall call = CollectiveCall::AllReduce(8, DataType::kFloat32,
//                                                   ReduceOp::kSum);
//   call.str();  // "allreduce(8 x float32, sum)"
//
// Two ranks that disagree about a collective (another operation, count,
// element type, reduce op or root) run a broken program: MPI and NCCL leave
// what happens then undefined (wrong data, or a hang). The host arena
// (host_arena.h) compares every rank's call and fails all of them at once.
#ifndef DISTTEST_COMM_COLLECTIVE_CALL_H_
#define DISTTEST_COMM_COLLECTIVE_CALL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "disttest/comm/communicator.h"

namespace disttest {

struct CollectiveCall {
  enum class Op : std::uint8_t {
    kBarrier,
    kAllReduce,
    kBroadcast,
    kAllGather,
    kReduce,
    kReduceScatter,
    kGather,
    kScatter,
    kAllToAll,
    kAllGatherV,
    // Each rank's counts differ: the ranks compare the element type here,
    // and every rank's counts against its peers' (alltoallv's own check).
    kAllToAllV,
    kSplit,
    // Not an operation: the harness's meeting of the ranks after the body,
    // which a rank still in a collective must not take for a peer's call.
    kEndOfTest,
  };

  Op op = Op::kBarrier;
  DataType type = DataType::kUint8;  // Unused by a barrier.
  std::uint64_t count = 0;           // Elements per rank.
  ReduceOp reduce = ReduceOp::kSum;  // Allreduce only.
  std::int32_t root = 0;             // Broadcast, reduce, gather, scatter.
  // Allgatherv: the counts of every rank, hashed (CountsHash); count is
  // their sum; the first kCountsShown of them, and how many there are.
  std::uint64_t shape = 0;
  static constexpr std::size_t kCountsShown = 4;
  std::array<std::uint64_t, kCountsShown> first_counts{};
  std::uint64_t ranks = 0;

  static CollectiveCall Barrier() { return {}; }
  static CollectiveCall AllReduce(std::size_t count, DataType type,
                                  ReduceOp op) {
    return {Op::kAllReduce, type, count, op, 0};
  }
  static CollectiveCall Broadcast(std::size_t count, DataType type, int root) {
    return {Op::kBroadcast, type, count, ReduceOp::kSum, root};
  }
  static CollectiveCall AllGather(std::size_t count, DataType type) {
    return {Op::kAllGather, type, count, ReduceOp::kSum, 0};
  }
  static CollectiveCall Reduce(std::size_t count, DataType type, ReduceOp op,
                               int root) {
    return {Op::kReduce, type, count, op, root};
  }
  // `count` elements per rank's part.
  static CollectiveCall ReduceScatter(std::size_t count, DataType type,
                                      ReduceOp op) {
    return {Op::kReduceScatter, type, count, op, 0};
  }
  static CollectiveCall Gather(std::size_t count, DataType type, int root) {
    return {Op::kGather, type, count, ReduceOp::kSum, root};
  }
  static CollectiveCall Scatter(std::size_t count, DataType type, int root) {
    return {Op::kScatter, type, count, ReduceOp::kSum, root};
  }
  static CollectiveCall AllToAll(std::size_t count, DataType type) {
    return {Op::kAllToAll, type, count, ReduceOp::kSum, 0};
  }
  // `counts`: every rank's, in rank order.
  static CollectiveCall AllGatherV(DataType type, const std::size_t* counts,
                                   std::size_t n) {
    CollectiveCall call{Op::kAllGatherV, type, 0,
                        ReduceOp::kSum,  0,    CountsHash(counts, n)};
    for (std::size_t i = 0; i < n; ++i) {
      call.count += counts[i];
      if (i < kCountsShown) call.first_counts[i] = counts[i];
    }
    call.ranks = n;
    return call;
  }
  static CollectiveCall AllToAllV(DataType type) {
    return {Op::kAllToAllV, type, 0, ReduceOp::kSum, 0};
  }
  static CollectiveCall Split() {
    return {Op::kSplit, DataType::kUint8, 0, ReduceOp::kSum, 0};
  }
  static CollectiveCall EndOfTest() {
    return {Op::kEndOfTest, DataType::kUint8, 0, ReduceOp::kSum, 0};
  }
  // What allgatherv's ranks must agree on: every rank's count, in order.
  static std::uint64_t CountsHash(const std::size_t* counts, std::size_t n);

  // The constructors above leave the fields an operation does not use at
  // their defaults, so equal calls compare equal field by field.
  bool operator==(const CollectiveCall& other) const = default;

  // "barrier()", "allreduce(8 x float32, sum)", "broadcast(8 x float32,
  // root 0)", "allgather(8 x float32)", "reduce(8 x float32, sum, root 0)",
  // "allgatherv(24 x float32, counts {8, 8, 4, 4})", "no collective (its body
  // has returned)".
  std::string str() const;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_COLLECTIVE_CALL_H_
