// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The messages a rank sends itself on one communicator: an isend and an
// irecv whose peer is the rank itself, as MPI allows (a ring at world size
// 1). Paired in the communicator's front for every backend whose buffers
// are in host memory (Gloo, the host arena and MPI's own pairs have no pair
// to a rank itself; NCCL's, on the GPU, refuses them): by tag, in the order
// posted, as MPI pairs a source's messages.
//
//   std::unique_ptr<RequestState> s = self.Send(out, 4, kFloat32, 7);
//   std::unique_ptr<RequestState> r = self.Recv(in, 4, kFloat32, 7);
//   r->Wait(timeout);  // in holds out's 4 floats
//   s->Wait(timeout);
//
// The data is copied when the second of a pair is posted; a wait returns
// once its pair is posted (post both before waiting for either: a wait
// for a pair that another thread posts later may look like a deadlock to
// the harness), and throws CommError at the timeout or a cut, or a
// mismatch of calls
// (peer_errors.h) where the pair's counts or types differ (once for the
// pair: the test fails for it, caught or not). Host memory only. Safe from
// several threads.
#ifndef DISTTEST_SRC_COMM_SELF_MESSAGES_H_
#define DISTTEST_SRC_COMM_SELF_MESSAGES_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "disttest/comm/data_type.h"
#include "disttest/comm/request.h"

namespace disttest::internal {

// Why a blocking send or receive to the rank itself is refused (on every
// backend that pairs isends and irecvs to itself here).
inline constexpr const char kBlockingToItself[] =
    "the peer is this rank itself; a blocking send completes only when its "
    "receive has taken the message, which the same thread could not post "
    "while it waits, so disttest refuses it (post an isend and an irecv to "
    "this rank, both before either wait, or copy the data)";

class SelfMessages {
 public:
  // `rank`, `size`: the rank's in its communicator, for errors; `slot`:
  // its ledger's (whose mismatch it is: peer_errors.h), -1 without one.
  SelfMessages(int rank, int size, int slot);

  std::unique_ptr<RequestState> Send(const void* data, std::size_t count,
                                     DataType type, std::uint32_t tag);
  std::unique_ptr<RequestState> Recv(void* data, std::size_t count,
                                     DataType type, std::uint32_t tag);

  struct Op {
    bool send = false;
    const void* from = nullptr;  // A send's data.
    void* to = nullptr;          // A receive's buffer.
    std::size_t count = 0;
    DataType type = DataType::kUint8;
    std::uint32_t tag = 0;
    bool done = false;
    bool mismatch = false;
    std::string error;  // Set with done when the pair does not match.
    // The pair's error was thrown by one of its two waits: the other
    // returns (the rank's test fails for that one, caught or not).
    std::shared_ptr<bool> thrown;
  };
  // Shared with the requests, which may outlive the communicator.
  struct Core {
    std::mutex mu;
    std::condition_variable cv;
    std::list<std::shared_ptr<Op>> unpaired;  // In the order posted.
  };

 private:
  // A send (from `from`) or a receive (into `to`).
  std::unique_ptr<RequestState> Post(bool send, const void* from, void* to,
                                     std::size_t count, DataType type,
                                     std::uint32_t tag);

  const int rank_;
  const int size_;
  const int slot_;
  std::shared_ptr<Core> core_ = std::make_shared<Core>();
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_SELF_MESSAGES_H_
