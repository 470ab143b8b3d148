// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DataType and ReduceOp: the element types of the collectives and how they
// reduce, with their names and sizes; internal::DataTypeOf<T>() gives the
// DataType of a C++ element type for the typed operations of Communicator.
//
//   disttest::SizeOf(disttest::DataType::kFloat32);  // 4
//   disttest::Name(disttest::ReduceOp::kMax);        // "max"
#ifndef DISTTEST_COMM_DATA_TYPE_H_
#define DISTTEST_COMM_DATA_TYPE_H_

#include <cstddef>
#include <type_traits>

#include "disttest/comm/half.h"

// CUDA's 16-bit types (cuda_fp16.h, cuda_bf16.h declare them so too): a
// buffer of either is float16 or bfloat16 (DataTypeOf), wherever their
// headers are included.
struct __half;
struct __nv_bfloat16;

namespace disttest {

// kAvg is the sum divided by the number of ranks (NCCL's ncclAvg), for the
// floating-point types only: another type throws CommError saying so.
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };
inline constexpr ReduceOp kLastReduceOp = ReduceOp::kAvg;

// Element types. A bool reduces as logic: sum and max are "or", prod and min
// "and" (as PyTorch's do).
enum class DataType {
  kInt8,
  kUint8,
  kInt32,
  kInt64,
  kFloat32,
  kFloat64,
  kInt16,
  kUint16,
  kUint32,
  kUint64,
  kBool,
  kFloat16,   // disttest::float16 (half.h), IEEE binary16.
  kBfloat16,  // disttest::bfloat16 (half.h).
};
inline constexpr DataType kLastDataType = DataType::kBfloat16;

// Bytes per element of `type`.
std::size_t SizeOf(DataType type);
// "float32", "int64", ...
const char* Name(DataType type);
// Whether `type` is float16, bfloat16, float32 or float64.
bool IsFloatingPoint(DataType type);
// "sum", "prod", "min", "max", "avg"
const char* Name(ReduceOp op);

namespace internal {
// Named in the compiler's error for an element type without a DataType:
// "ElementTypeHasNoDataType<std::complex<float>>".
template <typename T>
struct ElementTypeHasNoDataType : std::false_type {};

template <typename T>
constexpr DataType DataTypeOf() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    return DataType::kBool;
  } else if constexpr (std::is_same_v<U, float16> || std::is_same_v<U, ::__half>
#ifdef __FLT16_MANT_DIG__
                       || std::is_same_v<U, _Float16>
#endif
  ) {
    return DataType::kFloat16;
  } else if constexpr (std::is_same_v<U, bfloat16> ||
                       std::is_same_v<U, ::__nv_bfloat16>
#ifdef __BFLT16_MANT_DIG__
                       || std::is_same_v<U, __bf16>
#endif
  ) {
    return DataType::kBfloat16;
  } else if constexpr (std::is_same_v<U, float>) {
    return DataType::kFloat32;
  } else if constexpr (std::is_same_v<U, double>) {
    return DataType::kFloat64;
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> &&
                       sizeof(U) == 1) {
    return DataType::kInt8;  // signed char, and char where it is signed.
  } else if constexpr (std::is_integral_v<U> && sizeof(U) == 1) {
    return DataType::kUint8;
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> &&
                       sizeof(U) == 2) {
    return DataType::kInt16;
  } else if constexpr (std::is_integral_v<U> && sizeof(U) == 2) {
    return DataType::kUint16;
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> &&
                       sizeof(U) == 4) {
    return DataType::kInt32;
  } else if constexpr (std::is_integral_v<U> && sizeof(U) == 4) {
    return DataType::kUint32;
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> &&
                       sizeof(U) == 8) {
    return DataType::kInt64;  // long and long long alike.
  } else if constexpr (std::is_integral_v<U> && sizeof(U) == 8) {
    return DataType::kUint64;
  } else {
    static_assert(ElementTypeHasNoDataType<U>::value,
                  "disttest: this element type has no DataType (the types "
                  "are bool, the integers of 1, 2, 4 and 8 bytes, float, "
                  "double, disttest::float16 and disttest::bfloat16, "
                  "_Float16, __bf16, CUDA's __half and __nv_bfloat16); pass "
                  "a DataType and a byte buffer, or convert");
    return DataType::kUint8;
  }
}
}  // namespace internal

}  // namespace disttest

#endif  // DISTTEST_COMM_DATA_TYPE_H_
