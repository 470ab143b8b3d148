// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The TCP store's wire format, private to the store: its ops, their limits,
// and the encoding and bounds-checked decoding of its frames. The format:
// docs/how-it-works.md#the-stores-wire-format.
#ifndef DISTTEST_SRC_RENDEZVOUS_WIRE_H_
#define DISTTEST_SRC_RENDEZVOUS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttest/rendezvous/tcp_store.h"
#include "disttest/rendezvous/tcp_store_server.h"
#include "rendezvous/frame.h"

namespace disttest::internal {

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kWait = 5,
  kDelete = 6,
  kHello = 7,
};

enum class Status : uint8_t { kOk = 0, kError = 1 };

inline constexpr std::size_t kMaxFrameBytes = TcpStoreServer::kMaxFrameBytes;
inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxKeysPerRequest = 4096;
inline constexpr std::size_t kMaxTokenBytes = 1024;
// The largest frame a connection may send before its HELLO is accepted, so
// that a stranger cannot make the server buffer kMaxFrameBytes.
inline constexpr std::size_t kMaxHelloBytes = 1 + 4 + kMaxTokenBytes;

// A decoded request. Which fields are meaningful depends on `op`.
struct Request {
  Op op = Op::kGet;
  std::string key;                // SET, GET, ADD, DELETE
  std::vector<char> value;        // SET
  int64_t delta = 0;              // ADD
  std::vector<std::string> keys;  // CHECK, WAIT
  std::string token;              // HELLO
};

// Checks the limits on keys and sizes. Shared by the client (which rejects a
// request before sending it) and the server (which drops the connection).
inline bool ValidateRequest(const Request& request, std::string* error) {
  auto key_ok = [&](const std::string& key) {
    if (key.size() <= kMaxKeyBytes) return true;
    *error = "key of " + std::to_string(key.size()) +
             " bytes exceeds the limit of " + std::to_string(kMaxKeyBytes);
    return false;
  };
  if (!key_ok(request.key)) return false;
  if (request.token.size() > kMaxTokenBytes) {
    *error = "token of " + std::to_string(request.token.size()) +
             " bytes exceeds the limit of " + std::to_string(kMaxTokenBytes);
    return false;
  }
  if (request.keys.size() > kMaxKeysPerRequest) {
    *error = std::to_string(request.keys.size()) +
             " keys exceed the limit of " + std::to_string(kMaxKeysPerRequest);
    return false;
  }
  for (const std::string& key : request.keys) {
    if (!key_ok(key)) return false;
  }
  // A SET payload is op + two length-prefixed strings.
  const std::size_t overhead = 1 + 4 + request.key.size() + 4;
  if (request.value.size() > kMaxFrameBytes - overhead) {
    *error = "value of " + std::to_string(request.value.size()) +
             " bytes exceeds the frame limit of " +
             std::to_string(kMaxFrameBytes) + " bytes";
    return false;
  }
  return true;
}

// Encodes a valid request (see ValidateRequest) as a frame.
inline std::vector<char> EncodeRequest(const Request& request) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(request.op));
  switch (request.op) {
    case Op::kSet:
      w.PutString(request.key);
      w.PutBytes(request.value.data(), request.value.size());
      break;
    case Op::kAdd:
      w.PutString(request.key);
      w.PutI64(request.delta);
      break;
    case Op::kCheck:
    case Op::kWait:
      w.PutU32(static_cast<uint32_t>(request.keys.size()));
      for (const std::string& key : request.keys) w.PutString(key);
      break;
    case Op::kHello:
      w.PutString(request.token);
      break;
    case Op::kGet:
    case Op::kDelete:
    default:
      w.PutString(request.key);
      break;
  }
  return std::move(w).Finish();
}

inline bool ReadKeys(Reader& r, std::vector<std::string>* keys) {
  uint32_t count;
  // Checked before reserving so that a forged count allocates nothing: each
  // key takes at least its 4-byte length.
  if (!r.ReadU32(&count) || count > kMaxKeysPerRequest ||
      count > r.remaining() / 4) {
    return false;
  }
  keys->resize(count);
  for (std::string& key : *keys) {
    if (!r.ReadString(&key)) return false;
  }
  return true;
}

// Decodes a request payload (the frame without its length header). On
// failure returns false and sets `error`; `out` is then unspecified.
inline bool DecodeRequest(const char* data, std::size_t size, Request* out,
                          std::string* error) {
  Reader r(data, size);
  uint8_t op;
  if (!r.ReadU8(&op)) {
    *error = "empty request";
    return false;
  }
  out->op = static_cast<Op>(op);
  bool ok = false;
  switch (out->op) {
    case Op::kSet:
      ok = r.ReadString(&out->key) && r.ReadBytes(&out->value);
      break;
    case Op::kGet:
    case Op::kDelete:
      ok = r.ReadString(&out->key);
      break;
    case Op::kAdd:
      ok = r.ReadString(&out->key) && r.ReadI64(&out->delta);
      break;
    case Op::kCheck:
    case Op::kWait:
      ok = ReadKeys(r, &out->keys);
      break;
    case Op::kHello:
      ok = r.ReadString(&out->token);
      break;
    default:
      *error = "unknown op " + std::to_string(op);
      return false;
  }
  if (!ok || !r.AtEnd()) {
    *error = "malformed request with op " + std::to_string(op);
    return false;
  }
  return ValidateRequest(*out, error);
}

// Compares a received token with the expected one in time that depends only
// on the lengths, so that timing does not reveal how much of a guess was
// right.
inline bool TokensEqual(std::string_view expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : 0;
    diff |= static_cast<unsigned char>(expected[i] ^ g);
  }
  return diff == 0;
}

inline std::vector<char> EncodeErrorReply(std::string_view message) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kError));
  w.PutString(message);
  return std::move(w).Finish();
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_WIRE_H_
