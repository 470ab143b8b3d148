// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// float16 and bfloat16 against the compiler's own _Float16 (IEEE binary16,
// round to nearest even) and against bfloat16's definition (the top half of
// a float32, rounded to nearest even): every 16-bit pattern back and forth,
// and floats across the whole range.
#include "disttest/comm/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

namespace disttest {
namespace {

float FromBits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Every binary16 value converts to float exactly and back to itself; NaNs
// stay NaNs.
TEST(HalfTest, EveryFloat16RoundTrips) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float16 h = float16::FromBits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    const bool nan = (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(std::isnan(static_cast<float>(float16(f))));
      continue;
    }
    ASSERT_EQ(float16(f).bits, b) << std::hex << b << " is " << f;
#ifdef __FLT16_MAX__
    _Float16 ref;
    const std::uint16_t bits = static_cast<std::uint16_t>(b);
    std::memcpy(&ref, &bits, sizeof ref);
    ASSERT_EQ(f, static_cast<float>(ref)) << std::hex << b;
#endif
  }
}

// Floats of every exponent, near halfway points included, round as the
// compiler's _Float16 does (where it has one) and as the definition says.
TEST(HalfTest, FloatsRoundToNearestEven) {
  std::mt19937 random(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    std::uint32_t u = any(random);
    // Half of them with the 13 bits below binary16's fraction at or near a
    // tie.
    if (i % 2 == 1) u = (u & ~0x1fffu) | (0x1000u + (u & 3u) - 1u);
    const float f = FromBits(u);
    if (std::isnan(f)) continue;
    const float16 h(f);
#ifdef __FLT16_MAX__
    const _Float16 ref = static_cast<_Float16>(f);
    std::uint16_t want;
    std::memcpy(&want, &ref, sizeof want);
    ASSERT_EQ(h.bits, want) << std::hexfloat << f;
#endif
    // Within half a unit of the last place of f, or beyond the range.
    const float back = static_cast<float>(h);
    if (std::isinf(back)) {
      ASSERT_GE(std::fabs(f), 65520.0f) << std::hexfloat << f;
    } else if (std::fabs(f) >= 6.103515625e-05f) {
      ASSERT_LE(std::fabs(back - f), std::ldexp(std::fabs(f), -11))
          << std::hexfloat << f;
    } else {
      ASSERT_LE(std::fabs(back - f), std::ldexp(1.0f, -25))
          << std::hexfloat << f;
    }
    // bfloat16: the top 16 bits, rounded to nearest even.
    const bfloat16 b(f);
    const std::uint32_t rest = u & 0xffffu;
    std::uint32_t want_b = u >> 16;
    if (rest > 0x8000u || (rest == 0x8000u && (want_b & 1u))) ++want_b;
    ASSERT_EQ(b.bits, static_cast<std::uint16_t>(want_b)) << std::hexfloat << f;
  }
}

TEST(HalfTest, SpecialValues) {
  EXPECT_EQ(float16(0.0f).bits, 0x0000);
  EXPECT_EQ(float16(-0.0f).bits, 0x8000);
  EXPECT_EQ(float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float16(65520.0f).bits, 0x7c00);  // Rounds up to infinity.
  EXPECT_EQ(float16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(float16(5.9604644775390625e-08f).bits, 0x0001);   // 2^-24
  EXPECT_EQ(float16(2.98023223876953125e-08f).bits, 0x0000);  // A tie: even.
  EXPECT_TRUE(std::isnan(
      static_cast<float>(float16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(
      static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(float16(1.5f) + float16(2.25f)), 3.75f);
  EXPECT_EQ(static_cast<float>(bfloat16(3.0f) * bfloat16(0.5f)), 1.5f);
  EXPECT_TRUE(bfloat16(1.0f) < bfloat16(2.0f));
  std::ostringstream out;
  out << float16(0.5f);
  EXPECT_EQ(out.str(), "0.5");
}

}  // namespace
}  // namespace disttest
