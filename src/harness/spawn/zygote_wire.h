// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the test process and its zygote (zygote.h) say to each other: a
// message's fixed part and the zygote's answer. The client is zygote.cc,
// the server, inside the zygote, zygote_server.cc.
#ifndef DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_WIRE_H_
#define DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_WIRE_H_

#include <cstdint>

namespace disttest::internal::zygote_wire {

constexpr std::uint32_t kMagic = 0x5947595a;  // "ZYGY"
// Which descriptors come with a message, in this order.
enum : std::uint32_t {
  kStdout = 1,
  kStderr = 2,
  kArena = 4,
  kResultsReady = 8,
  kLedger = 16,
};
constexpr int kMaxDescriptors = 5;

// A message's fixed part; then, each ending in NUL: the working directory,
// the --gtest_filter argument and the environment's "NAME=value" strings.
struct Header {
  std::uint32_t magic;
  std::int32_t pgid;  // 0: lead a new group.
  std::uint32_t descriptors;
  std::uint32_t umask;
  std::uint64_t files_soft;  // RLIMIT_NOFILE
  std::uint64_t files_hard;
};

// The zygote's answer: the rank's pid (-1: none started).
struct Answer {
  std::int32_t pid;
};

// The byte the test process sends a rank the zygote forked when it may go:
// to die with the test process (SIGKILL), or to stop, for the test
// process's keeper (harness/process/keeper.h) to end with what it started.
constexpr char kGo = 1;
constexpr char kGoAndStopWithParent = 2;

// How long the zygote may take to answer (the first time, it is still
// being loaded).
constexpr int kAnswerMs = 10'000;

// True: the zygote's server, and with it the constructor that serves in the
// zygote process, is linked into this binary (a static library leaves out
// an object file nothing refers to). Defined in zygote_server.cc.
bool ServerLinked();

}  // namespace disttest::internal::zygote_wire

#endif  // DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_WIRE_H_
