// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/communicator.h"

#include <fmt/format.h>

#include "disttest/comm/collective_call.h"

namespace disttest {

std::size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

const char* Name(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return "int8";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
  }
  return "unknown";
}

const char* Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

const char* Name(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
    case Backend::kAuto:
      return "auto";
  }
  return "unknown";
}

std::string CollectiveCall::str() const {
  switch (op) {
    case Op::kBarrier:
      return "barrier()";
    case Op::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case Op::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         root);
    case Op::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case Op::kEndOfTest:
      return "no collective (its body has returned)";
  }
  return fmt::format("unknown collective {}", static_cast<int>(op));
}

}  // namespace disttest
