// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/ledger.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>

#include "disttest/error.h"

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
  char file[LedgerMemory::kFileBytes] = {};
};
static_assert(sizeof(Entry) == 128, "a ledger entry is two cache lines");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free,
              "the ledger's atomics must work across processes");

struct LedgerMemory::Area {
  alignas(64) std::atomic<std::uint64_t> written{0};  // Entries begun.
  std::atomic<std::uint64_t> test_first{0};           // The test's first entry.
  std::atomic<std::int64_t> phase_ns[kPhases] = {};
  std::atomic<std::uint32_t> named{0};  // Names written (≤ kNamedComms).
  char names[kNamedComms][kNameBytes] = {};
  Entry entries[kRing];
};

namespace {

std::mutex& InstallMutex() {
  static std::mutex mu;
  return mu;
}

// Ledgers replaced by a later Install(): a communicator may still hold one.
std::vector<std::unique_ptr<Ledger>>& Retired() {
  static auto* retired = new std::vector<std::unique_ptr<Ledger>>;
  return *retired;
}

}  // namespace

std::atomic<Ledger*> Ledger::current_{nullptr};

std::int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* Name(RankPhase phase) {
  switch (phase) {
    case RankPhase::kStarted:
      return "started";
    case RankPhase::kConnecting:
      return "connecting";
    case RankPhase::kConnected:
      return "connected";
    case RankPhase::kSetUp:
      return "set-up";
    case RankPhase::kBody:
      return "body";
    case RankPhase::kTearDown:
      return "tear-down";
    case RankPhase::kFinished:
      return "finished";
  }
  return "unknown";
}

std::string LedgerRecord::str() const {
  switch (op) {
    case LedgerOp::kBarrier:
      return "barrier()";
    case LedgerOp::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case LedgerOp::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         peer);
    case LedgerOp::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case LedgerOp::kSend:
      return fmt::format("send({} x {} to rank {}, tag {})", count, Name(type),
                         peer, tag);
    case LedgerOp::kRecv:
      return fmt::format("recv({} x {} from rank {}, tag {})", count,
                         Name(type), peer, tag);
  }
  return "unknown operation";
}

std::string LedgerRecord::where() const {
  if (harness) return "(disttest's, before the body)";
  const std::size_t slash = file.rfind('/');
  return fmt::format("at {}:{}",
                     slash == std::string::npos ? file : file.substr(slash + 1),
                     line);
}

bool LedgerRecord::SameCall(const LedgerRecord& o) const {
  if (op != o.op) return false;
  switch (op) {
    case LedgerOp::kBarrier:
      return true;
    case LedgerOp::kAllReduce:
      return type == o.type && count == o.count && reduce == o.reduce;
    case LedgerOp::kBroadcast:
      return type == o.type && count == o.count && peer == o.peer;
    default:
      return type == o.type && count == o.count;
  }
}

RankPhase RankLedgerView::phase() const {
  for (std::size_t p = kPhases; p-- > 0;) {
    if (phase_ns[p] != 0) return static_cast<RankPhase>(p);
  }
  return RankPhase::kStarted;
}

std::string RankLedgerView::comm_name(std::uint32_t id) const {
  if (id < comms.size() && !comms[id].empty()) return comms[id];
  return fmt::format("communicator {}", id + 1);
}

// --- memory ------------------------------------------------------------

std::size_t LedgerMemory::SizeFor(int ranks) {
  return sizeof(Area) * static_cast<std::size_t>(ranks);
}

std::shared_ptr<LedgerMemory> LedgerMemory::Create(int ranks) {
  if (ranks < 1 || ranks > kMaxRanks) {
    throw Error(fmt::format("a collective ledger takes 1 to {} ranks, not {}",
                            kMaxRanks, ranks));
  }
  const std::size_t size = SizeFor(ranks);
  int fd = memfd_create("disttest-ledger", MFD_CLOEXEC);
  if (fd >= 0 && fd <= STDERR_FILENO) {
    // A process started without stdin: a rank's stdio would replace it.
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(fd);
    fd = moved;
  }
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    fd = -1;
  }
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, fd, 0);
  if (memory == MAP_FAILED) {
    const int error = errno;
    if (fd >= 0) close(fd);
    throw Error(fmt::format("cannot map a collective ledger of {} bytes: {}",
                            size, std::strerror(error)));
  }
  // Fresh pages are zero, which is an empty ledger: nothing to write, and
  // the pages no rank touches cost nothing.
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, fd, memory, size));
}

std::shared_ptr<LedgerMemory> LedgerMemory::Attach(int fd, int ranks) {
  struct stat st {};
  const bool valid = ranks >= 1 && ranks <= kMaxRanks;
  const std::size_t size = valid ? SizeFor(ranks) : 0;
  if (!valid || fstat(fd, &st) != 0 ||
      static_cast<std::size_t>(st.st_size) != size) {
    close(fd);
    throw Error(fmt::format(
        "descriptor {} is not a collective ledger for {} ranks ({} bytes)", fd,
        ranks, size));
  }
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (memory == MAP_FAILED) {
    throw Error(
        fmt::format("cannot map the collective ledger (descriptor {}): {}", fd,
                    std::strerror(error)));
  }
  return std::shared_ptr<LedgerMemory>(
      new LedgerMemory(ranks, -1, memory, size));
}

LedgerMemory::LedgerMemory(int ranks, int fd, void* memory, std::size_t size)
    : ranks_(ranks), fd_(fd), memory_(memory), size_(size) {}

LedgerMemory::~LedgerMemory() {
  munmap(memory_, size_);
  if (fd_ >= 0) close(fd_);
}

LedgerMemory::Area& LedgerMemory::area(int rank) const {
  return static_cast<Area*>(memory_)[rank];
}

RankLedgerView LedgerMemory::Read(int rank, int as_rank) const {
  RankLedgerView view;
  view.rank = as_rank;
  if (rank < 0 || rank >= ranks_) return view;
  const Area& a = area(rank);
  view.read_ns = MonotonicNs();
  for (std::size_t p = 0; p < kPhases; ++p) {
    view.phase_ns[p] = a.phase_ns[p].load(std::memory_order_acquire);
  }
  const std::uint32_t named = std::min<std::uint32_t>(
      a.named.load(std::memory_order_acquire), kNamedComms);
  for (std::uint32_t i = 0; i < named; ++i) {
    view.comms.emplace_back(a.names[i], strnlen(a.names[i], kNameBytes));
  }
  const std::uint64_t written = a.written.load(std::memory_order_acquire);
  const std::uint64_t first =
      std::min(written, a.test_first.load(std::memory_order_acquire));
  const std::uint64_t from =
      std::max(first, written > kRing ? written - kRing : 0);
  view.dropped = from - first;
  for (std::uint64_t i = from; i < written; ++i) {
    const Entry& e = a.entries[i % kRing];
    const std::uint64_t stamp = e.stamp.load(std::memory_order_acquire);
    if (stamp != i + 1) continue;  // Being written, or written over.
    LedgerRecord r;
    r.index = i;
    r.state = static_cast<LedgerState>(e.state.load(std::memory_order_acquire));
    r.ended_ns = e.ended_ns.load(std::memory_order_relaxed);
    r.seq = e.seq;
    r.count = e.count;
    r.entered_ns = e.entered_ns;
    r.comm = e.comm;
    r.tag = e.tag;
    r.line = e.line;
    r.peer = e.peer;
    r.op = static_cast<LedgerOp>(e.op);
    r.type = static_cast<DataType>(e.type);
    r.reduce = static_cast<ReduceOp>(e.reduce);
    r.harness = e.harness != 0;
    r.file.assign(e.file, strnlen(e.file, kFileBytes));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.stamp.load(std::memory_order_relaxed) != stamp) continue;
    if (r.state != LedgerState::kEntered &&
        r.state != LedgerState::kCompleted && r.state != LedgerState::kFailed) {
      continue;
    }
    view.records.push_back(std::move(r));
  }
  return view;
}

// --- the rank's side ---------------------------------------------------

void Ledger::Install(std::shared_ptr<LedgerMemory> memory, int slot) {
  if (memory == nullptr || slot < 0 || slot >= memory->ranks()) {
    throw Error(fmt::format("no ledger area {} to install", slot));
  }
  std::lock_guard<std::mutex> lock(InstallMutex());
  auto* ledger = new Ledger(std::move(memory), slot);
  Ledger* old = current_.exchange(ledger, std::memory_order_acq_rel);
  if (old != nullptr) Retired().emplace_back(old);
}

Ledger::Ledger(std::shared_ptr<LedgerMemory> memory, int slot)
    : memory_(std::move(memory)), area_(&memory_->area(slot)) {
  comms_ = area_->named.load(std::memory_order_relaxed);
}

void Ledger::BeginTest() {
  area_->test_first.store(area_->written.load(std::memory_order_relaxed),
                          std::memory_order_release);
  for (auto& p : area_->phase_ns) p.store(0, std::memory_order_relaxed);
  phase_.store(0, std::memory_order_relaxed);
  Enter(RankPhase::kStarted);
}

void Ledger::Enter(RankPhase phase) {
  phase_.store(static_cast<std::uint8_t>(phase), std::memory_order_relaxed);
  area_->phase_ns[static_cast<std::size_t>(phase)].store(
      MonotonicNs(), std::memory_order_release);
}

std::uint32_t Ledger::AddCommunicator(std::string_view name) {
  const std::uint32_t id = comms_.fetch_add(1, std::memory_order_relaxed);
  if (id < LedgerMemory::kNamedComms) {
    char* out = area_->names[id];
    const std::size_t n = std::min(name.size(), LedgerMemory::kNameBytes - 1);
    std::memcpy(out, name.data(), n);
    out[n] = '\0';
    area_->named.store(id + 1, std::memory_order_release);
  }
  return id;
}

std::uint64_t Ledger::Begin(std::uint32_t comm, std::uint64_t seq,
                            const Call& call,
                            const std::source_location& where) {
  LedgerMemory::Area& a = *area_;
  const std::uint64_t index = a.written.fetch_add(1, std::memory_order_relaxed);
  Entry& e = a.entries[index % LedgerMemory::kRing];
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
  e.line = where.line();
  const char* file = where.file_name();
  std::size_t n = std::strlen(file);
  if (n >= LedgerMemory::kFileBytes) {
    file += n - (LedgerMemory::kFileBytes - 1);
    n = LedgerMemory::kFileBytes - 1;
  }
  std::memcpy(e.file, file, n);
  e.file[n] = '\0';
  e.ended_ns.store(0, std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(LedgerState::kEntered),
                std::memory_order_relaxed);
  e.entered_ns = MonotonicNs();
  e.stamp.store(index + 1, std::memory_order_release);
  return index;
}

void Ledger::End(std::uint64_t index, LedgerState state) {
  Entry& e = area_->entries[index % LedgerMemory::kRing];
  // Written over already (kRing later operations of other threads): the
  // ring has its end no longer.
  if (e.stamp.load(std::memory_order_relaxed) != index + 1) return;
  e.ended_ns.store(MonotonicNs(), std::memory_order_relaxed);
  e.state.store(static_cast<std::uint8_t>(state), std::memory_order_release);
}

}  // namespace disttest::internal
