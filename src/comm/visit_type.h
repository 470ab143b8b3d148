// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// VisitType: from a DataType to its C++ type, for code that is written once
// per element type (reductions, Gloo's typed options).
//
//   VisitType(type, [&]<typename T>(T*) { Reduce(static_cast<T*>(out), ...);
//   });
#ifndef DISTTEST_SRC_COMM_VISIT_TYPE_H_
#define DISTTEST_SRC_COMM_VISIT_TYPE_H_

#include <cstdint>

#include "disttest/comm/communicator.h"

namespace disttest::internal {

// Calls f(static_cast<T*>(nullptr)) with T the C++ type of `type`.
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
  }
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_VISIT_TYPE_H_
