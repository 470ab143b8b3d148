// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The layout of a rank's area in the ledger's memory (comm/ledger.h): its
// header and ring of entries, which the rank writes (ledger.cc) and readers
// copy (ledger_memory.cc), and the helpers the ledger's parts share.
#ifndef DISTTEST_SRC_COMM_LEDGER_AREA_H_
#define DISTTEST_SRC_COMM_LEDGER_AREA_H_

#include <atomic>
#include <cstdint>

#include "comm/ledger.h"

namespace disttest::internal {

// One entry, a cache line pair. `stamp` is written last (release) and read
// first (acquire); `state` and `ended_ns` change once more, at the end.
struct alignas(64) Entry {
  std::atomic<std::uint64_t> stamp{0};  // index + 1; 0 while written.
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int64_t entered_ns = 0;
  std::atomic<std::int64_t> ended_ns{0};
  std::uint32_t comm = 0;
  std::uint32_t tag = 0;
  std::uint32_t line = 0;
  std::int32_t peer = -1;
  std::uint8_t op = 0;
  std::uint8_t type = 0;
  std::uint8_t reduce = 0;
  std::uint8_t harness = 0;
  std::atomic<std::uint8_t> state{0};
  std::uint8_t nonblocking = 0;
  std::uint16_t ranks = 0;  // An allgatherv's (kept to 65535).
  std::uint32_t counts[LedgerMemory::kCountsKept] = {};  // Its first counts.
  char file[LedgerMemory::kFileBytes] = {};
};
static_assert(sizeof(Entry) == 128, "a ledger entry is two cache lines");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free,
              "the ledger's atomics must work across processes");

// A rank's area: this header, then its ring of entries.
struct LedgerMemory::Area {
  alignas(64) std::atomic<std::uint64_t> written{0};  // Entries begun.
  std::atomic<std::uint64_t> test_first{0};           // The test's first entry.
  std::atomic<std::int64_t> phase_ns[kPhases] = {};
  std::atomic<std::uint32_t> named{0};  // Names written (≤ kComms).
  char names[kComms][kNameBytes] = {};
  std::uint64_t keys[kComms] = {};
  // Per communicator: the test's collectives, and a digest of their calls
  // (operation, type, count, reduce op, root) in order.
  std::atomic<std::uint64_t> calls[kComms] = {};
  std::atomic<std::uint64_t> digest[kComms] = {};
  // Per communicator: the test's sends and receives that returned, their
  // balance, and those that did not return (CommTransfers).
  std::atomic<std::uint64_t> transfers[kComms] = {};
  std::atomic<std::uint64_t> balance[kComms] = {};
  std::atomic<std::uint64_t> transfers_failed[kComms] = {};
  // The process that installed this area (0: none yet), for SignalRank.
  std::atomic<std::int32_t> pid{0};
  // Its thread, and how that thread ended the process (Ledger::
  // NoteEndedProcess) where ranks are threads.
  std::atomic<std::int32_t> tid{0};
  std::atomic<std::int32_t> ended_process{0};
  // Per communicator: this rank's rank in it, and its size, so that a
  // reader can tell which rank a peer of a send is.
  std::int32_t comm_rank[kComms] = {};
  std::int32_t comm_size[kComms] = {};
  // The entry (index + 1) of the blocking call the rank's thread is in now
  // (a send, a receive, a wait, a collective); 0 in none.
  std::atomic<std::uint64_t> blocked{0};
  // That call's timeout (ms): it gives up by itself that long after it
  // began.
  std::atomic<std::int64_t> blocked_timeout_ms{0};
  // The thread that made the test's calls; `threads` is set once another
  // did too (then a blocked call may wait for a thread that runs).
  std::atomic<std::int32_t> caller{0};
  std::atomic<std::uint8_t> threads{0};
  // The communicator the rank's thread waits to make in the test's code
  // (Ledger::BeginMaking): `making` is odd while it does. The fields after
  // it are written while it is even, before it turns odd, and a reader
  // keeps what it copied only when `making` read the same before and after.
  std::atomic<std::uint64_t> making{0};
  std::uint64_t making_key = 0;
  // The process that began it: one forked from the rank (a death test's
  // child) shares this area, and may have died making one.
  std::int32_t making_pid = 0;
  std::int32_t making_rank = 0;
  std::int32_t making_size = 0;
  std::int64_t making_ns = 0;
  std::int64_t making_timeout_ms = 0;
  std::uint32_t making_line = 0;
  char making_file[kFileBytes] = {};
  char making_name[kNameBytes] = {};
};
static_assert(sizeof(LedgerMemory::Area) % alignof(Entry) == 0);

inline Entry* EntriesOf(const LedgerMemory::Area& a) {
  return reinterpret_cast<Entry*>(
      reinterpret_cast<char*>(const_cast<LedgerMemory::Area*>(&a)) +
      sizeof(LedgerMemory::Area));
}

// What two ranks' calls of one collective must agree on, in 64 bits: what
// LedgerRecord::SameCall compares (both in ledger_record.cc).
std::uint64_t CallHash(const Ledger::Call& c);

// What a send and its receive must agree on, in 64 bits: the message's
// sender and receiver (their ranks in the communicator), tag, number among
// that pair's of its tag, element type and count.
std::uint64_t MessageHash(int sender, int receiver, const Ledger::Call& c,
                          std::uint64_t seq);

// Combines the digests of several communicators of one name (in id order).
void Fold(CommDigest& into, const CommDigest& d);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_LEDGER_AREA_H_
