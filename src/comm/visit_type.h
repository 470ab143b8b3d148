// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// VisitType: from a DataType to its C++ type, for code that is written once
// per element type (reductions, Gloo's typed options).
//
//   VisitType(type, [&]<typename T>(T*) { Reduce(static_cast<T*>(out), ...);
//   });
#ifndef DISTTEST_SRC_COMM_VISIT_TYPE_H_
#define DISTTEST_SRC_COMM_VISIT_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "disttest/comm/communicator.h"
#include "disttest/comm/half.h"

namespace disttest::internal {

// Calls f(static_cast<T*>(nullptr)) with T the C++ type of `type`
// (disttest::float16 and bfloat16 for the half types).
//
// A bool reduces as logic (LogicalOp): sum and max are "or", prod and min
// "and".
template <typename F>
void VisitType(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8:
      return f(static_cast<std::int8_t*>(nullptr));
    case DataType::kUint8:
      return f(static_cast<std::uint8_t*>(nullptr));
    case DataType::kInt32:
      return f(static_cast<std::int32_t*>(nullptr));
    case DataType::kInt64:
      return f(static_cast<std::int64_t*>(nullptr));
    case DataType::kFloat32:
      return f(static_cast<float*>(nullptr));
    case DataType::kFloat64:
      return f(static_cast<double*>(nullptr));
    case DataType::kInt16:
      return f(static_cast<std::int16_t*>(nullptr));
    case DataType::kUint16:
      return f(static_cast<std::uint16_t*>(nullptr));
    case DataType::kUint32:
      return f(static_cast<std::uint32_t*>(nullptr));
    case DataType::kUint64:
      return f(static_cast<std::uint64_t*>(nullptr));
    case DataType::kBool:
      return f(static_cast<bool*>(nullptr));
    case DataType::kFloat16:
      return f(static_cast<float16*>(nullptr));
    case DataType::kBfloat16:
      return f(static_cast<bfloat16*>(nullptr));
  }
}

// The op that reduces bools as `op` says they reduce, on their bytes (0 or
// 1): "or" is max, "and" is min.
inline ReduceOp LogicalOp(ReduceOp op) {
  // (kAvg never reaches a bool: Communicator refuses it.)
  return op == ReduceOp::kSum || op == ReduceOp::kMax ? ReduceOp::kMax
                                                      : ReduceOp::kMin;
}

// Divides each of `count` elements by `n` (kAvg after a sum), in the
// element type's own arithmetic.
inline void DivideBy(void* data, std::size_t count, DataType type, int n) {
  VisitType(type, [&]<typename T>(T*) {
    T* v = static_cast<T*>(data);
    if constexpr (std::is_floating_point_v<T>) {
      for (std::size_t i = 0; i < count; ++i) v[i] /= static_cast<T>(n);
    } else if constexpr (std::is_same_v<T, float16> ||
                         std::is_same_v<T, bfloat16>) {
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = T(static_cast<float>(v[i]) / static_cast<float>(n));
      }
    }
  });
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_VISIT_TYPE_H_
