// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The TCP store's wire format (private to the store; no compatibility with
// c10d is intended). Every message is a frame:
//
//   frame   = uint32 payload length (little-endian) + payload
//   request = uint8 op + arguments
//   reply   = uint8 status (0 ok, 1 error) + data (error: message string)
//
// Strings and byte vectors are a uint32 length + the bytes; int64 is 8 bytes
// little-endian; a key list is a uint32 count + that many strings.
//
//   op      arguments        reply data
//   SET     key, value       -
//   GET     key              value         (parked until the key exists)
//   ADD     key, int64       int64 new value
//   CHECK   keys             uint8 1 when all exist
//   WAIT    keys             -             (parked until all exist)
//   DELETE  key              uint8 1 when the key existed
//
// DecodeRequest() is bounds-checked so that it can take arbitrary bytes (a
// fuzzer, a port scanner) without reading out of bounds or allocating more
// than the frame holds.
#ifndef DISTTEST_SRC_RENDEZVOUS_WIRE_H_
#define DISTTEST_SRC_RENDEZVOUS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttest/rendezvous/tcp_store.h"

namespace disttest::internal {

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kWait = 5,
  kDelete = 6,
};

enum class Status : uint8_t { kOk = 0, kError = 1 };

inline constexpr std::size_t kFrameHeaderBytes = 4;
inline constexpr std::size_t kMaxFrameBytes = TcpStoreServer::kMaxFrameBytes;
inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxKeysPerRequest = 4096;

// A decoded request. Which fields are meaningful depends on `op`.
struct Request {
  Op op = Op::kGet;
  std::string key;                // SET, GET, ADD, DELETE
  std::vector<char> value;        // SET
  int64_t delta = 0;              // ADD
  std::vector<std::string> keys;  // CHECK, WAIT
};

// Builds one frame; the length header is filled in by Finish().
class FrameWriter {
 public:
  // Reserving ahead also keeps GCC 12's -Warray-bounds from misfiring on
  // the first push_back after a 4-byte allocation.
  FrameWriter() {
    buf_.reserve(kFrameHeaderBytes + 64);
    buf_.resize(kFrameHeaderBytes);
  }

  void PutU8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void PutU32(uint32_t v) { PutLittleEndian(v, 4); }
  void PutI64(int64_t v) { PutLittleEndian(static_cast<uint64_t>(v), 8); }
  void PutBytes(const char* data, std::size_t size) {
    PutU32(static_cast<uint32_t>(size));
    buf_.insert(buf_.end(), data, data + size);
  }
  void PutString(std::string_view s) { PutBytes(s.data(), s.size()); }

  std::size_t payload_size() const { return buf_.size() - kFrameHeaderBytes; }

  std::vector<char> Finish() && {
    uint64_t size = payload_size();
    for (std::size_t i = 0; i < kFrameHeaderBytes; ++i) {
      buf_[i] = static_cast<char>(size >> (8 * i));
    }
    return std::move(buf_);
  }

 private:
  void PutLittleEndian(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      buf_.push_back(static_cast<char>(v >> (8 * i)));
  }

  std::vector<char> buf_;
};

// Reads little-endian integers and length-prefixed strings from a buffer;
// every read fails (returns false) rather than run past the end.
class Reader {
 public:
  Reader(const char* data, std::size_t size) : data_(data), size_(size) {}

  bool ReadU8(uint8_t* v) {
    uint64_t u;
    if (!ReadLittleEndian(1, &u)) return false;
    *v = static_cast<uint8_t>(u);
    return true;
  }
  bool ReadU32(uint32_t* v) {
    uint64_t u;
    if (!ReadLittleEndian(4, &u)) return false;
    *v = static_cast<uint32_t>(u);
    return true;
  }
  bool ReadI64(int64_t* v) {
    uint64_t u;
    if (!ReadLittleEndian(8, &u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool ReadString(std::string* s) {
    const char* p;
    std::size_t n;
    if (!ReadSized(&p, &n)) return false;
    s->assign(p, n);
    return true;
  }
  bool ReadBytes(std::vector<char>* v) {
    const char* p;
    std::size_t n;
    if (!ReadSized(&p, &n)) return false;
    v->assign(p, p + n);
    return true;
  }
  bool AtEnd() const { return pos_ == size_; }

 private:
  // pos_ <= size_ always holds, so `size_ - pos_` cannot wrap.
  bool Take(std::size_t n, const char** p) {
    if (n > size_ - pos_) return false;
    *p = data_ + pos_;
    pos_ += n;
    return true;
  }
  bool ReadLittleEndian(int bytes, uint64_t* v) {
    const char* p;
    if (!Take(bytes, &p)) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) {
      *v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    }
    return true;
  }
  bool ReadSized(const char** p, std::size_t* n) {
    uint32_t size;
    if (!ReadU32(&size) || !Take(size, p)) return false;
    *n = size;
    return true;
  }

  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Reads the payload length from a frame header (kFrameHeaderBytes bytes).
inline uint32_t DecodeFrameLength(const char* header) {
  uint32_t length = 0;
  Reader(header, kFrameHeaderBytes).ReadU32(&length);
  return length;
}

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
  // Checked before reserving so that a forged count allocates nothing.
  if (!r.ReadU32(&count) || count > kMaxKeysPerRequest) return false;
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

inline std::vector<char> EncodeErrorReply(std::string_view message) {
  FrameWriter w;
  w.PutU8(static_cast<uint8_t>(Status::kError));
  w.PutString(message);
  return std::move(w).Finish();
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_WIRE_H_
