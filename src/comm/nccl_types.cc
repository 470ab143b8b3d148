// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest's types and reduce ops in NCCL's terms (a bool is uint8 reduced
// as logic; int16 and uint16 have none), and how messages name an
// operation on them.
#include <fmt/format.h>

#include <string>

#include "comm/nccl_communicator_impl.h"
#include "comm/visit_type.h"

namespace disttest {

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kBool:
      return ncclUint8;  // Reduced by NcclOp(kBool, op) as logic.
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBfloat16:
      return ncclBfloat16;
    case DataType::kInt16:
    case DataType::kUint16:
      break;  // NCCL has none: CheckType() says so.
  }
  return ncclInt8;
}

ncclRedOp_t NcclOp(DataType type, ReduceOp op) {
  return NcclOp(type == DataType::kBool ? internal::LogicalOp(op) : op);
}

void NcclCommunicator::Impl::CheckType(const std::string& what, DataType type) {
  if (type == DataType::kInt16 || type == DataType::kUint16) {
    Fail(what, fmt::format("NCCL has no {} type (use int32 or the gloo "
                           "backend)",
                           Name(type)));
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

std::string DescribeNcclOp(const char* op, std::size_t count, DataType type) {
  return fmt::format("{} of {} {}", op, count, Name(type));
}

}  // namespace disttest
