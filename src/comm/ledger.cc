// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The rank's side of the ledger (comm/ledger.h): installing it, writing the
// rank's phases, communicators and operations into its area, the clocks of
// its times and its communicators' keys. The records' text, the analysis,
// the text form and the memory are in ledger_*.cc.
#include "comm/ledger.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "base/threads.h"
#include "comm/ledger_area.h"
#include "disttest/comm/comm_options.h"
#include "disttest/error.h"

namespace disttest::internal {

namespace {

std::mutex& InstallMutex() {
  static std::mutex mu;
  return mu;
}

// The last bytes of `text` that fit `bytes` with a NUL, into `to`.
void CopyTail(std::string_view text, char* to, std::size_t bytes) {
  if (text.size() >= bytes) text.remove_prefix(text.size() - (bytes - 1));
  std::memcpy(to, text.data(), text.size());
  to[text.size()] = '\0';
}

// Ledgers replaced by a later Install(): a communicator may still hold one.
std::vector<std::unique_ptr<Ledger>>& Retired() {
  static auto* retired = new std::vector<std::unique_ptr<Ledger>>;
  return *retired;
}

}  // namespace

std::atomic<Ledger*> Ledger::current_{nullptr};
thread_local Ledger* Ledger::thread_current_ = nullptr;

std::int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

struct Numbers {
  std::multiset<std::uint64_t> alive;
  std::uint64_t next = 0;
};

std::mutex& NumbersMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}

// "<rank thread>\n<identity>": its numbers.
std::map<std::string, Numbers>& AllNumbers() {
  static auto* all = new std::map<std::string, Numbers>;
  return *all;
}

}  // namespace

std::uint64_t TakeCommunicatorNumber(const std::string& identity,
                                     std::string* numbered_as) {
  *numbered_as = fmt::format("{}\n{}", ThreadsRank(), identity);
  std::lock_guard<std::mutex> lock(NumbersMutex());
  Numbers& n = AllNumbers()[*numbered_as];
  n.alive.insert(n.next);
  return n.next++;
}

std::uint64_t PeekCommunicatorNumber(const std::string& identity) {
  std::lock_guard<std::mutex> lock(NumbersMutex());
  const auto it =
      AllNumbers().find(fmt::format("{}\n{}", ThreadsRank(), identity));
  return it == AllNumbers().end() ? 0 : it->second.next;
}

void GiveCommunicatorNumberBack(const std::string& numbered_as,
                                std::uint64_t number) {
  std::lock_guard<std::mutex> lock(NumbersMutex());
  auto it = AllNumbers().find(numbered_as);
  if (it == AllNumbers().end()) return;
  auto alive = it->second.alive.find(number);
  if (alive != it->second.alive.end()) it->second.alive.erase(alive);
}

void RestartCommunicatorNumbers() {
  const std::string mine = fmt::format("{}\n", ThreadsRank());
  std::lock_guard<std::mutex> lock(NumbersMutex());
  std::map<std::string, Numbers>& all = AllNumbers();
  for (auto it = all.lower_bound(mine);
       it != all.end() && it->first.compare(0, mine.size(), mine) == 0;) {
    Numbers& n = it->second;
    if (n.alive.empty()) {
      it = all.erase(it);
      continue;
    }
    n.next = *n.alive.rbegin() + 1;
    ++it;
  }
}

std::uint64_t LedgerKey(std::string_view identity) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : identity) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h == 0 ? 1 : h;
}

void Ledger::Install(std::shared_ptr<LedgerMemory> memory, int slot) {
  if (memory == nullptr || slot < 0 || slot >= memory->ranks()) {
    throw Error(fmt::format("no ledger area {} to install", slot));
  }
  std::lock_guard<std::mutex> lock(InstallMutex());
  auto* ledger = new Ledger(std::move(memory), slot);
  Ledger* old = current_.exchange(ledger, std::memory_order_acq_rel);
  if (old != nullptr) Retired().emplace_back(old);
}

void Ledger::InstallForThread(std::shared_ptr<LedgerMemory> memory, int slot) {
  if (memory == nullptr || slot < 0 || slot >= memory->ranks()) {
    throw Error(fmt::format("no ledger area {} to install", slot));
  }
  std::lock_guard<std::mutex> lock(InstallMutex());
  auto* ledger = new Ledger(std::move(memory), slot);
  // Kept: the thread's communicators may outlive it.
  Retired().emplace_back(ledger);
  thread_current_ = ledger;
}

void Ledger::NoteEndedProcess(int how) {
  if (Ledger* mine = thread_current_) {
    mine->area_->ended_process.store(how, std::memory_order_release);
  }
}

Ledger::Ledger(std::shared_ptr<LedgerMemory> memory, int slot)
    : memory_(std::move(memory)),
      slot_(slot),
      area_(&memory_->area(slot)),
      ring_(memory_->ring()) {
  comms_ = area_->named.load(std::memory_order_relaxed);
  area_->pid.store(static_cast<std::int32_t>(getpid()),
                   std::memory_order_release);
  area_->tid.store(static_cast<std::int32_t>(gettid()),
                   std::memory_order_release);
}

void Ledger::BeginTest() {
  {
    // The ids of communicators that are gone are free now: no entry of
    // this test names them.
    std::lock_guard<std::mutex> lock(add_mu_);
    for (const std::uint32_t id : released_) {
      area_->keys[id] = 0;
      area_->names[id][0] = '\0';
      next_[id].store(0, std::memory_order_relaxed);
      free_.push_back(id);
    }
    released_.clear();
  }
  RestartCommunicatorNumbers();
  area_->test_first.store(area_->written.load(std::memory_order_relaxed),
                          std::memory_order_release);
  for (auto& p : area_->phase_ns) p.store(0, std::memory_order_relaxed);
  area_->blocked.store(0, std::memory_order_relaxed);
  // No thread of the last test makes one now (a child forked in it that
  // died making one left it odd).
  if (const std::uint64_t making =
          area_->making.load(std::memory_order_relaxed);
      (making & 1) != 0) {
    area_->making.store(making + 1, std::memory_order_release);
  }
  area_->caller.store(0, std::memory_order_relaxed);
  area_->threads.store(0, std::memory_order_relaxed);
  // Only the ids ever named can hold a count (a few pages at most).
  const std::uint32_t named = std::min<std::uint32_t>(
      area_->named.load(std::memory_order_relaxed), LedgerMemory::kComms);
  for (std::uint32_t i = 0; i < named; ++i) {
    area_->calls[i].store(0, std::memory_order_relaxed);
    area_->digest[i].store(0, std::memory_order_relaxed);
    area_->transfers[i].store(0, std::memory_order_relaxed);
    area_->balance[i].store(0, std::memory_order_relaxed);
    area_->transfers_failed[i].store(0, std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lock(pairs_mu_);
    pairs_.clear();
  }
  phase_.store(0, std::memory_order_relaxed);
  Enter(RankPhase::kStarted);
}

void Ledger::Enter(RankPhase phase) {
  phase_.store(static_cast<std::uint8_t>(phase), std::memory_order_relaxed);
  area_->phase_ns[static_cast<std::size_t>(phase)].store(
      MonotonicNs(), std::memory_order_release);
}

std::uint32_t Ledger::AddCommunicator(std::string_view name, std::uint64_t key,
                                      int rank, int size) {
  std::lock_guard<std::mutex> lock(add_mu_);
  LedgerMemory::Area& a = *area_;
  const std::uint32_t known = comms_.load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; key != 0 && i < known && i < LedgerMemory::kComms;
       ++i) {
    if (a.keys[i] == key) return i;
  }
  std::uint32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = comms_.fetch_add(1, std::memory_order_relaxed);
  }
  if (id < LedgerMemory::kComms) {
    char* out = a.names[id];
    const std::string kept = ShortName(name, LedgerMemory::kNameBytes - 1);
    const std::size_t n = kept.size();
    std::memcpy(out, kept.data(), n);
    out[n] = '\0';
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';  // One line of text.
    }
    a.keys[id] = key;
    a.comm_rank[id] = rank;
    a.comm_size[id] = size;
    if (id >= a.named.load(std::memory_order_relaxed)) {
      a.named.store(id + 1, std::memory_order_release);
    }
  }
  return id;
}

void Ledger::Release(std::uint32_t id) {
  if (id >= LedgerMemory::kComms) return;
  std::lock_guard<std::mutex> lock(add_mu_);
  if (std::find(released_.begin(), released_.end(), id) == released_.end()) {
    released_.push_back(id);
  }
}

std::string Ledger::comm_name(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  if (id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                   LedgerMemory::kComms)) {
    return std::string(a.names[id],
                       strnlen(a.names[id], LedgerMemory::kNameBytes));
  }
  return fmt::format("communicator {}", id + 1);
}

std::uint64_t Ledger::comm_key(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  return id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                      LedgerMemory::kComms)
             ? a.keys[id]
             : 0;
}

int Ledger::comm_size(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  return id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                      LedgerMemory::kComms)
             ? a.comm_size[id]
             : 0;
}

int Ledger::comm_rank(std::uint32_t id) const {
  const LedgerMemory::Area& a = *area_;
  return id < std::min<std::uint32_t>(a.named.load(std::memory_order_acquire),
                                      LedgerMemory::kComms)
             ? a.comm_rank[id]
             : -1;
}

namespace {
// A number of the calling thread's own, never 0, distinct from every other
// thread's of the process (a forked child's go on from its parent's).
std::int32_t ThisThread() {
  static std::atomic<std::int32_t> threads{0};
  thread_local const std::int32_t id =
      threads.fetch_add(1, std::memory_order_relaxed) + 1;
  return id;
}
}  // namespace

// The first thread to call in a test is its caller; another one marks the
// rank as calling from several threads. A load and a compare a call.
void Ledger::NoteCaller(LedgerMemory::Area& a) {
  const std::int32_t me = ThisThread();
  std::int32_t caller = a.caller.load(std::memory_order_relaxed);
  if (caller == me) return;
  if (caller == 0 &&
      a.caller.compare_exchange_strong(caller, me, std::memory_order_relaxed)) {
    return;
  }
  if (caller != me) a.threads.store(1, std::memory_order_relaxed);
}

std::uint64_t Ledger::Begin(std::uint32_t comm, std::uint64_t seq,
                            const Call& call, const CallSite& where) {
  LedgerMemory::Area& a = *area_;
  const std::uint64_t index = a.written.fetch_add(1, std::memory_order_relaxed);
  Entry& e = EntriesOf(a)[index % ring_];
  e.stamp.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.seq = seq;
  e.count = call.count;
  e.comm = comm;
  e.tag = call.tag;
  e.peer = call.peer;
  e.op = static_cast<std::uint8_t>(call.op);
  e.type = static_cast<std::uint8_t>(call.type);
  e.reduce = static_cast<std::uint8_t>(call.reduce);
  const auto phase =
      static_cast<RankPhase>(phase_.load(std::memory_order_relaxed));
  e.harness = phase < RankPhase::kSetUp || phase == RankPhase::kFinished;
  if (e.harness == 0) NoteCaller(a);
  e.nonblocking = call.nonblocking ? 1 : 0;
  e.line = where.line();
  e.ranks =
      static_cast<std::uint16_t>(std::min<std::size_t>(call.ranks, 65535));
  for (std::size_t i = 0; i < LedgerMemory::kCountsKept; ++i) {
    e.counts[i] = i < call.ranks && call.counts != nullptr
                      ? static_cast<std::uint32_t>(
                            std::min<std::size_t>(call.counts[i], UINT32_MAX))
                      : 0;
  }
  CopyTail(where.file_name(), e.file, LedgerMemory::kFileBytes);
  e.ended_ns.store(0, std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(LedgerState::kEntered),
                std::memory_order_relaxed);
  e.entered_ns = MonotonicNs();
  e.stamp.store(index + 1, std::memory_order_release);
  return index;
}

void Ledger::Block(std::uint64_t index, std::chrono::milliseconds timeout) {
  // A thread that only waits (a Request's wait() or destructor makes no new
  // entry) is a caller too.
  NoteCaller(*area_);
  // No clock read: the reader bounds when the call began by its looks.
  area_->blocked_timeout_ms.store(timeout.count(), std::memory_order_relaxed);
  area_->blocked.store(index + 1, std::memory_order_release);
}

void Ledger::Unblock() { area_->blocked.store(0, std::memory_order_release); }

bool Ledger::BeginMaking(std::string_view identity, std::string_view name,
                         int rank, int size, std::chrono::milliseconds timeout,
                         const CallSite& where) {
  if (!InTheTestsCode(
          static_cast<RankPhase>(phase_.load(std::memory_order_relaxed)))) {
    return false;  // The harness's own (the world communicator).
  }
  std::lock_guard<std::mutex> lock(add_mu_);
  LedgerMemory::Area& a = *area_;
  // A second thread that makes one is a second caller too: the rank is
  // then never judged.
  NoteCaller(a);
  const std::uint64_t making = a.making.load(std::memory_order_relaxed);
  if ((making & 1) != 0) return false;  // Another thread makes one.
  std::atomic_thread_fence(std::memory_order_release);
  // The key the communicator will have once made (Communicator::SetName
  // numbers it so): a rank whose ledger has it has come and gone.
  a.making_key = LedgerKey(fmt::format(
      "{}\n{}", identity, PeekCommunicatorNumber(std::string(identity))));
  a.making_pid = getpid();
  a.making_rank = rank;
  a.making_size = size;
  a.making_ns = MonotonicNs();
  // A timeout shorter than a communicator's own may be one the test waits
  // out on purpose (as Recorded's shortened calls): 0, never judged.
  a.making_timeout_ms = timeout < CommOptions{}.timeout
                            ? 0
                            : static_cast<std::int64_t>(timeout.count());
  a.making_line = where.line();
  CopyTail(where.file_name(), a.making_file, LedgerMemory::kFileBytes);
  const std::string kept = ShortName(name, LedgerMemory::kNameBytes - 1);
  std::memcpy(a.making_name, kept.c_str(), kept.size() + 1);
  a.making.store(making + 1, std::memory_order_release);
  return true;
}

void Ledger::EndMaking() {
  std::lock_guard<std::mutex> lock(add_mu_);
  area_->making.fetch_add(1, std::memory_order_release);
}

std::string CommunicatorIdentity(std::string_view store_scope,
                                 std::string_view prefix, int size) {
  return fmt::format("{}{}/{}\n", store_scope, prefix, size);
}

std::string CommunicatorName(std::string_view name, std::string_view prefix) {
  return !name.empty()    ? std::string(name)
         : prefix.empty() ? std::string("unnamed communicator")
                          : fmt::format("communicator \"{}\"", prefix);
}

MakingCommunicator::MakingCommunicator(std::string_view store_scope,
                                       std::string_view prefix,
                                       std::string_view name, int rank,
                                       int size,
                                       std::chrono::milliseconds timeout,
                                       const CallSite& where) {
  // A thread that no rank runs, where the ranks are threads, is refused
  // (Communicator::SetName): it notes nothing.
  if (RanksAreThreads() && ThreadsRank() < 0) return;
  Ledger* ledger = Ledger::Current();
  if (ledger != nullptr &&
      ledger->BeginMaking(CommunicatorIdentity(store_scope, prefix, size),
                          CommunicatorName(name, prefix), rank, size, timeout,
                          where)) {
    ledger_ = ledger;
  }
}

MakingCommunicator::~MakingCommunicator() {
  if (ledger_ != nullptr) ledger_->EndMaking();
}

void Ledger::Digest(std::uint32_t comm, const Call& call) {
  if (comm >= LedgerMemory::kComms) return;
  // Only this thread writes a communicator's digest (one communicator is
  // not used from two threads at once).
  LedgerMemory::Area& a = *area_;
  const std::uint64_t h =
      a.digest[comm].load(std::memory_order_relaxed) ^ CallHash(call);
  a.digest[comm].store(h * 0x100000001b3ULL, std::memory_order_relaxed);
  a.calls[comm].fetch_add(1, std::memory_order_release);
}

std::uint64_t Ledger::NextInPair(std::uint32_t id, bool send, int peer,
                                 std::uint32_t tag) {
  // id < kComms (10 bits), the direction, the peer (21 bits: a launched
  // job may have more ranks than a spawned one; one out of range fails its
  // call, which TransferFailed marks), the tag.
  const std::uint64_t which =
      (std::uint64_t{id} << 54) | (std::uint64_t{send} << 53) |
      (static_cast<std::uint64_t>(peer & 0x1fffff) << 32) | tag;
  std::lock_guard<std::mutex> lock(pairs_mu_);
  return pairs_[which]++;
}

void Ledger::Transferred(std::uint32_t comm, int rank, const Call& call,
                         std::uint64_t seq) {
  if (comm >= LedgerMemory::kComms) return;
  const bool send = call.op == LedgerOp::kSend;
  const std::uint64_t h = send ? MessageHash(rank, call.peer, call, seq)
                               : MessageHash(call.peer, rank, call, seq);
  // A rank's threads may send and receive on one communicator at once.
  LedgerMemory::Area& a = *area_;
  a.balance[comm].fetch_add(send ? h : 0 - h, std::memory_order_relaxed);
  a.transfers[comm].fetch_add(1, std::memory_order_release);
}

void Ledger::TransferFailed(std::uint32_t comm) {
  if (comm >= LedgerMemory::kComms) return;
  area_->transfers_failed[comm].fetch_add(1, std::memory_order_release);
}

void Ledger::End(std::uint64_t index, LedgerState state) {
  Entry& e = EntriesOf(*area_)[index % ring_];
  // Written over already (kRing later operations of other threads): the
  // ring has its end no longer.
  if (e.stamp.load(std::memory_order_relaxed) != index + 1) return;
  e.ended_ns.store(MonotonicNs(), std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(state), std::memory_order_release);
}

}  // namespace disttest::internal
