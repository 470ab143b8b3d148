// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A rank's sends and receives in flight, in its own process: the state
// host_arena_mailbox.cc moves on, apart so that host_arena.cc, whose arena
// owns the mailboxes, can free them.
#ifndef DISTTEST_SRC_COMM_HOST_ARENA_MAILBOX_H_
#define DISTTEST_SRC_COMM_HOST_ARENA_MAILBOX_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "comm/host_arena.h"
#include "comm/host_arena_layout.h"

namespace disttest {

// What a rank has in flight, in its own process. Its threads may send and
// receive at once (a helper thread sends while the rank's own receives):
// what they change here, they change under `mu`, which none holds while it
// waits.
struct HostArena::Mailbox {
  std::mutex mu;
  struct Op {
    std::uint64_t id = 0;
    bool send = false;
    int peer = 0;
    Header::Message message;        // Its count, type and tag.
    unsigned char* data = nullptr;  // A send's is only read.
    std::uint64_t bytes = 0;
    std::uint64_t pieces = 1;  // At least one, for an empty message.
    // A send's message number, from 1; a receive's match (0: none yet).
    std::uint64_t number = 0;
    std::uint64_t posted = 0;    // A send's pieces posted,
    std::uint64_t settled = 0;   // and taken (or refused) since.
    std::uint64_t received = 0;  // A receive's pieces taken.
    std::string error;           // Why it failed.

    bool done() const {
      return send ? posted == pieces && settled == pieces
                  : number != 0 && received == pieces;
    }
  };
  // What this rank's post i (in sent[i % kPosts]) belongs to.
  struct Sent {
    std::uint64_t id = 0;
    std::uint64_t heap_end = 0;  // heap_used after its bytes.
    bool settled = false;
  };

  std::deque<Op> ops;  // In the order they were made.
  std::uint64_t next_id = 1;
  std::uint64_t next_number = 1;
  // Bytes of the heap handed out and given back so far, as running totals:
  // the heap is a ring, its bytes given back in the order handed out.
  std::uint64_t heap_used = 0;
  std::uint64_t heap_freed = 0;
  Sent sent[kPosts];

  std::deque<Op>::iterator Find(std::uint64_t id) {
    return std::find_if(ops.begin(), ops.end(),
                        [id](const Op& op) { return op.id == id; });
  }
};

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_HOST_ARENA_MAILBOX_H_
