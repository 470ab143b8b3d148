// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Request: a non-blocking send or receive in flight (Communicator::isend,
// irecv), and RequestState, what a backend keeps of one.
#ifndef DISTTEST_COMM_REQUEST_H_
#define DISTTEST_COMM_REQUEST_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "disttest/comm/data_type.h"

namespace disttest {

class Communicator;

// What a backend keeps of a non-blocking send or receive in flight.
class RequestState {
 public:
  virtual ~RequestState();
  // Blocks until the operation has completed, at most `timeout`; throws
  // CommError (naming the rank, the operation and the cause) when it fails
  // or the time runs out. Called once.
  virtual void Wait(std::chrono::milliseconds timeout) = 0;
};

// A non-blocking send or receive in flight (Communicator::isend, irecv).
//
//   disttest::Request s = comm.isend(out.data(), n, peer, /*tag=*/1);
//   disttest::Request r = comm.irecv(in.data(), n, peer, /*tag=*/1);
//   r.wait();
//   s.wait();
//
// wait() blocks until the operation has completed (a send: its receiver
// has all the data; a receive: the data is in the buffer), at most the
// communicator's timeout, and throws CommError as send() and recv() do.
// Until then the buffer must stay valid and, for a send, unchanged: a send
// buffer in host memory that changed fails the wait() with CommError ("...
// its buffer changed before its wait() returned"), though a backend that
// copied it at once delivered the old contents (not checked for a Request
// destroyed without wait(), whose buffer may be gone). A Request
// destroyed before it completed waits for it (as the std::future of std::async
// does); if that fails, its communicator is failed() and, in a harness rank,
// the test fails at the line that made the request, with the error. A
// request still not waited for when the test ends (held in a static, or
// past TearDown), or one that outlives its communicator, fails the test
// there too. Movable, not copyable; not for
// use from two threads at once.
class Request {
 public:
  Request() = default;  // Nothing in flight: wait() returns at once.
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  ~Request();

  void wait();
  // Whether it has not been waited for yet.
  bool pending() const { return state_ != nullptr; }

 private:
  friend class Communicator;
  void Finish() noexcept;
  bool Orphaned() noexcept;

  Communicator* comm_ = nullptr;
  std::unique_ptr<RequestState> state_;
  bool send_ = false;
  DataType type_ = DataType::kUint8;
  std::size_t count_ = 0;
  int peer_ = 0;
  std::uint32_t tag_ = 0;
  const char* file_ = "";
  unsigned line_ = 0;
  std::uint64_t entry_ = UINT64_MAX;  // Its ledger entry, if any.
  std::uint64_t seq_ = UINT64_MAX;    // Its number in its pair (the ledger's).
  std::uint64_t id_ = 0;  // In the process's account of requests in flight.
  // An isend's buffer in host memory and its fingerprint when it was made:
  // its wait() sees it unchanged (null: not checked).
  const void* sent_ = nullptr;
  std::uint64_t sent_fingerprint_ = 0;
  // False once its communicator is destroyed (a Request that outlives it is
  // never waited on through it).
  std::shared_ptr<const bool> comm_alive_;
};

}  // namespace disttest

#endif  // DISTTEST_COMM_REQUEST_H_
