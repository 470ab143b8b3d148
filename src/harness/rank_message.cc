// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank_message.h"

#include <fmt/format.h>

#include <algorithm>

namespace disttest::internal {

namespace {

void PutU32(std::vector<char>* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->insert(out->end(), b, b + 4);
}

bool GetU32(const char*& p, const char* end, uint32_t* v) {
  if (end - p < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) {
    *v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  p += 4;
  return true;
}

bool GetString(const char*& p, const char* end, std::string* s) {
  uint32_t n = 0;
  if (!GetU32(p, end, &n) || static_cast<std::size_t>(end - p) < n) {
    return false;
  }
  s->assign(p, n);
  p += n;
  return true;
}

constexpr std::size_t kHeaderBytes = 1 + 4 + 4 + 4;
// The kind's byte: the kind, and this bit for RankMessage::follows.
constexpr uint8_t kFollowsBit = 0x80;

}  // namespace

std::vector<char> EncodeRankMessage(const RankMessage& m,
                                    std::size_t max_bytes) {
  // The file name takes at most a quarter of the room, the message the rest.
  std::string file =
      m.file.substr(0, std::min<std::size_t>(1024, max_bytes / 4));
  std::string message = m.message;
  std::size_t room = max_bytes > kHeaderBytes + file.size()
                         ? max_bytes - kHeaderBytes - file.size()
                         : 0;
  if (message.size() > room) {
    // The note is under 80 bytes whatever the numbers in it.
    constexpr std::size_t kNoteBytes = 80;
    if (room <= kNoteBytes) {
      message.clear();
    } else {
      std::size_t keep = room - kNoteBytes;
      message = fmt::format(
          "{}\n... [disttest: message truncated, {} of {} bytes shown]",
          message.substr(0, keep), keep, message.size());
    }
  }
  std::vector<char> out;
  out.reserve(kHeaderBytes + file.size() + message.size());
  out.push_back(static_cast<char>(static_cast<uint8_t>(m.kind) |
                                  (m.follows ? kFollowsBit : 0)));
  PutU32(&out, static_cast<uint32_t>(m.line));
  PutU32(&out, static_cast<uint32_t>(file.size()));
  out.insert(out.end(), file.begin(), file.end());
  PutU32(&out, static_cast<uint32_t>(message.size()));
  out.insert(out.end(), message.begin(), message.end());
  return out;
}

bool DecodeRankMessage(const char* data, std::size_t size, RankMessage* out,
                       std::string* error) {
  const char* p = data;
  const char* end = data + size;
  if (size < 1) {
    *error = "empty result message";
    return false;
  }
  const auto byte = static_cast<uint8_t>(*p++);
  const auto kind = static_cast<uint8_t>(byte & ~kFollowsBit);
  if (kind > static_cast<uint8_t>(RankMessage::Kind::kExpectEnd)) {
    *error = fmt::format("result message has unknown kind {}", kind);
    return false;
  }
  uint32_t line = 0;
  if (!GetU32(p, end, &line) || !GetString(p, end, &out->file) ||
      !GetString(p, end, &out->message)) {
    *error = fmt::format("result message of {} bytes is truncated", size);
    return false;
  }
  if (p != end) {
    *error = fmt::format("result message has {} trailing bytes", end - p);
    return false;
  }
  out->kind = static_cast<RankMessage::Kind>(kind);
  out->follows = (byte & kFollowsBit) != 0;
  out->line = static_cast<int32_t>(line);
  return true;
}

}  // namespace disttest::internal
