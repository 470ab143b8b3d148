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
    // Not an operation: the harness's meeting of the ranks after the body,
    // which a rank still in a collective must not take for a peer's call.
    kEndOfTest,
  };

  Op op = Op::kBarrier;
  DataType type = DataType::kUint8;  // Unused by a barrier.
  std::uint64_t count = 0;           // Elements per rank.
  ReduceOp reduce = ReduceOp::kSum;  // Allreduce only.
  std::int32_t root = 0;             // Broadcast only.

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
  static CollectiveCall EndOfTest() {
    return {Op::kEndOfTest, DataType::kUint8, 0, ReduceOp::kSum, 0};
  }

  // The constructors above leave the fields an operation does not use at
  // their defaults, so equal calls compare equal field by field.
  bool operator==(const CollectiveCall& other) const = default;

  // "barrier()", "allreduce(8 x float32, sum)", "broadcast(8 x float32,
  // root 0)", "allgather(8 x float32)", "no collective (its body has
  // returned)".
  std::string str() const;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_COLLECTIVE_CALL_H_
