// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Frames of the TCP store's wire format (see wire.h): a uint32 little-endian
// payload length, then the payload. FrameWriter builds one; Reader takes the
// payload apart, and every read fails rather than run past the end.
//
//   FrameWriter w;
//   w.PutU8(1);
//   w.PutString("key");
//   std::vector<char> frame = std::move(w).Finish();  // header filled in
//   Reader r(frame.data() + 4, frame.size() - 4);  // 4: kFrameHeaderBytes
//
// Private to the store; plain value types with no thread or fork concerns.
#ifndef DISTTEST_SRC_RENDEZVOUS_FRAME_H_
#define DISTTEST_SRC_RENDEZVOUS_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace disttest::internal {

inline constexpr std::size_t kFrameHeaderBytes = 4;

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
  std::size_t remaining() const { return size_ - pos_; }

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

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_RENDEZVOUS_FRAME_H_
