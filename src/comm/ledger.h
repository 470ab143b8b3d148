// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The collective ledger: what each rank's communicators did, in shared memory
// that the harness's parent reads without the rank's help (LedgerMemory), so
// that a rank that hangs or was killed still says which collective it was in.
// A rank's Ledger writes it. What an entry holds and how it is read while it
// is written: docs/how-it-works.md#the-collective-ledgers.
#ifndef DISTTEST_SRC_COMM_LEDGER_H_
#define DISTTEST_SRC_COMM_LEDGER_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "disttest/comm/communicator.h"

namespace disttest::internal {

enum class LedgerOp : std::uint8_t {
  kBarrier,
  kAllReduce,
  kBroadcast,
  kAllGather,
  kSend,
  kRecv,
  kReduce,         // peer: the root.
  kReduceScatter,  // count: per rank's part.
  kGather,         // peer: the root.
  kScatter,        // peer: the root.
  kAllToAll,       // count: per rank's part.
  kAllGatherV,     // count: every rank's together; tag: their counts' hash.
  kAllToAllV,      // count: what this rank sends (its own; ranks differ).
  kSplit,          // peer: the color; tag: the key (ranks differ).
};
inline constexpr LedgerOp kLastLedgerOp = LedgerOp::kSplit;
enum class LedgerState : std::uint8_t { kEntered = 1, kCompleted, kFailed };

// Where a rank is in its test, each with the time it got there.
enum class RankPhase : std::uint8_t {
  kStarted,     // The rank's process runs the harness's code.
  kConnecting,  // It makes its communicator.
  kConnected,   // Its communicator is up and has met the others.
  kSetUp,       // It runs the fixture's SetUp() and SetUpRank().
  kBody,        // It runs the test body.
  kTearDown,    // TearDownRank() and TearDown().
  // Under LeakSanitizer, after a body that did not fail: the rank's leak
  // check, which stops its threads (a tracer) while it scans the heap.
  kCheckingLeaks,
  kFinished,  // Its part is over; it reports its verdict.
};
inline constexpr std::size_t kPhases = 8;
// Whether a rank in `phase` runs the test's code (SetUp() to TearDown()),
// not disttest's.
inline bool InTheTestsCode(RankPhase phase) {
  return phase == RankPhase::kSetUp || phase == RankPhase::kBody ||
         phase == RankPhase::kTearDown;
}
// "started", "connecting", ...
const char* Name(RankPhase phase);

// One operation, as read back.
struct LedgerRecord {
  std::uint64_t index = 0;  // The rank's operations before this one.
  std::uint32_t comm = 0;   // The communicator (RankLedgerView::comms).
  // Its number on that communicator, from 0: among the collectives for a
  // collective; for a send or receive, among the messages of its sender to
  // its receiver with its tag (the order in which they pair).
  std::uint64_t seq = 0;
  LedgerOp op = LedgerOp::kBarrier;
  DataType type = DataType::kUint8;
  ReduceOp reduce = ReduceOp::kSum;
  LedgerState state = LedgerState::kEntered;
  std::int32_t peer = -1;  // A broadcast's root, a send's or recv's peer.
  std::uint32_t tag = 0;
  std::uint64_t count = 0;
  // Made by disttest, not by the test (the barrier before the body).
  bool harness = false;
  // An isend or irecv (or the wait for one): shown as the call it was.
  bool nonblocking = false;
  std::int64_t entered_ns = 0;  // CLOCK_MONOTONIC.
  std::int64_t ended_ns = 0;    // 0 while it is in it.
  std::string file;             // The path's last bytes.
  std::uint32_t line = 0;
  // Allgatherv: the first counts (at most kCountsKept) and how many ranks.
  std::vector<std::uint64_t> counts;
  std::uint64_t ranks = 0;

  bool collective() const {
    return op != LedgerOp::kSend && op != LedgerOp::kRecv;
  }
  // "allreduce(8 x float32, sum)", "send(8 x float32 to rank 1, tag 0)".
  std::string str() const;
  // What every rank's call of the collective must say alike: str(), but
  // for those whose ranks pass their own counts or colors (alltoallv,
  // split), only what they share: "alltoallv(int64)", "split()".
  std::string agreed() const;
  // "at model_test.cc:42"; for the harness's own "(disttest's, before the
  // body)".
  std::string where() const;
  // Whether two ranks' entries describe the same call: operation, type,
  // count, reduce op and root (not the caller's line).
  bool SameCall(const LedgerRecord& other) const;
};

// A communicator's collectives in one test: how many, and a digest of
// their calls in order. Ranks whose digests of one communicator differ
// made different calls, even where every call completed.
struct CommDigest {
  std::uint64_t calls = 0;
  std::uint64_t digest = 0;
  bool operator==(const CommDigest&) const = default;
};

// A communicator's sends and receives that returned in one test: how many,
// and their balance, the sum of a hash of each message (MessageHash) that a
// send adds and a receive subtracts (mod 2^64). Over the communicator's
// ranks the balances sum to 0 when every message sent was received, as it
// was sent (same element type and count), and nothing else was. `failed`:
// those that did not return (a timeout the test expected, say), whose
// numbers in their pairs were taken: the balance then says nothing.
struct CommTransfers {
  std::uint64_t count = 0;
  std::uint64_t balance = 0;
  std::uint64_t failed = 0;
};

// One rank's ledger as read at one moment.
struct RankLedgerView {
  int rank = 0;
  std::int64_t read_ns = 0;           // When it was read.
  std::int64_t read_wall_ns = 0;      // Then on CLOCK_REALTIME (0: unknown).
  std::vector<LedgerRecord> records;  // This test's, oldest first.
  std::uint64_t dropped = 0;          // This test's, older than those.
  std::array<std::int64_t, kPhases> phase_ns{};  // 0: not reached.
  std::vector<std::string> comms;                // Communicator names, by id.
  std::vector<std::uint64_t> keys;               // Their LedgerKey()s.
  std::vector<CommDigest> digests;               // The test's, by id.
  std::vector<CommTransfers> transfers;          // The test's, by id.
  std::vector<int> comm_ranks;  // This rank's rank in each, by id.
  std::vector<int> comm_sizes;  // Their sizes, by id.
  std::uint64_t written = 0;    // Entries the rank ever began.
  // The entry (index + 1) of the blocking call it is in; 0: none.
  std::uint64_t blocked = 0;
  bool threads = false;  // Its test's calls came from several threads.
  // The communicator it waits to make (CreateCommunicator(), a backend's
  // Create()) in the test's code, until every rank of it has come.
  struct Making {
    // The LedgerKey it will have once made (of its store's scope, prefix,
    // size and number).
    std::uint64_t key = 0;
    int rank = 0;  // This rank's rank in it.
    int size = 0;
    std::int64_t since_ns = 0;
    std::string name;  // "communicator \"mine\""
    std::string file;  // The path's last bytes.
    std::uint32_t line = 0;
    // "communicator "mine" of 3 ranks at t.cc:12"
    std::string str() const;
  };
  std::optional<Making> making;
  // The phase it reached last (kStarted when none).
  RankPhase phase() const;
  // The name of communicator `id`, and its key (0: not known).
  std::string comm_name(std::uint32_t id) const;
  std::uint64_t comm_key(std::uint32_t id) const;
  // The test's digest of the communicators of key `key`: several when one
  // was made again (a launched rank's world, made per world size).
  CommDigest digest_of(std::uint64_t key) const;
  // The same of its sends and receives (summed).
  CommTransfers transfers_of(std::uint64_t key) const;
};

// Whether a rank moves: read over time, the same values mean that it has
// made no call since and is still in the same blocking one.
struct Progress {
  std::uint64_t written = 0;    // Entries begun.
  std::uint64_t blocked = 0;    // The blocking call's entry + 1; 0: none.
  std::int64_t timeout_ms = 0;  // Its timeout, from when it began.
  bool threads = false;         // The test's calls came from several threads.
  // Communicators it began to make in the test's code, twice: odd while it
  // waits to make one (RankLedgerView::making; timeout_ms is then that
  // wait's).
  std::uint64_t making = 0;
  bool operator==(const Progress&) const = default;
};

// The ledgers of `ranks` ranks, in a memfd ("disttest-ledger",
// close-on-exec) mapped shared: created by the parent before it spawns
// them, inherited by forked ranks, attached by re-executed ones.
class LedgerMemory {
 public:
  static constexpr std::size_t kRing = 64;  // Entries kept per rank.
  static constexpr std::size_t kMaxRing = 1 << 16;
  static constexpr std::size_t kFileBytes = 40;  // Of each entry's path.
  static constexpr std::size_t kCountsKept = 4;  // Of an allgatherv's.
  // Communicators told apart per rank process (by key; one made again,
  // in a pooled rank's next test, is the same). Their calls are compared
  // across the ranks; a rank that makes more in one test gets CommError at
  // the first operation of the one past them, never a silent pass.
  static constexpr std::size_t kComms = 1024;
  static constexpr std::size_t kNameBytes = 96;
  static constexpr int kMaxRanks = 4096;

  // Throws Error when `ranks` is out of [1, kMaxRanks] or no memory can be
  // mapped (then anonymous shared memory: forked ranks only).
  // `ring`: how many of its last operations each rank keeps.
  static std::shared_ptr<LedgerMemory> Create(int ranks,
                                              std::size_t ring = kRing);
  // The ledger behind `fd`, an inherited fd() (closed here); throws Error
  // naming it when it is no ledger for `ranks` ranks.
  static std::shared_ptr<LedgerMemory> Attach(int fd, int ranks);
  ~LedgerMemory();
  LedgerMemory(const LedgerMemory&) = delete;
  LedgerMemory& operator=(const LedgerMemory&) = delete;

  int ranks() const { return ranks_; }
  std::size_t ring() const { return ring_; }
  int fd() const { return fd_; }  // -1 once attached, or without memfd.

  // Whether every rank's digest of each communicator (by key) is the
  // same, and the balances of its sends and receives sum to 0 over the
  // ranks (where none failed): a few loads per rank, for a test that
  // passed.
  bool DigestsAgree() const;
  // Whether rank `rank`'s newest operation is a collective that it entered
  // before `before_ns` (MonotonicNs()) and is still in: a few loads.
  bool InCollectiveSince(int rank, std::int64_t before_ns) const;
  // Rank `rank`'s newest operation in this test when it is a collective
  // that it is still in.
  std::optional<LedgerRecord> OpenCollective(int rank) const;
  // The send or receive of this test that rank `rank` waits in now (a
  // blocking one, or the wait of an isend or irecv); nullopt when it waits
  // in none, or in one older than the ring keeps.
  std::optional<LedgerRecord> WaitingMessage(int rank) const;
  // The process of rank `rank`, as it wrote it when it installed its
  // ledger; 0 before that (or out of range).
  pid_t Pid(int rank) const;
  // The thread of rank `rank` that installed its ledger (its tid); 0
  // before that.
  pid_t Tid(int rank) const;
  // How rank `rank`'s thread ended its whole process, where the ranks are
  // threads of one (LaunchMode::kThreads): a signal's number (a crash in
  // it), kCalledExit (it called exit()), kCalledQuickExit (quick_exit()),
  // or 0 (not by its hand: an _exit() is seen by no one).
  static constexpr int kCalledExit = -1;
  static constexpr int kCalledQuickExit = -2;
  int EndedProcess(int rank) const;
  // The phase rank `rank` last entered in this test: a few loads.
  RankPhase Phase(int rank) const;
  // Rank `rank`'s progress: four loads.
  Progress ProgressOf(int rank) const;
  // Rank `rank`'s ledger now (`as_rank` labels it).
  RankLedgerView Read(int rank, int as_rank) const;
  RankLedgerView Read(int rank) const { return Read(rank, rank); }

  struct Area;
  Area& area(int rank) const;
  struct Shape;

 private:
  LedgerMemory(int ranks, std::size_t ring, int fd, void* memory,
               std::size_t size);
  static std::size_t AreaBytes(std::size_t ring);
  static std::size_t SizeFor(int ranks, std::size_t ring);

  int ranks_;
  std::size_t ring_;
  int fd_;
  void* memory_;
  std::size_t size_;
};

// A process's ledger: the entry points of the communicators and the rank
// host. At most one per process, installed by the harness before the rank
// makes its communicators; Current() is null without one.
// The communicators a rank makes are numbered per identity (their
// rendezvous keys and size): one made again is another. A number is taken
// when one is made and given back when it goes; each test numbers from past
// the highest still alive (the world communicator of a pooled or launched
// process, one made in the test's constructor), so that a process whose
// earlier tests made some that its peers did not numbers this test's as
// they do. Per rank: a rank thread's own where ranks are threads.
// `numbered_as` receives the key to give the number back with.
std::uint64_t TakeCommunicatorNumber(const std::string& identity,
                                     std::string* numbered_as);
void GiveCommunicatorNumberBack(const std::string& numbered_as,
                                std::uint64_t number);
// The number TakeCommunicatorNumber would give `identity` now.
std::uint64_t PeekCommunicatorNumber(const std::string& identity);
// A new test of the calling rank (Ledger::BeginTest).
void RestartCommunicatorNumbers();

class Ledger {
 public:
  // Makes `memory`'s area `slot` this process's ledger (replacing any).
  static void Install(std::shared_ptr<LedgerMemory> memory, int slot);
  // Makes `memory`'s area `slot` the calling thread's ledger, ahead of the
  // process's: a rank that is a thread (LaunchMode::kThreads).
  static void InstallForThread(std::shared_ptr<LedgerMemory> memory, int slot);
  static Ledger* Current() {
    if (Ledger* mine = thread_current_) return mine;
    return current_.load(std::memory_order_acquire);
  }
  // The calling thread's rank ended its process: `how` as EndedProcess()
  // reads it. Async-signal-safe (one store).
  static void NoteEndedProcess(int how);

  // A new test starts: Read() shows entries from here on, and no phase.
  void BeginTest();
  void Enter(RankPhase phase);
  // A communicator's id: the one of an earlier communicator with the same
  // `key` (LedgerKey of its rendezvous keys, size and instance), else a
  // free one, with `name` for reports, and this rank's `rank` in it of
  // `size` (which rank is a send's peer, for a reader). Key 0 (a backend that
  // gave none) is never matched nor compared. After kComms ids in use, ids go
  // on without a name ("communicator <id + 1>"); the Communicator refuses to
  // use them.
  std::uint32_t AddCommunicator(std::string_view name, std::uint64_t key,
                                int rank, int size);
  // Communicator `id` is gone: its id is free from the next BeginTest()
  // on (this test's entries still name it).
  void Release(std::uint32_t id);
  // The number of communicator `id`'s next collective, from 0; kNoSeq
  // past kComms ids.
  static constexpr std::uint64_t kNoSeq = ~std::uint64_t{0};
  std::uint64_t NextSeq(std::uint32_t id) {
    if (id >= LedgerMemory::kComms) return kNoSeq;
    return next_[id].fetch_add(1, std::memory_order_relaxed);
  }
  // The number of a send (`send`) to, or a receive from, rank `peer` with
  // `tag` on communicator `id` among this test's of that pair and tag, from
  // 0: the order in which they pair.
  std::uint64_t NextInPair(std::uint32_t id, bool send, int peer,
                           std::uint32_t tag);
  // Communicators added so far.
  std::uint32_t comms() const { return comms_.load(std::memory_order_relaxed); }
  // How many collectives of communicator `id` this rank has begun (NextSeq
  // took their numbers).
  std::uint64_t SeqsTaken(std::uint32_t id) const {
    return id < LedgerMemory::kComms ? next_[id].load(std::memory_order_relaxed)
                                     : 0;
  }

  // Records an operation that starts now; returns its index for End().
  struct Call {
    LedgerOp op;
    DataType type;
    ReduceOp reduce;
    std::uint64_t count;
    std::int32_t peer;
    std::uint32_t tag;
    // Allgatherv: every rank's count (read in Begin only).
    const std::size_t* counts = nullptr;
    std::size_t ranks = 0;
    bool nonblocking = false;  // isend, irecv and their waits.
  };
  std::uint64_t Begin(std::uint32_t comm, std::uint64_t seq, const Call& call,
                      const CallSite& where);
  void End(std::uint64_t index, LedgerState state);
  // The calling thread waits in the call of entry `index` (a blocking
  // send, receive, wait or collective), for at most `timeout`, until
  // Unblock(): a reader that sees ranks wait on each other so, and none
  // move, sees a deadlock.
  void Block(std::uint64_t index, std::chrono::milliseconds timeout);
  void Unblock();
  // The calling thread waits to make a communicator, for at most
  // `timeout`, until EndMaking(): until the ranks that make it with it have
  // come. `identity`: what those ranks give alike (its store's scope,
  // prefix and size); `name` for reports; `rank` of `size`, this rank's.
  // A reader that sees every rank that could come finished, or waiting on
  // others that wait, sees that none will. Only in the test's code, one at a
  // time: false when not noted (then no EndMaking()).
  bool BeginMaking(std::string_view identity, std::string_view name, int rank,
                   int size, std::chrono::milliseconds timeout,
                   const CallSite& where);
  void EndMaking();
  // Adds a collective that returned to its communicator's digest.
  void Digest(std::uint32_t comm, const Call& call);
  // Adds a send or receive that returned, message number `seq` of its pair
  // (NextInPair) and this rank's rank `rank` there, to its communicator's
  // transfers; one that did not return (TransferFailed) is counted apart.
  void Transferred(std::uint32_t comm, int rank, const Call& call,
                   std::uint64_t seq);
  void TransferFailed(std::uint32_t comm);
  // This process's newest operation, when it is a collective it is in.
  std::optional<LedgerRecord> OpenCollective() const {
    return memory_->OpenCollective(slot_);
  }
  // The name, key and size of communicator `id` (size 0: not known), and
  // this rank's rank there (-1: not known).
  std::string comm_name(std::uint32_t id) const;
  std::uint64_t comm_key(std::uint32_t id) const;
  int comm_size(std::uint32_t id) const;
  int comm_rank(std::uint32_t id) const;
  // This process's ledger now, labelled rank `as_rank`.
  RankLedgerView Read(int as_rank) const {
    return memory_->Read(slot_, as_rank);
  }
  // Every rank's ledgers, this one among them, and which is this one's.
  const LedgerMemory& memory() const { return *memory_; }
  int slot() const { return slot_; }
  const std::shared_ptr<LedgerMemory>& shared_memory() const { return memory_; }

 private:
  Ledger(std::shared_ptr<LedgerMemory> memory, int slot);
  static void NoteCaller(LedgerMemory::Area& a);
  static std::atomic<Ledger*> current_;
  static thread_local Ledger* thread_current_;

  std::shared_ptr<LedgerMemory> memory_;
  int slot_;
  LedgerMemory::Area* area_;
  std::size_t ring_;
  std::atomic<std::uint8_t> phase_{0};
  std::atomic<std::uint32_t> comms_{0};
  std::mutex add_mu_;  // Threads may make communicators at once.
  std::vector<std::uint32_t> released_;  // Under add_mu_.
  std::vector<std::uint32_t> free_;      // Under add_mu_.
  std::array<std::atomic<std::uint64_t>, LedgerMemory::kComms> next_{};
  // NextInPair's numbers, by communicator, direction, peer and tag (in one
  // word); this test's.
  std::mutex pairs_mu_;
  std::unordered_map<std::uint64_t, std::uint64_t> pairs_;  // Under it.
};

// Why a collective that timed out did not complete, from the ranks'
// ledgers: the ranks other than `self` that have not entered collective
// #`seq` of the communicator of key `key`, and what each did last on it, as
// the host arena says it: "waiting for ranks 2-3: rank 2's last collective
// was #1 broadcast(16 x int32, root 0); rank 3 has entered no collective".
// "" when every rank entered it, or no other can be read. `every_rank`:
// every rank of `memory` is one of the communicator's (else only those that
// made it are counted).
std::string MissingFromCollective(const LedgerMemory& memory, int self,
                                  std::uint64_t key, std::uint64_t seq,
                                  bool every_rank);

// Where the rank that is rank `peer` of the communicator of key `key` is,
// for a send or receive of rank `self` that timed out: "rank 3 (rank 1
// there) is in allreduce(8 x float32, sum) at model_test.cc:42, for 2700
// ms", "rank 1 has finished its test", ...; "" when no ledger names it.
std::string WhereIsPeer(const LedgerMemory& memory, int self, std::uint64_t key,
                        int peer);

// An allgatherv's counts, from the first of `ranks` (at most four of
// them): "{8, 8, 4, 4}", "{8, 8, 4, 4, ...} (16 ranks, #1f2e3d4c)"; only
// "#1f2e3d4c" (their hash) when none is known.
std::string CountsText(const std::uint64_t* first, std::uint64_t ranks,
                       std::uint32_t hash);

// `name` cut to at most `most` bytes at a word's end, with " ..." (a
// communicator's name as the ledger keeps it).
std::string ShortName(std::string_view name, std::size_t most);

// A communicator's key in the ledger, from what identifies it across the
// ranks (64-bit FNV-1a; 0 is never returned).
std::uint64_t LedgerKey(std::string_view identity);

// A view as text, for a rank whose reader is on another host (a launched
// job's rank 0): its last `last` records of the test, its phases and
// communicator names, every time as an age at `view.read_ns` (hosts' clocks
// differ). DecodeLedger gives it back with read_ns 0 (times before it
// negative), or nullopt, saying why in `error`, for anything else.
std::string EncodeLedger(const RankLedgerView& view, std::size_t last = 16);
std::optional<RankLedgerView> DecodeLedger(std::string_view text,
                                           std::string* error = nullptr);

// Moves a decoded view's times onto this process's CLOCK_MONOTONIC, by the
// wall clock of its read (exact on one host; as close as the hosts' clocks
// across hosts). Nothing when its read's wall time is not known.
void OnThisClock(RankLedgerView* view);

// CLOCK_MONOTONIC now, in nanoseconds: the clock of every ledger time.
std::int64_t MonotonicNs();
// CLOCK_REALTIME now, in nanoseconds.
std::int64_t RealtimeNs();

// What the ranks that make one communicator give alike: its store's
// scope, the prefix of its keys there, and its size (Communicator::
// SetName).
std::string CommunicatorIdentity(std::string_view store_scope,
                                 std::string_view prefix, int size);
// Its name in reports: `name`, else from its prefix.
std::string CommunicatorName(std::string_view name, std::string_view prefix);

// The calling thread's rank waits to make a communicator while this lives
// (Ledger::BeginMaking), where it has a ledger of its own: one of `size`
// ranks that meet under `prefix` in a store of scope `store_scope`.
class MakingCommunicator {
 public:
  MakingCommunicator(std::string_view store_scope, std::string_view prefix,
                     std::string_view name, int rank, int size,
                     std::chrono::milliseconds timeout, const CallSite& where);
  ~MakingCommunicator();
  MakingCommunicator(const MakingCommunicator&) = delete;
  MakingCommunicator& operator=(const MakingCommunicator&) = delete;

 private:
  Ledger* ledger_ = nullptr;
};

// This process's rank has reached `phase` (nothing without a ledger).
inline void EnterPhase(RankPhase phase) {
  if (Ledger* ledger = Ledger::Current()) ledger->Enter(phase);
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_LEDGER_H_
