// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: DecodeRankMessage, which parses what a rank process (a
// test body that may have scribbled over memory) put on its result queue.
// Arbitrary bytes must be decoded or rejected without reading out of bounds.
// A decoded message must survive EncodeRankMessage with room to spare: the
// same bytes again, except that the encoder keeps at most 1024 bytes of the
// file name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/rank_message.h"

namespace {

using disttest::internal::DecodeRankMessage;
using disttest::internal::EncodeRankMessage;
using disttest::internal::RankMessage;

// What EncodeRankMessage keeps of a file name.
constexpr std::size_t kMaxFileBytes = 1024;
// Room enough to re-encode: a result channel's slot.
constexpr std::size_t kSlotBytes = 2 * 1024;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "result_message_fuzzer: %s\n", what);
  std::abort();
}

bool SameMessage(const RankMessage& a, const RankMessage& b) {
  return a.kind == b.kind && a.line == b.line && a.file == b.file &&
         a.message == b.message;
}

void CheckRoundTrip(const char* data, std::size_t size, const RankMessage& m) {
  const std::vector<char> again = EncodeRankMessage(m, size + kSlotBytes);
  if (m.file.size() <= kMaxFileBytes) {
    if (again != std::vector<char>(data, data + size)) {
      Fail("re-encoding a decoded message changed its bytes");
    }
    return;
  }
  RankMessage expected = m;
  expected.file.resize(kMaxFileBytes);
  RankMessage decoded;
  std::string error;
  if (!DecodeRankMessage(again.data(), again.size(), &decoded, &error) ||
      !SameMessage(decoded, expected)) {
    Fail("a message with a long file name did not survive re-encoding");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  RankMessage m;
  std::string error;
  if (!DecodeRankMessage(bytes, size, &m, &error)) {
    if (error.empty()) Fail("a message was rejected without a reason");
    return 0;
  }
  CheckRoundTrip(bytes, size, m);
  return 0;
}
