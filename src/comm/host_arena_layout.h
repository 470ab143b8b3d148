// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The host arena's memory as every part of it sees it (host_arena.cc maps
// it, host_arena_collectives.cc, host_arena_mailbox.cc and
// host_arena_pool.cc use it): the header, each rank's part, a post, and the
// futex on which ranks wait in it.
#ifndef DISTTEST_SRC_COMM_HOST_ARENA_LAYOUT_H_
#define DISTTEST_SRC_COMM_HOST_ARENA_LAYOUT_H_

#include <atomic>
#include <cstdint>

#include "comm/host_arena.h"

namespace disttest {

// The barrier is a counter and a generation number: the last rank to arrive
// resets the counter and bumps the generation, on which the others wait
// (a futex: the memory is shared between processes). `ended` holds 1 + the
// first rank said to have ended.
//
// A send goes through the sender's mailbox (host_arena.h): posts in a ring
// in its PerRank, bytes in its heap. Only the sender writes a post; it
// publishes post i by writing its stamp (i + 1) and then `posted`. The post's
// receiver, and no one else, sets its state to taken or refused; the sender
// reuses it (and its bytes) only after that. A receiver reads a post it does
// not own between two reads of its stamp, so a post reused meanwhile is
// seen as such. A rank that waits in a send or receive sleeps on its own
// `doorbell`, which whoever changes what it waits for rings; `waiting_on`
// says for whom, so that MarkEnded() wakes exactly those that wait for the
// rank that ended.
struct HostArena::Header {
  // What a rank called as its collective `seq`.
  struct Entry {
    CollectiveCall call;
    // Never a real sequence number: a rank that never wrote its entry
    // matches nobody's call.
    std::uint64_t seq = UINT64_MAX;
  };
  // A message as its sender describes it, or as its receiver expected it.
  struct Message {
    std::uint64_t count = 0;
    DataType type = DataType::kUint8;
    std::uint32_t tag = 0;
    bool operator==(const Message&) const = default;
  };
  alignas(64) std::atomic<std::uint32_t> arrived{0};
  alignas(64) std::atomic<std::uint32_t> generation{0};
  alignas(64) std::atomic<std::int32_t> ended{0};
  // 1 + the first rank whose wait failed. Its arrival is still counted in
  // a barrier that never completed, so the arena cannot be used again.
  std::atomic<std::int32_t> failed{0};
  // 1 + the sequence number of the first collective that did not match.
  std::atomic<std::uint64_t> mismatch{0};

  // A pool's last test handed out, its name's size (kNameInStore: in the
  // store) and its name.
  alignas(64) std::atomic<std::uint32_t> dispatched{0};
  std::atomic<std::uint32_t> name_size{0};
  char test_name[kTestNameBytes];
};

// One piece of a message, as its sender posted it.
struct HostArena::Post {
  enum State : std::uint32_t { kOpen = 0, kTaken = 1, kRefused = 2 };
  // i + 1 once post i is whole in this place; read before and after the
  // rest by whoever does not own it.
  std::atomic<std::uint64_t> stamp{0};
  std::atomic<std::uint32_t> state{kOpen};
  std::int32_t to = -1;
  Header::Message message;    // The whole message's count, type and tag.
  std::uint64_t number = 0;   // The sender's message number (from 1).
  std::uint64_t offset = 0;   // Bytes of the message before this piece.
  std::uint64_t bytes = 0;    // In this piece.
  std::uint64_t heap_at = 0;  // Where they are in the sender's heap.
  Header::Message expected;   // A receiver that refused: what it expected.
};

struct alignas(64) HostArena::PerRank {
  // Barriers this rank has entered: who is missing, on a timeout.
  std::atomic<std::uint64_t> arrivals{0};
  // Collectives this rank has entered: the next one's sequence number.
  // Written only by the rank itself, as is `rounds`.
  std::uint64_t ops = 0;
  // Rounds this rank has entered (a collective takes one or more).
  std::uint64_t rounds = 0;
  // Its last two rounds' calls, by parity: a fast rank writes the next
  // while a slow one may still read the last.
  Header::Entry entries[2];
  // Its data for a round of up to kSmallBytes, by parity, beside the call:
  // peers that read every rank's data touch a few pages, not one per rank.
  alignas(64) unsigned char small[2][kSmallBytes];

  // The pooled test this rank waits for (Park()), 0: none.
  std::atomic<std::uint32_t> parked{0};
  // Set by MarkEnded(), and by MarkLeft() (2: it passed).
  std::atomic<std::uint32_t> ended{0};
  std::atomic<std::uint32_t> left{0};
  // The peer this rank waits for in a send or receive, or -1.
  std::atomic<std::int32_t> waiting_on{-1};
  std::atomic<std::uint32_t> doorbell{0};

  // Its mailbox: post i is posts[i % kPosts]; those before `reclaimed` are
  // free again (only this rank writes both counters).
  std::atomic<std::uint64_t> posted{0};
  std::atomic<std::uint64_t> reclaimed{0};
  Post posts[kPosts];
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free,
              "the arena's atomics must work across processes");

namespace internal {

// Waits while *word == expected, at most `ns`; shared (not private) futex.
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               long long ns);
void FutexWakeAll(std::atomic<std::uint32_t>* word);

}  // namespace internal

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_HOST_ARENA_LAYOUT_H_
