// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// ResultChannel: one rank's results, carried to the parent through a ring of
// slots in a Boost.Interprocess shared-memory object.
//
//   auto ch = ResultChannel::Create(name);      // parent, before spawning
//   auto ch = ResultChannel::Open(name);        // rank
//   ch->Send({RankMessage::Kind::kFatalFailure, "a.cc", 12, "..."}, 5s);
//   while (auto m = ch->TryReceive(&error)) ...  // parent, never blocks
//
// The queue is created 0600 under /dev/shm with "disttest" in its name and
// removed by the parent when the test ends. It has one writer (the rank; its
// threads take turns) and one reader (the parent), and no lock between them:
// the parent never blocks on it, and a rank killed at any instant, even in
// the middle of a Send(), leaves every result it had sent readable. The exit
// status remains the second, coarse channel.
#ifndef DISTTEST_SRC_HARNESS_CHANNEL_RESULT_CHANNEL_H_
#define DISTTEST_SRC_HARNESS_CHANNEL_RESULT_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/rank_message.h"

namespace disttest::internal {

class ResultChannel {
 public:
  // One slot of the queue. A result larger than this (up to
  // kMaxResultBytes, beyond which its text is cut with a note) travels in
  // several slots and is put together again by TryReceive().
  static constexpr std::size_t kMaxMessageBytes = 2 * 1024;
  static constexpr std::size_t kMaxResultBytes = 1024 * 1024;
  // Small: the parent drains a queue as soon as the rank writes to it (the
  // results-ready pipe), and /dev/shm may be small (64 MiB in a default
  // Docker container: 16 ranks took it all at 4 MiB a queue).
  static constexpr std::size_t kCapacity = 16;

  // About what one queue takes in /dev/shm (its messages and its index).
  static constexpr std::size_t kQueueBytes =
      kCapacity * (kMaxMessageBytes + 64) + 4096;

  // Parent: removes any queue of the same name, then creates a new one, 0600,
  // its memory reserved at once (a full /dev/shm is an error here, naming
  // the space needed and free, never a SIGBUS in the rank that writes).
  static std::unique_ptr<ResultChannel> Create(const std::string& name);
  // Rank: opens the queue its parent created.
  static std::unique_ptr<ResultChannel> Open(const std::string& name);
  // Removes the named queue; true if it existed.
  static bool Remove(const std::string& name);
  // In a forked rank: the parent's channel to it, which the fork copied
  // with its mapping (set by the launcher in the child; null in any other
  // process). The rank sends through it; nothing opens the queue again.
  static void SetInherited(ResultChannel* channel);
  static ResultChannel* Inherited();

  ~ResultChannel();

  // Sends `m`, waiting at most `timeout` for room. False on timeout.
  bool Send(const RankMessage& m, std::chrono::milliseconds timeout);
  // After each message Send() writes a byte to `fd` (non-blocking; a full
  // pipe already wakes its reader): the parent polls it.
  void NotifyOnSend(int fd) { notify_fd_ = fd; }
  // Takes the next message without waiting; nullopt when the queue is empty.
  // A malformed message is returned as nullopt with `error` set.
  std::optional<RankMessage> TryReceive(std::string* error);

  const std::string& name() const { return name_; }

  // Bytes of a result that arrived in parts without its last part yet: after
  // the writer ended, a result it was sending when it died.
  std::size_t PartialResultBytes() const { return pending_.size(); }

 private:
  struct Queue;
  ResultChannel(std::string name, std::unique_ptr<Queue> queue);

  std::string name_;
  std::unique_ptr<Queue> queue_;
  std::vector<char> buffer_;
  std::vector<char> pending_;  // The parts of a large result so far.
  int notify_fd_ = -1;
};

// Removes the result queues of test processes that no longer exist (a
// parent killed by SIGKILL or by ctest's timeout cannot remove its own).
// Only names of the form "disttest-<pid>-n<pid namespace>-..." made in this
// process's PID namespace, whose pid is not a live process there, are
// touched: a pid means nothing in another namespace (a container run with
// --ipc=host shares /dev/shm, not pids), and a queue of another namespace's
// live run must never be taken from it. Returns the names removed.
std::vector<std::string> RemoveQueuesOfDeadProcesses();

// The inode of this process's PID namespace (/proc/self/ns/pid); 0 where it
// cannot be read, and then no queue is judged dead.
unsigned long long PidNamespace();

// "disttest-<pid>-n<pid namespace>-<seq>-<random>-<test>-r<rank>", the test
// name reduced to [A-Za-z0-9_.-] and bounded in length. The 64 random bits
// make the name unguessable: another user cannot create it first and so
// fail the test ("File exists").
std::string ResultQueueName(int pid, int seq, const std::string& test,
                            int rank);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_CHANNEL_RESULT_CHANNEL_H_
