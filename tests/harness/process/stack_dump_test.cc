// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/stack_dump.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace disttest::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// eu-stack -s -i -b's output, as one process's.
constexpr char kWhole[] =
    "PID 10 - process\n"
    "TID 10:\n"
    "#0  0x00007f483811a230 __GI___poll\n"
    "    [93ac61ec]@0x7f483801e000+0xfc230\n"
    "    ../sysdeps/unix/sysv/linux/poll.c:29:10\n"
    "#1  0x000055fa3d0d1c8f RunStep\n"
    "    [3f97c3ae]@0x55fa3d036000+0x9bc8e\n"
    "    /src/glue/fixture.cc:228:18\n"
    "#2  0x000055fa3d0d1c8f Supervise\n"
    "    [3f97c3ae]@0x55fa3d036000+0x9bc8e\n"
    "TID 11:\n"
    "#0  0x00007f483811a230 __GI___poll\n"
    "    [93ac61ec]@0x7f483801e000+0xfc230\n";

TEST(StackSignatureTest, IsEachThreadsModulesAndOffsets) {
  std::vector<std::string> threads;
  const std::string sig = StackSignature(kWhole, &threads);
  EXPECT_EQ(sig,
            "T\n[93ac61ec]+0xfc230\n[3f97c3ae]+0x9bc8e\n"
            "T\n[93ac61ec]+0xfc230\n");
  EXPECT_EQ(threads, (std::vector<std::string>{"TID 10:", "TID 11:"}));
  // The quick unwinding (eu-stack -q -b) of the same places, loaded
  // elsewhere (ASLR) and without the inlined frame: the same signature.
  const std::string quick =
      "PID 12 - process\nTID 12:\n#0  0x00007f0000001230\n"
      "    [93ac61ec]@0x7f0000000000+0xfc230\n#1  0x0000560000000c8f\n"
      "    [3f97c3ae]@0x560000000000+0x9bc8e\nTID 13:\n"
      "#0  0x00007f0000001230\n    [93ac61ec]@0x7f0000000000+0xfc230\n";
  EXPECT_EQ(StackSignature(quick, nullptr), sig);
  EXPECT_EQ(StackSignature("eu-stack: dwfl_linux_proc_attach pid 9: No such "
                           "process\n",
                           nullptr),
            "");
}

[[gnu::noinline]] void WaitHere(int ready) {
  (void)!write(ready, "h", 1);
  for (;;) pause();
}

[[gnu::noinline]] void WaitThere(int ready) {
  (void)!write(ready, "t", 1);
  for (;;) pause();
}

// Children of this process, ended and reaped whatever the test does.
class Children {
 public:
  ~Children() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  pid_t Start(void (*wait)(int), int ready) {
    const pid_t pid = fork();
    if (pid == 0) {
      // The parent's stack tool is its child, not this one's ancestor.
      prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
      wait(ready);
    }
    pids_.push_back(pid);
    return pid;
  }
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

char State(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const std::size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size()
             ? '?'
             : stat[close + 2];
}

// Processes in the same places share one whole stack, each with its own
// thread ids; one elsewhere gets its own.
TEST(DumpStacksTest, ProcessesInTheSamePlacesShareOneWholeStack) {
  const StackTool tool = FindStackTool();
  if (!tool.path.ends_with("eu-stack")) {
    GTEST_SKIP() << "eu-stack (elfutils) is not installed";
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  Children children;
  for (int i = 0; i < 3; ++i) children.Start(WaitHere, ready[1]);
  children.Start(WaitThere, ready[1]);
  close(ready[1]);
  char c;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // Each is in pause() once it sleeps.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t pid : children.pids()) {
    while (State(pid) != 'S' && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(State(pid), 'S');
  }
  StackStats stats;
  const std::vector<std::string> stacks =
      DumpStacks(children.pids(), std::chrono::seconds(30), tool, &stats);
  ASSERT_EQ(stacks.size(), 4u);
  EXPECT_EQ(stats.whole, 2u);
  for (int i = 0; i < 4; ++i) {
    const std::string& s = stacks[static_cast<std::size_t>(i)];
    EXPECT_THAT(s, HasSubstr(fmt::format("TID {}:", children.pids()[i]))) << s;
    EXPECT_THAT(s, HasSubstr(i < 3 ? "WaitHere" : "WaitThere")) << s;
    EXPECT_THAT(s, HasSubstr("stack_dump_test.cc:")) << s;  // Source lines.
    EXPECT_THAT(s, Not(HasSubstr("]@0x"))) << s;            // No module lines.
  }
  EXPECT_THAT(stacks[1],
              Not(HasSubstr(fmt::format("TID {}:", children.pids()[0]))));
}

}  // namespace
}  // namespace disttest::internal
