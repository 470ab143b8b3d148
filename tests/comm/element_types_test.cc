// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The element types users have beside disttest's own: the compiler's
// _Float16 (and __bf16 where it has one) and CUDA's __half and
// __nv_bfloat16 (where the CUDA Toolkit's headers are found) are float16 and
// bfloat16 to every collective, on every backend.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/internal/compared_value.h"
#include "thread_ranks.h"

#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define DISTTEST_TEST_CUDA_TYPES 1
#endif

namespace disttest {
namespace {

using internal::DataTypeOf;

#ifdef __FLT16_MANT_DIG__
static_assert(DataTypeOf<_Float16>() == DataType::kFloat16);
static_assert(DataTypeOf<const _Float16>() == DataType::kFloat16);
#endif
#ifdef __BFLT16_MANT_DIG__
static_assert(DataTypeOf<__bf16>() == DataType::kBfloat16);
#endif
#ifdef DISTTEST_TEST_CUDA_TYPES
static_assert(DataTypeOf<__half>() == DataType::kFloat16);
static_assert(DataTypeOf<__nv_bfloat16>() == DataType::kBfloat16);
static_assert(sizeof(__half) == sizeof(float16));
static_assert(sizeof(__nv_bfloat16) == sizeof(bfloat16));
#endif

#ifdef __FLT16_MANT_DIG__
TEST(ElementTypesTest, Float16OfTheCompilerSumsAsFloat16) {
  testing::RunRanks(2, [](Communicator& comm) {
    std::vector<_Float16> v(5, static_cast<_Float16>(comm.rank() + 1.5f));
    comm.allreduce(v.data(), v.size(), ReduceOp::kSum);
    for (_Float16 x : v) EXPECT_EQ(static_cast<float>(x), 4.0f);
  });
}

// The collective assertions take the compiler's own as they take float16
// (trial 13: DIST_EXPECT_ALL_EQ of a _Float16 did not compile), and show
// it as a number.
static_assert(internal::PlainValue<_Float16>);
TEST(ElementTypesTest, Float16OfTheCompilerShowsAsANumberInAssertions) {
  EXPECT_EQ(internal::ShowElement(static_cast<_Float16>(1.0009765625f)),
            "1.001");
  EXPECT_EQ(internal::ShowElement(static_cast<_Float16>(NAN)), "nan");
}
#endif
#ifdef __BFLT16_MANT_DIG__
static_assert(internal::PlainValue<__bf16>);
#endif

#ifdef DISTTEST_TEST_CUDA_TYPES
TEST(ElementTypesTest, CudaHalvesGoAsFloat16AndBfloat16) {
  testing::RunRanks(2, [](Communicator& comm) {
    std::vector<__half> h(3, __float2half(comm.rank() + 0.25f));
    comm.allreduce(h.data(), h.size(), ReduceOp::kMax);
    for (__half x : h) EXPECT_EQ(__half2float(x), 1.25f);
    std::vector<__nv_bfloat16> b(3, __float2bfloat16(comm.rank() + 2.0f));
    comm.allreduce(b.data(), b.size(), ReduceOp::kSum);
    for (__nv_bfloat16 x : b) EXPECT_EQ(__bfloat162float(x), 5.0f);
  });
}

// The collective assertions take them as they take float16 and bfloat16
// (no ComparableAcrossRanks needed), and show them as numbers: 1 and the
// next half after it differ in print, a NaN is "nan".
static_assert(internal::PlainValue<__half>);
static_assert(internal::PlainValue<__nv_bfloat16>);
TEST(ElementTypesTest, CudaHalvesShowAsNumbersInAssertions) {
  EXPECT_EQ(internal::ShowElement(__float2half(1.0f)), "1");
  EXPECT_EQ(internal::ShowElement(__float2half(1.0009765625f)), "1.001");
  EXPECT_EQ(internal::ShowElement(__float2half(NAN)), "nan");
  EXPECT_EQ(internal::ShowElement(__float2bfloat16(1.0078125f)), "1.008");
}
#endif

}  // namespace
}  // namespace disttest
