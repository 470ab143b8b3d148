// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankMessage: one result of a rank (a failure, a skip, a property, its
// verdict, an expected end), and its one encoding, in which it travels
// through the result channel (spawned ranks) or the store (launched ones).
//
//   std::vector<char> bytes = EncodeRankMessage(m, kMaxBytes);
//   RankMessage back;
//   if (!DecodeRankMessage(bytes.data(), bytes.size(), &back, &error)) ...
#ifndef DISTTEST_SRC_HARNESS_RANK_MESSAGE_H_
#define DISTTEST_SRC_HARNESS_RANK_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace disttest::internal {

struct RankMessage {
  enum class Kind : uint8_t {
    kSuccess = 0,  // gtest's SUCCEED(); kept for completeness.
    kNonFatalFailure = 1,
    kFatalFailure = 2,
    kSkip = 3,
    kDone = 4,  // The rank finished its body; message is its verdict.
    // RecordProperty() in the rank: message is the key, a NUL, the value;
    // a key that starts with kPropertyOfTheRanks is the ranks' together
    // (rank threads record into one gtest result: whose is unknown).
    kProperty = 5,
    // ExpectRankToEnd(): message is EncodeExpectedEnd()'s (expected_end.h).
    kExpectEnd = 6,
  };
  Kind kind = Kind::kNonFatalFailure;
  std::string file;  // Empty when unknown.
  int32_t line = -1;
  std::string message;
  // A failure that reports an error a peer caused (comm/peer_errors.h): the
  // verdict lists it after that peer's own.
  bool follows = false;
};

inline constexpr char kPropertyOfTheRanks = '\x01';

// Serialises `m` into at most `max_bytes` bytes, truncating the message
// (with a note saying how much was cut) when it does not fit.
std::vector<char> EncodeRankMessage(const RankMessage& m,
                                    std::size_t max_bytes);
// Parses one encoded message; false (with `error` set) on any malformed
// input. Never reads outside [data, data + size).
bool DecodeRankMessage(const char* data, std::size_t size, RankMessage* out,
                       std::string* error);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_MESSAGE_H_
