// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/channel/result_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;

std::string UniqueName(const char* what) {
  return ResultQueueName(
      getpid(), 0,
      ::testing::UnitTest::GetInstance()->current_test_info()->name(), what[0]);
}

TEST(ResultQueueNameTest, NamesPidNamespaceTestAndRankAndCleansTheTestName) {
  const std::string name = ResultQueueName(42, 7, "Suite.Name/2ranks", 1);
  const std::string head =
      "disttest-42-n" + std::to_string(PidNamespace()) + "-7-";
  ASSERT_EQ(name.rfind(head, 0), 0u) << name;
  // 16 hex digits of chance between the sequence number and the test.
  EXPECT_EQ(name.substr(head.size() + 16), "-Suite.Name_2ranks-r1") << name;
  std::string long_name(500, 'x');
  EXPECT_LT(ResultQueueName(1, 1, long_name, 0).size(), 160u);
}

// Another user who knows the pid, the test and the sequence number cannot
// create the name first: `touch /dev/shm/disttest-<pid>-1-<test>-r0` failed
// that test with "File exists".
TEST(ResultQueueNameTest, NamesCannotBeGuessed) {
  EXPECT_NE(ResultQueueName(42, 7, "Suite.Name", 1),
            ResultQueueName(42, 7, "Suite.Name", 1));
}

// A run in another PID namespace (a container with --ipc=host) shares
// /dev/shm: a pid in its queues' names means nothing here, and its live
// queues must stay. Those of this namespace whose process is gone go.
TEST(RemoveQueuesOfDeadProcessesTest, OnlyThisNamespacesDeadProcessesQueues) {
  ASSERT_NE(PidNamespace(), 0u);
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string here = ResultQueueName(dead, 1, "Sweep.Here", 0);
  const std::string there =
      fmt::format("disttest-{}-n{}-1-0123456789abcdef-Sweep.There-r0", dead,
                  PidNamespace() + 1);
  // An older disttest's name says nothing of its namespace: left alone.
  const std::string older = fmt::format("disttest-{}-1-Sweep.Older-r0", dead);
  for (const std::string& name : {here, there, older}) {
    ResultChannel::Create(name);
  }
  // (Another run's sweep may take `here` first: what counts is what is
  // left.)
  const std::vector<std::string> removed = RemoveQueuesOfDeadProcesses();
  EXPECT_THAT(removed, ::testing::Not(::testing::Contains(there)));
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/" + there));
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/" + older));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + here));
  for (const std::string& name : {here, there, older}) {
    ResultChannel::Remove(name);
  }
}

TEST(RankMessageTest, RoundTrips) {
  RankMessage m{RankMessage::Kind::kFatalFailure, "a/b.cc", 42, "boom\nline"};
  std::vector<char> bytes = EncodeRankMessage(m, 1024);
  RankMessage back;
  std::string error;
  ASSERT_TRUE(DecodeRankMessage(bytes.data(), bytes.size(), &back, &error))
      << error;
  EXPECT_EQ(back.kind, m.kind);
  EXPECT_EQ(back.file, m.file);
  EXPECT_EQ(back.line, 42);
  EXPECT_EQ(back.message, m.message);
  EXPECT_FALSE(back.follows);
  // That it follows from a peer's error travels with it, for every kind.
  m.follows = true;
  for (auto kind :
       {RankMessage::Kind::kNonFatalFailure, RankMessage::Kind::kFatalFailure,
        RankMessage::Kind::kExpectEnd}) {
    m.kind = kind;
    bytes = EncodeRankMessage(m, 1024);
    ASSERT_TRUE(DecodeRankMessage(bytes.data(), bytes.size(), &back, &error))
        << error;
    EXPECT_EQ(back.kind, kind);
    EXPECT_TRUE(back.follows);
  }
}

TEST(RankMessageTest, OversizedMessageIsTruncatedWithANote) {
  RankMessage m{RankMessage::Kind::kNonFatalFailure, "f.cc", 1,
                std::string(10000, 'm')};
  std::vector<char> bytes = EncodeRankMessage(m, 1000);
  EXPECT_LE(bytes.size(), 1000u);
  RankMessage back;
  std::string error;
  ASSERT_TRUE(DecodeRankMessage(bytes.data(), bytes.size(), &back, &error));
  EXPECT_THAT(back.message, HasSubstr("message truncated"));
  EXPECT_THAT(back.message, HasSubstr("of 10000 bytes shown"));
}

TEST(RankMessageTest, EncodingNeverExceedsItsBoundEvenWithALongFileName) {
  RankMessage m{RankMessage::Kind::kFatalFailure, std::string(5000, 'f'), 7,
                std::string(5000, 'm')};
  for (std::size_t max : {64u, 100u, 200u, 1000u, 4096u}) {
    std::vector<char> bytes = EncodeRankMessage(m, max);
    EXPECT_LE(bytes.size(), max) << max;
    RankMessage back;
    std::string error;
    EXPECT_TRUE(DecodeRankMessage(bytes.data(), bytes.size(), &back, &error))
        << error;
  }
}

TEST(RankMessageTest, MalformedInputIsRejectedNeverOverread) {
  RankMessage m{RankMessage::Kind::kSkip, "f.cc", 3, "why"};
  std::vector<char> bytes = EncodeRankMessage(m, 1024);
  std::string error;
  RankMessage out;
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // Every strict prefix is malformed (checked under ASan for overreads).
    std::vector<char> prefix(bytes.begin(), bytes.begin() + n);
    EXPECT_FALSE(DecodeRankMessage(prefix.data(), n, &out, &error)) << n;
  }
  std::vector<char> bad = bytes;
  bad[0] = 99;
  EXPECT_FALSE(DecodeRankMessage(bad.data(), bad.size(), &out, &error));
  EXPECT_THAT(error, HasSubstr("unknown kind 99"));
  bad = bytes;
  bad.push_back('x');
  EXPECT_FALSE(DecodeRankMessage(bad.data(), bad.size(), &out, &error));
  EXPECT_THAT(error, HasSubstr("trailing"));
  bad = bytes;
  bad[5] = '\xff';  // File length far past the end.
  EXPECT_FALSE(DecodeRankMessage(bad.data(), bad.size(), &out, &error));
}

TEST(ResultChannelTest, CarriesMessagesInOrderAndIsPrivateAndRemoved) {
  std::string name = UniqueName("a");
  auto parent = ResultChannel::Create(name);
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto child = ResultChannel::Open(name);
  std::string error;
  EXPECT_FALSE(parent->TryReceive(&error).has_value());
  EXPECT_TRUE(error.empty());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(child->Send({RankMessage::Kind::kNonFatalFailure, "f.cc", i,
                             "m" + std::to_string(i)},
                            std::chrono::milliseconds(100)));
  }
  for (int i = 0; i < 3; ++i) {
    auto m = parent->TryReceive(&error);
    ASSERT_TRUE(m.has_value()) << error;
    EXPECT_EQ(m->line, i);
  }
  EXPECT_TRUE(ResultChannel::Remove(name));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name));
}

TEST(ResultChannelTest, FullQueueTimesOutInsteadOfBlocking) {
  std::string name = UniqueName("b");
  auto ch = ResultChannel::Create(name);
  for (std::size_t i = 0; i < ResultChannel::kCapacity; ++i) {
    ASSERT_TRUE(ch->Send({RankMessage::Kind::kSkip, "", -1, "x"},
                         std::chrono::milliseconds(100)));
  }
  EXPECT_FALSE(ch->Send({RankMessage::Kind::kSkip, "", -1, "x"},
                        std::chrono::milliseconds(50)));
  ResultChannel::Remove(name);
}

// A result larger than a slot travels in parts and arrives whole, while
// the parent drains the queue (it holds fewer slots than there are parts).
TEST(ResultChannelTest, LargeResultArrivesWhole) {
  std::string name = UniqueName("l");
  auto parent = ResultChannel::Create(name);
  auto child = ResultChannel::Open(name);
  std::string big;
  for (int i = 0; big.size() < 300 * 1024; ++i) {
    big += "line " + std::to_string(i) + "\n";
  }
  ASSERT_GT(big.size(),
            ResultChannel::kCapacity * ResultChannel::kMaxMessageBytes);
  bool sent = false;
  std::thread sender([&] {
    sent = child->Send({RankMessage::Kind::kFatalFailure, "big.cc", 7, big},
                       std::chrono::seconds(20));
  });
  std::string error;
  std::optional<RankMessage> m;
  while (!m && error.empty()) {
    m = parent->TryReceive(&error);
    if (!m) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  sender.join();
  EXPECT_TRUE(sent);
  ASSERT_TRUE(m.has_value()) << error;
  EXPECT_EQ(m->kind, RankMessage::Kind::kFatalFailure);
  EXPECT_EQ(m->file, "big.cc");
  EXPECT_EQ(m->line, 7);
  EXPECT_EQ(m->message, big);
  // A small one after it is its own.
  ASSERT_TRUE(child->Send({RankMessage::Kind::kSkip, "", -1, "after"},
                          std::chrono::milliseconds(100)));
  m = parent->TryReceive(&error);
  ASSERT_TRUE(m.has_value()) << error;
  EXPECT_EQ(m->message, "after");
  ResultChannel::Remove(name);
}

// A rank killed at any instant of a Send() (a peer's SignalRank, the OOM
// killer) leaves every result it had sent readable and the queue unlocked:
// the parent reads each whole result, in order, and no error. (Boost's
// message_queue, used before, kept a mutex in the segment that such a kill
// left held.) Each round kills the writer at another moment of its
// stream of small and large results.
TEST(ResultChannelTest, WriterKilledMidSendLeavesWhatItSentReadable) {
  const std::string big(5 * ResultChannel::kMaxMessageBytes, 'b');
  for (int round = 0; round < 40; ++round) {
    std::string name = UniqueName("k");
    auto parent = ResultChannel::Create(name);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(ready[0]);
      auto child = ResultChannel::Open(name);
      (void)!write(ready[1], "r", 1);
      for (int i = 0;; ++i) {
        child->Send({RankMessage::Kind::kNonFatalFailure, "k.cc", i,
                     i % 3 == 2 ? big : "m"},
                    std::chrono::seconds(10));
      }
    }
    close(ready[1]);
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    // Drain while the writer writes, and kill it once `target` results
    // came: it is mid-stream then, the ring in another state each round.
    const int target = 5 + 13 * round;
    std::string error;
    int next = 0;
    while (next < target) {
      if (auto m = parent->TryReceive(&error)) {
        ASSERT_EQ(m->line, next++);
      }
      ASSERT_EQ(error, "");
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));
    while (auto m = parent->TryReceive(&error)) {
      EXPECT_EQ(m->line, next) << "round " << round;
      EXPECT_EQ(m->message, next % 3 == 2 ? big : "m") << "round " << round;
      ++next;
    }
    EXPECT_EQ(error, "") << "round " << round;
    ResultChannel::Remove(name);
  }
}

// What the rank's memory holds is the rank's to scribble on: a queue whose
// counters or slot sizes make no sense is an error naming it, never a read
// outside the segment.
TEST(ResultChannelTest, CorruptQueueIsAnErrorNotAnOverread) {
  std::string name = UniqueName("x");
  auto parent = ResultChannel::Create(name);
  auto child = ResultChannel::Open(name);
  ASSERT_TRUE(child->Send({RankMessage::Kind::kSkip, "", -1, "x"},
                          std::chrono::milliseconds(100)));
  {
    // The slot's size, as a wild write in the rank would leave it.
    int fd = open(("/dev/shm/" + name).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    std::vector<char> bytes(st.st_size);
    ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
    // The first slot follows the header; its first four bytes are its size.
    constexpr std::size_t kFirstSlot = 256;
    const std::uint32_t huge = 1u << 30;
    ASSERT_EQ(pwrite(fd, &huge, sizeof huge, kFirstSlot),
              static_cast<ssize_t>(sizeof huge));
    close(fd);
  }
  std::string error;
  EXPECT_FALSE(parent->TryReceive(&error).has_value());
  EXPECT_THAT(error, HasSubstr("is corrupt: a slot says it holds 1073741824 "
                               "bytes (at most 2048)"));
  ResultChannel::Remove(name);
}

// A file of that name that is not a result queue (another version's, a
// stranger's) is refused when opened, naming it.
TEST(ResultChannelTest, OpeningSomethingElseNamesIt) {
  std::string name = UniqueName("o");
  const std::string path = "/dev/shm/" + name;
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  close(fd);
  try {
    ResultChannel::Open(name);
    ADD_FAILURE() << "no exception";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": it is not a result queue"));
  }
  ResultChannel::Remove(name);
}

TEST(ResultChannelTest, CreateReplacesAStaleQueueOfTheSameName) {
  std::string name = UniqueName("c");
  auto stale = ResultChannel::Create(name);
  ASSERT_TRUE(stale->Send({RankMessage::Kind::kSkip, "", -1, "old"},
                          std::chrono::milliseconds(100)));
  auto fresh = ResultChannel::Create(name);
  std::string error;
  EXPECT_FALSE(fresh->TryReceive(&error).has_value());
  ResultChannel::Remove(name);
}

TEST(ResultChannelTest, OpeningAMissingQueueNamesIt) {
  try {
    ResultChannel::Open("disttest-does-not-exist");
    FAIL() << "no exception";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("/dev/shm/disttest-does-not-exist"));
  }
}

}  // namespace
}  // namespace disttest::internal
