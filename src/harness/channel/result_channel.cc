// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The queue is a ring of slots in one shared-memory object (Boost.
// Interprocess's shared_memory_object and mapped_region), written by one rank
// and read by its parent, with no lock between them: the rank publishes a
// slot by advancing `tail` after the slot is whole, the parent frees it by
// advancing `head` after it has copied it. A rank killed at any instant
// (SIGKILL from a peer's SignalRank, the OOM killer, disttest's own
// deadline) therefore leaves every slot it published readable and no lock
// held. Boost's message_queue, used before, keeps a mutex in the segment: a
// rank killed while it held it left the parent waiting a second for the
// lock and then unable to read anything more the rank had sent
// (boostorg/interprocess#163, #226), so an expected kill failed its test.
//
// Threads of one rank send one at a time (a mutex in the rank's process,
// which dies with it). A rank that finds the ring full sleeps on a futex on
// `head` until its parent frees a slot or its deadline passes.
#include "harness/channel/result_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "disttest/error.h"
#include "harness/process/resources.h"

namespace disttest::internal {
namespace bip = boost::interprocess;

namespace {

// The segment: this header, then kCapacity slots.
struct QueueHeader {
  std::uint64_t magic;
  std::uint32_t capacity;
  std::uint32_t slot_bytes;
  // Slots taken by the reader so far (the parent writes it).
  alignas(64) std::atomic<std::uint32_t> head;
  // Slots published by the writer so far (the rank writes it).
  alignas(64) std::atomic<std::uint32_t> tail;
  // 1 while the writer may sleep on `head` for room.
  std::atomic<std::uint32_t> writer_waiting;
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// Says "a disttest result queue of this layout"; a change of the layout
// changes it.
constexpr std::uint64_t kQueueMagic = 0x6474'5265'7352'696eULL + 2;
constexpr std::size_t kHeaderStride = 256;
static_assert(sizeof(QueueHeader) <= kHeaderStride);

struct SlotHeader {
  std::uint32_t size;
};
constexpr std::size_t kSlotStride =
    (sizeof(SlotHeader) + ResultChannel::kMaxMessageBytes + 63) / 64 * 64;
constexpr std::size_t kSegmentBytes =
    kHeaderStride + ResultChannel::kCapacity * kSlotStride;
static_assert(kSegmentBytes <= ResultChannel::kQueueBytes);

// The futex calls on a word of the shared segment (not FUTEX_PRIVATE: the
// waiter and the waker are different processes).
int FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
              std::chrono::nanoseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  return static_cast<int>(syscall(SYS_futex,
                                  reinterpret_cast<std::uint32_t*>(word),
                                  FUTEX_WAIT, expected, &ts, nullptr, 0));
}

void FutexWakeAll(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE,
          INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

struct ResultChannel::Queue {
  // The mapping only: the object's descriptor is closed once it is mapped
  // (a parent of many ranks would otherwise hold one per rank, and copy
  // them all into every rank it forks).
  bip::mapped_region region;
  QueueHeader* header = nullptr;
  char* slots = nullptr;
  std::mutex send_mutex;  // Threads of the writing rank, one at a time.

  char* Slot(std::uint32_t index) {
    return slots + static_cast<std::size_t>(index % ResultChannel::kCapacity) *
                       kSlotStride;
  }
  // Publishes `n` bytes in the next slot, waiting until `deadline` for room.
  bool Put(const char* data, std::size_t n,
           std::chrono::steady_clock::time_point deadline);
};

bool ResultChannel::Queue::Put(const char* data, std::size_t n,
                               std::chrono::steady_clock::time_point deadline) {
  QueueHeader& h = *header;
  // Only this writer advances tail.
  const std::uint32_t tail = h.tail.load(std::memory_order_relaxed);
  for (;;) {
    std::uint32_t head = h.head.load(std::memory_order_acquire);
    if (tail - head < ResultChannel::kCapacity) break;
    // Full. Say so before looking again: the reader, after it frees a slot,
    // wakes the writer if the flag is set (or this look sees the slot).
    h.writer_waiting.store(1, std::memory_order_seq_cst);
    head = h.head.load(std::memory_order_seq_cst);
    if (tail - head < ResultChannel::kCapacity) break;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return false;
    // Returns at once if head moved since it was read.
    FutexWait(&h.head, head,
              std::chrono::duration_cast<std::chrono::nanoseconds>(left));
  }
  char* slot = Slot(tail);
  const SlotHeader sh{static_cast<std::uint32_t>(n)};
  std::memcpy(slot, &sh, sizeof sh);
  std::memcpy(slot + sizeof sh, data, n);
  h.tail.store(tail + 1, std::memory_order_release);
  return true;
}

ResultChannel::ResultChannel(std::string name, std::unique_ptr<Queue> queue)
    : name_(std::move(name)), queue_(std::move(queue)) {
  buffer_.resize(kMaxMessageBytes);
}

ResultChannel::~ResultChannel() = default;

namespace {

// Allocates the queue's pages in /dev/shm now: tmpfs allocates on first
// touch, and a touch that finds it full is a SIGBUS. Throws Error naming
// what was needed and what is free.
void Reserve(const std::string& name) {
  const std::string path = "/dev/shm/" + name;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;  // Not where Linux keeps it: nothing to reserve.
  struct stat st {};
  int rc = fstat(fd, &st) == 0 ? posix_fallocate(fd, 0, st.st_size) : errno;
  close(fd);
  // EOPNOTSUPP: a file system that cannot reserve; the queue still works.
  if (rc == 0 || rc == EOPNOTSUPP || rc == EINVAL) return;
  ResultChannel::Remove(name);
  struct statvfs fs {};
  const std::string free =
      statvfs("/dev/shm", &fs) == 0
          ? Bytes(static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize)
          : std::string("unknown");
  throw Error(fmt::format(
      "cannot reserve {} for result queue {} in /dev/shm ({} free): {}",
      Bytes(static_cast<std::size_t>(st.st_size)), path, free,
      std::strerror(rc)));
}

}  // namespace

std::unique_ptr<ResultChannel> ResultChannel::Create(const std::string& name) {
  Remove(name);
  try {
    auto queue = std::make_unique<Queue>();
    bip::shared_memory_object shm(bip::create_only, name.c_str(),
                                  bip::read_write, bip::permissions(0600));
    shm.truncate(static_cast<bip::offset_t>(kSegmentBytes));
    // Its pages exist before the header below touches them.
    Reserve(name);
    queue->region = bip::mapped_region(shm, bip::read_write);
    char* base = static_cast<char*>(queue->region.get_address());
    queue->header = new (base) QueueHeader{};
    queue->header->capacity = kCapacity;
    queue->header->slot_bytes = kMaxMessageBytes;
    queue->header->magic = kQueueMagic;
    queue->slots = base + kHeaderStride;
    return std::unique_ptr<ResultChannel>(
        new ResultChannel(name, std::move(queue)));
  } catch (const bip::interprocess_exception& e) {
    Remove(name);
    throw Error(fmt::format("cannot create result queue /dev/shm/{}: {}", name,
                            e.what()));
  }
}

std::unique_ptr<ResultChannel> ResultChannel::Open(const std::string& name) {
  auto queue = std::make_unique<Queue>();
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(),
                                  bip::read_write);
    bip::offset_t size = 0;
    if (!shm.get_size(size) ||
        size < static_cast<bip::offset_t>(kSegmentBytes)) {
      throw Error(fmt::format(
          "cannot open result queue /dev/shm/{}: it holds {} bytes, not the "
          "{} of a disttest result queue",
          name, static_cast<long long>(size), kSegmentBytes));
    }
    queue->region = bip::mapped_region(shm, bip::read_write, 0, kSegmentBytes);
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("cannot open result queue /dev/shm/{}: {}", name,
                            e.what()));
  }
  char* base = static_cast<char*>(queue->region.get_address());
  queue->header = reinterpret_cast<QueueHeader*>(base);
  queue->slots = base + kHeaderStride;
  if (queue->header->magic != kQueueMagic ||
      queue->header->capacity != kCapacity ||
      queue->header->slot_bytes != kMaxMessageBytes) {
    throw Error(fmt::format(
        "cannot open result queue /dev/shm/{}: it is not a result queue of "
        "this disttest (another version made it?)",
        name));
  }
  return std::unique_ptr<ResultChannel>(
      new ResultChannel(name, std::move(queue)));
}

namespace {
ResultChannel* g_inherited = nullptr;
}  // namespace

void ResultChannel::SetInherited(ResultChannel* channel) {
  g_inherited = channel;
}

ResultChannel* ResultChannel::Inherited() { return g_inherited; }

bool ResultChannel::Remove(const std::string& name) {
  return bip::shared_memory_object::remove(name.c_str());
}

namespace {

// A slot that starts with one of these (never a RankMessage kind) holds a
// part of a result too large for one slot: every part but the last, then
// the last.
constexpr char kPart = static_cast<char>(0xC0);
constexpr char kLastPart = static_cast<char>(0xC1);

}  // namespace

bool ResultChannel::Send(const RankMessage& m,
                         std::chrono::milliseconds timeout) {
  std::vector<char> bytes = EncodeRankMessage(m, kMaxResultBytes);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::lock_guard<std::mutex> lock(queue_->send_mutex);
  if (bytes.size() <= kMaxMessageBytes) {
    if (!queue_->Put(bytes.data(), bytes.size(), deadline)) return false;
  } else {
    std::vector<char> part;
    const std::size_t room = kMaxMessageBytes - 1;
    for (std::size_t at = 0; at < bytes.size(); at += room) {
      const std::size_t n = std::min(room, bytes.size() - at);
      part.assign(1, at + n == bytes.size() ? kLastPart : kPart);
      part.insert(part.end(), bytes.begin() + at, bytes.begin() + at + n);
      if (!queue_->Put(part.data(), part.size(), deadline)) return false;
      // The parent drains what came so far while the rest is sent.
      if (notify_fd_ >= 0) (void)!write(notify_fd_, "r", 1);
    }
  }
  if (notify_fd_ >= 0) (void)!write(notify_fd_, "r", 1);
  return true;
}

std::optional<RankMessage> ResultChannel::TryReceive(std::string* error) {
  QueueHeader& h = *queue_->header;
  for (;;) {
    // Only this reader advances head.
    const std::uint32_t head = h.head.load(std::memory_order_relaxed);
    const std::uint32_t tail = h.tail.load(std::memory_order_acquire);
    if (head == tail) {
      return std::nullopt;  // A large result's parts so far stay pending.
    }
    // The rank's memory is the rank's to scribble on: what it published is
    // checked before it is read, and never read outside the segment.
    if (tail - head > kCapacity) {
      *error = fmt::format(
          "result queue {} is corrupt: {} slots published, {} read, of {}",
          name_, tail, head, kCapacity);
      return std::nullopt;
    }
    const char* slot = queue_->Slot(head);
    SlotHeader sh{};
    std::memcpy(&sh, slot, sizeof sh);
    if (sh.size > kMaxMessageBytes) {
      *error = fmt::format(
          "result queue {} is corrupt: a slot says it holds {} bytes (at most "
          "{})",
          name_, sh.size, kMaxMessageBytes);
      return std::nullopt;
    }
    std::memcpy(buffer_.data(), slot + sizeof sh, sh.size);
    h.head.store(head + 1, std::memory_order_seq_cst);
    if (h.writer_waiting.exchange(0, std::memory_order_seq_cst) != 0) {
      FutexWakeAll(&h.head);
    }
    const char* data = buffer_.data();
    std::size_t size = sh.size;
    if (size > 0 && (data[0] == kPart || data[0] == kLastPart)) {
      if (pending_.size() + size - 1 > kMaxResultBytes + kMaxMessageBytes) {
        *error =
            fmt::format("result queue {} holds a result of more than {} bytes",
                        name_, kMaxResultBytes);
        return std::nullopt;
      }
      pending_.insert(pending_.end(), data + 1, data + size);
      if (data[0] == kPart) continue;
      data = pending_.data();
      size = pending_.size();
    } else if (!pending_.empty()) {
      *error = fmt::format(
          "result queue {}: a result ended without its last part", name_);
      return std::nullopt;
    }
    RankMessage m;
    const bool ok = DecodeRankMessage(data, size, &m, error);
    pending_.clear();
    if (!ok) return std::nullopt;
    return m;
  }
}

unsigned long long PidNamespace() {
  static const unsigned long long ns = [] {
    struct stat st {};
    return stat("/proc/self/ns/pid", &st) == 0
               ? static_cast<unsigned long long>(st.st_ino)
               : 0ULL;
  }();
  return ns;
}

std::vector<std::string> RemoveQueuesOfDeadProcesses() {
  std::vector<std::string> removed;
  const unsigned long long ours = PidNamespace();
  if (ours == 0) return removed;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "disttest-";
    if (name.rfind(kPrefix, 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), &end, 10);
    if (pid <= 0 || end == nullptr || std::strncmp(end, "-n", 2) != 0) {
      continue;
    }
    const unsigned long long ns = std::strtoull(end + 2, &end, 10);
    if (ns != ours || end == nullptr || *end != '-') continue;
    // EPERM means the process exists (another user's): leave it alone.
    if (pid == getpid() || kill(static_cast<pid_t>(pid), 0) == 0 ||
        errno != ESRCH) {
      continue;
    }
    if (ResultChannel::Remove(name)) removed.push_back(name);
  }
  return removed;
}

std::string ResultQueueName(int pid, int seq, const std::string& test,
                            int rank) {
  std::string clean;
  for (char c : test.substr(0, 80)) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
              c == '.' || c == '-';
    clean.push_back(ok ? c : '_');
  }
  unsigned long long random = 0;
  if (getrandom(&random, sizeof random, 0) != sizeof random) {
    // No entropy source (a seccomp filter): still unique to this process.
    static std::atomic<unsigned long long> counter{0};
    random = (static_cast<unsigned long long>(
                  std::chrono::steady_clock::now().time_since_epoch().count())
              << 8) ^
             ++counter;
  }
  return fmt::format("disttest-{}-n{}-{}-{:016x}-{}-r{}", pid, PidNamespace(),
                     seq, random, clean, rank);
}

}  // namespace disttest::internal
