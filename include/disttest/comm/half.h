// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// float16 and bfloat16: the 16-bit floating-point element types of the
// collectives (DataType::kFloat16, DataType::kBfloat16), as storage with
// conversions to and from float.
//
//   std::vector<disttest::bfloat16> v(8, disttest::bfloat16(1.5f));
//   comm.allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
//   float x = static_cast<float>(v[0]);
//
// A float converts to the nearest value (ties to even); NaN stays NaN and
// values beyond the range become infinities. Arithmetic is done in float
// and rounded back, one operation at a time, as the CPU backends reduce.
// The layouts are IEEE 754 binary16 and bfloat16 (the top half of a
// float32), as CUDA's __half and __nv_bfloat16 and NCCL's ncclFloat16 and
// ncclBfloat16: a device buffer of either can be passed as is.
#ifndef DISTTEST_COMM_HALF_H_
#define DISTTEST_COMM_HALF_H_

#include <cstdint>
#include <cstring>
#include <ostream>

namespace disttest {

namespace internal {
inline std::uint32_t FloatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint16_t FloatToHalfBits(float f);
float HalfBitsToFloat(std::uint16_t h);
}  // namespace internal

// Shared by both: comparison and arithmetic through float.
template <typename Half>
struct HalfOps {
  friend Half operator+(Half a, Half b) {
    return Half(static_cast<float>(a) + static_cast<float>(b));
  }
  friend Half operator*(Half a, Half b) {
    return Half(static_cast<float>(a) * static_cast<float>(b));
  }
  friend Half operator/(Half a, Half b) {
    return Half(static_cast<float>(a) / static_cast<float>(b));
  }
  friend bool operator<(Half a, Half b) {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  friend bool operator>(Half a, Half b) { return b < a; }
  friend bool operator==(Half a, Half b) {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  friend std::ostream& operator<<(std::ostream& os, Half h) {
    return os << static_cast<float>(h);
  }
};

// IEEE 754 binary16: 1 sign, 5 exponent and 10 fraction bits.
struct float16 : HalfOps<float16> {
  std::uint16_t bits = 0;
  float16() = default;
  explicit float16(float f) : bits(internal::FloatToHalfBits(f)) {}
  explicit operator float() const { return internal::HalfBitsToFloat(bits); }
  static float16 FromBits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the top 16 bits of a float32 (8 exponent, 7 fraction bits).
struct bfloat16 : HalfOps<bfloat16> {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    const std::uint32_t u = internal::FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40);  // A quiet NaN.
    } else {
      // Round to nearest, ties to even.
      bits = static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  explicit operator float() const {
    return internal::BitsFloat(static_cast<std::uint32_t>(bits) << 16);
  }
  static bfloat16 FromBits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2);

}  // namespace disttest

#endif  // DISTTEST_COMM_HALF_H_
