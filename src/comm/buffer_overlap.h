// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Whether an operation's input overlaps its output otherwise than in its
// backend's in-place form. NCCL reads the input while it writes the output,
// so there an input that overlaps the output (an allgather's `in == out` on
// rank 1) is read from a copy first: every backend reads the input as it
// was at the call, however the buffers overlap, as the CPU ones do.
#ifndef DISTTEST_SRC_COMM_BUFFER_OVERLAP_H_
#define DISTTEST_SRC_COMM_BUFFER_OVERLAP_H_

#include <cstddef>
#include <cstdint>

namespace disttest::internal {

// Whether [in, in + in_bytes) and [out, out + out_bytes) share a byte and
// `in` does not start at `in_place` (where the in-place form reads it: the
// output itself, or this rank's part of it; 0 where there is none).
inline bool OverlapsOtherThanInPlace(const void* in, std::size_t in_bytes,
                                     const void* out, std::size_t out_bytes,
                                     std::uintptr_t in_place) {
  const auto i = reinterpret_cast<std::uintptr_t>(in);
  const auto o = reinterpret_cast<std::uintptr_t>(out);
  if (in_bytes == 0 || out_bytes == 0) return false;
  if (i + in_bytes <= o || o + out_bytes <= i) return false;
  return in_place == 0 || i != in_place;
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_BUFFER_OVERLAP_H_
