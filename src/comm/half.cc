// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/half.h"

namespace disttest::internal {

std::uint16_t FloatToHalfBits(float f) {
  const std::uint32_t u = FloatBits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return static_cast<std::uint16_t>(sign | 0x7e00u);  // A quiet NaN.
  }
  // 65520 and above round to infinity.
  if (magnitude >= 0x477ff000u)
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal: 10 of the 23 fraction bits, rounded to nearest, ties to even
    // (a carry into the exponent is the right result).
    const std::uint32_t bits =
        (static_cast<std::uint32_t>(exponent + 15) << 10) |
        ((magnitude >> 13) & 0x3ffu);
    const std::uint32_t rest = magnitude & 0x1fffu;
    const std::uint32_t round =
        rest > 0x1000u || (rest == 0x1000u && (bits & 1u)) ? 1u : 0u;
    return static_cast<std::uint16_t>(sign | (bits + round));
  }
  if (exponent < -25) return sign;  // Below half the smallest subnormal.
  // Subnormal: the fraction with its implicit 1, shifted into place.
  const std::uint32_t fraction = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 14 + 13;  // 14 to 24
  const std::uint32_t bits = fraction >> shift;
  const std::uint32_t rest = fraction & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t round =
      rest > half || (rest == half && (bits & 1u)) ? 1u : 0u;
  return static_cast<std::uint16_t>(sign | (bits + round));
}

float HalfBitsToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t fraction = h & 0x3ffu;
  if (exponent == 0x1f) {
    return BitsFloat(sign | 0x7f800000u | (fraction << 13));
  }
  if (exponent != 0) {
    return BitsFloat(sign | ((exponent + 112) << 23) | (fraction << 13));
  }
  if (fraction == 0) return BitsFloat(sign);
  // Subnormal: normalise.
  int e = -1;
  do {
    ++e;
    fraction <<= 1;
  } while ((fraction & 0x400u) == 0);
  return BitsFloat(sign | (static_cast<std::uint32_t>(112 - e) << 23) |
                   ((fraction & 0x3ffu) << 13));
}

}  // namespace disttest::internal
