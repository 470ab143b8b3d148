// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A rank killed while it holds the queue's mutex would block every later
// lock of it forever (boostorg/interprocess#163, #226). With this switch the
// lock gives up after the duration below and throws, which TryReceive turns
// into an error: the parent then relies on the exit status.
#define BOOST_INTERPROCESS_ENABLE_TIMEOUT_WHEN_LOCKING
#define BOOST_INTERPROCESS_TIMEOUT_WHEN_LOCKING_DURATION_MS 1000

#include "harness/result_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <boost/date_time/posix_time/posix_time_types.hpp>
#include <boost/interprocess/ipc/message_queue.hpp>
#include <boost/interprocess/permissions.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "disttest/error.h"
#include "harness/resources.h"

namespace disttest::internal {
namespace bip = boost::interprocess;

struct ResultChannel::Queue {
  template <typename... Args>
  explicit Queue(Args&&... args) : mq(std::forward<Args>(args)...) {}
  bip::message_queue mq;
};

namespace {

void PutU32(std::vector<char>* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->insert(out->end(), b, b + 4);
}

bool GetU32(const char*& p, const char* end, uint32_t* v) {
  if (end - p < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) {
    *v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  p += 4;
  return true;
}

bool GetString(const char*& p, const char* end, std::string* s) {
  uint32_t n = 0;
  if (!GetU32(p, end, &n) || static_cast<std::size_t>(end - p) < n) {
    return false;
  }
  s->assign(p, n);
  p += n;
  return true;
}

constexpr std::size_t kHeaderBytes = 1 + 4 + 4 + 4;

}  // namespace

std::vector<char> EncodeRankMessage(const RankMessage& m,
                                    std::size_t max_bytes) {
  // The file name takes at most a quarter of the room, the message the rest.
  std::string file =
      m.file.substr(0, std::min<std::size_t>(1024, max_bytes / 4));
  std::string message = m.message;
  std::size_t room = max_bytes > kHeaderBytes + file.size()
                         ? max_bytes - kHeaderBytes - file.size()
                         : 0;
  if (message.size() > room) {
    // The note is under 80 bytes whatever the numbers in it.
    constexpr std::size_t kNoteBytes = 80;
    if (room <= kNoteBytes) {
      message.clear();
    } else {
      std::size_t keep = room - kNoteBytes;
      message = fmt::format(
          "{}\n... [disttest: message truncated, {} of {} bytes shown]",
          message.substr(0, keep), keep, message.size());
    }
  }
  std::vector<char> out;
  out.reserve(kHeaderBytes + file.size() + message.size());
  out.push_back(static_cast<char>(m.kind));
  PutU32(&out, static_cast<uint32_t>(m.line));
  PutU32(&out, static_cast<uint32_t>(file.size()));
  out.insert(out.end(), file.begin(), file.end());
  PutU32(&out, static_cast<uint32_t>(message.size()));
  out.insert(out.end(), message.begin(), message.end());
  return out;
}

bool DecodeRankMessage(const char* data, std::size_t size, RankMessage* out,
                       std::string* error) {
  const char* p = data;
  const char* end = data + size;
  if (size < 1) {
    *error = "empty result message";
    return false;
  }
  auto kind = static_cast<uint8_t>(*p++);
  if (kind > static_cast<uint8_t>(RankMessage::Kind::kExpectEnd)) {
    *error = fmt::format("result message has unknown kind {}", kind);
    return false;
  }
  uint32_t line = 0;
  if (!GetU32(p, end, &line) || !GetString(p, end, &out->file) ||
      !GetString(p, end, &out->message)) {
    *error = fmt::format("result message of {} bytes is truncated", size);
    return false;
  }
  if (p != end) {
    *error = fmt::format("result message has {} trailing bytes", end - p);
    return false;
  }
  out->kind = static_cast<RankMessage::Kind>(kind);
  out->line = static_cast<int32_t>(line);
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
    auto queue =
        std::make_unique<Queue>(bip::create_only, name.c_str(), kCapacity,
                                kMaxMessageBytes, bip::permissions(0600));
    Reserve(name);
    return std::unique_ptr<ResultChannel>(
        new ResultChannel(name, std::move(queue)));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("cannot create result queue /dev/shm/{}: {}", name,
                            e.what()));
  }
}

std::unique_ptr<ResultChannel> ResultChannel::Open(const std::string& name) {
  try {
    auto queue = std::make_unique<Queue>(bip::open_only, name.c_str());
    return std::unique_ptr<ResultChannel>(
        new ResultChannel(name, std::move(queue)));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("cannot open result queue /dev/shm/{}: {}", name,
                            e.what()));
  }
}

namespace {
ResultChannel* g_inherited = nullptr;
}  // namespace

void ResultChannel::SetInherited(ResultChannel* channel) {
  g_inherited = channel;
}

ResultChannel* ResultChannel::Inherited() { return g_inherited; }

bool ResultChannel::Remove(const std::string& name) {
  return bip::message_queue::remove(name.c_str());
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
  auto deadline = boost::posix_time::microsec_clock::universal_time() +
                  boost::posix_time::milliseconds(timeout.count());
  try {
    if (bytes.size() <= kMaxMessageBytes) {
      if (!queue_->mq.timed_send(bytes.data(), bytes.size(), 0, deadline)) {
        return false;
      }
    } else {
      std::vector<char> part;
      const std::size_t room = kMaxMessageBytes - 1;
      for (std::size_t at = 0; at < bytes.size(); at += room) {
        const std::size_t n = std::min(room, bytes.size() - at);
        part.assign(1, at + n == bytes.size() ? kLastPart : kPart);
        part.insert(part.end(), bytes.begin() + at, bytes.begin() + at + n);
        if (!queue_->mq.timed_send(part.data(), part.size(), 0, deadline)) {
          return false;
        }
        // The parent drains what came so far while the rest is sent.
        if (notify_fd_ >= 0) (void)!write(notify_fd_, "r", 1);
      }
    }
  } catch (const bip::interprocess_exception&) {
    return false;
  }
  if (notify_fd_ >= 0) (void)!write(notify_fd_, "r", 1);
  return true;
}

std::optional<RankMessage> ResultChannel::TryReceive(std::string* error) {
  for (;;) {
    bip::message_queue::size_type received = 0;
    unsigned int priority = 0;
    try {
      if (!queue_->mq.try_receive(buffer_.data(), buffer_.size(), received,
                                  priority)) {
        return std::nullopt;  // A large result's parts so far stay pending.
      }
    } catch (const bip::interprocess_exception& e) {
      *error = fmt::format("cannot read result queue {}: {}", name_, e.what());
      return std::nullopt;
    }
    const char* data = buffer_.data();
    std::size_t size = received;
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

std::vector<std::string> RemoveQueuesOfDeadProcesses() {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "disttest-";
    if (name.rfind(kPrefix, 0) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + kPrefix.size(), &end, 10);
    if (pid <= 0 || end == nullptr || *end != '-') continue;
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
  return fmt::format("disttest-{}-{}-{}-r{}", pid, seq, clean, rank);
}

}  // namespace disttest::internal
