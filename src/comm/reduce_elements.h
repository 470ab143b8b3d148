// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The element-wise reduction of every backend that reduces on the host (the
// host arena, Gloo, MPI): two elements give the same result on every path,
// whatever the element type or the count. (The order in which the ranks'
// elements meet is each algorithm's: floating-point sums of 3 ranks or
// more can round differently.)
//
//   ReduceElements(ReduceOp::kMax, out, a, b, n);  // out[i] = max(a[i], b[i])
//
// - Integers wrap, as two's complement does, in unsigned arithmetic (a
//   signed overflow would be undefined): uint8_t 200 + 200 is 144 on every
//   path. (Open MPI 4.1's own AVX sums of 8- and 16-bit integers saturate
//   from a count of 16 on: 255; ompi#8045.)
// - Min and max of floating point are IEEE 754-2019's minimum and maximum:
//   a NaN of any rank is the result, and -0 is below +0. (std::min keeps
//   whichever operand came first when one is a NaN: a NaN loss on rank 1
//   vanished under a max on rank 0's side; Gloo's and MPI's differ by
//   position in the buffer.)
// - A bool reduces as logic on its bytes: the caller passes uint8_t and
//   LogicalOp(op).
// `out` may be `a` (in place); an average is a sum, divided after.
#ifndef DISTTEST_SRC_COMM_REDUCE_ELEMENTS_H_
#define DISTTEST_SRC_COMM_REDUCE_ELEMENTS_H_

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "disttest/comm/data_type.h"

namespace disttest::internal {

template <typename T>
T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using Wide = std::make_unsigned_t<decltype(+a)>;  // int8_t: unsigned.
    return static_cast<T>(static_cast<Wide>(a) + static_cast<Wide>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T WrappingMultiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // uint16_t promotes to int, whose 65535 * 65535 would overflow.
    using Wide = std::make_unsigned_t<decltype(+a)>;
    return static_cast<T>(static_cast<Wide>(a) * static_cast<Wide>(b));
  } else {
    return a * b;
  }
}

// What a floating-point element compares as: float for the half types,
// converted once.
template <typename T>
auto Compared(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v;
  } else {
    return static_cast<float>(v);  // float16, bfloat16.
  }
}

// Selects, one after the other, that a compiler makes without branches: of
// two zeros the negative one, then the smaller, then a NaN of either side.
template <typename T>
T Minimum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return b < a ? b : a;
  } else {
    const auto x = Compared(a), y = Compared(b);
    T m = y < x ? b : a;
    m = y == x && std::signbit(y) ? b : m;
    m = y != y ? b : m;
    return x != x ? a : m;
  }
}

template <typename T>
T Maximum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return a < b ? b : a;
  } else {
    const auto x = Compared(a), y = Compared(b);
    T m = x < y ? b : a;
    m = y == x && std::signbit(x) ? b : m;
    m = y != y ? b : m;
    return x != x ? a : m;
  }
}

// out[i] = a[i] `op` b[i] for i < n.
template <typename T>
void ReduceElements(ReduceOp op, T* out, const T* a, const T* b,
                    std::size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (std::size_t i = 0; i < n; ++i) out[i] = WrappingAdd(a[i], b[i]);
      return;
    case ReduceOp::kProd:
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = WrappingMultiply(a[i], b[i]);
      }
      return;
    case ReduceOp::kMin:
      for (std::size_t i = 0; i < n; ++i) out[i] = Minimum(a[i], b[i]);
      return;
    case ReduceOp::kMax:
      for (std::size_t i = 0; i < n; ++i) out[i] = Maximum(a[i], b[i]);
      return;
  }
}

// ReduceElements for one op, in the shape of Gloo's reduce functions.
template <typename T, ReduceOp kOp>
void ReduceBuffers(void* out, const void* a, const void* b, std::size_t n) {
  ReduceElements(kOp, static_cast<T*>(out), static_cast<const T*>(a),
                 static_cast<const T*>(b), n);
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_REDUCE_ELEMENTS_H_
