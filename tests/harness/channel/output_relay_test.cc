// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/channel/output_relay.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace disttest::internal {
namespace {

// A relay from a pipe into a memory stream.
class OutputRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    write_fd_ = fds[1];
    fcntl(write_fd_, F_SETPIPE_SZ, 1 << 20);  // Room for an overlong line.
    sink_ = open_memstream(&buf_, &size_);
    relay_ = std::make_unique<OutputRelay>(fds[0], sink_, "[rank 3] ");
  }
  void TearDown() override {
    relay_.reset();
    if (write_fd_ >= 0) close(write_fd_);
    std::fclose(sink_);
    std::free(buf_);
  }
  void Write(const std::string& s) {
    ASSERT_EQ(write(write_fd_, s.data(), s.size()),
              static_cast<ssize_t>(s.size()));
  }
  std::string Out() {
    std::fflush(sink_);
    return std::string(buf_, size_);
  }

  int write_fd_ = -1;
  char* buf_ = nullptr;
  std::size_t size_ = 0;
  std::FILE* sink_ = nullptr;
  std::unique_ptr<OutputRelay> relay_;
};

TEST_F(OutputRelayTest, PrefixesWholeLinesAndHoldsPartialOnes) {
  Write("one\ntw");
  relay_->OnReadable();
  EXPECT_EQ(Out(), "[rank 3] one\n");
  Write("o\nthree");
  relay_->OnReadable();
  EXPECT_EQ(Out(), "[rank 3] one\n[rank 3] two\n");
  close(write_fd_);
  write_fd_ = -1;
  relay_->Finish();
  EXPECT_EQ(Out(), "[rank 3] one\n[rank 3] two\n[rank 3] three\n");
  EXPECT_FALSE(relay_->open());
}

TEST_F(OutputRelayTest, DropsOnlyAMatchingFirstLine) {
  relay_->DropFirstLineIfStartsWith("Running main() from ");
  Write("Running main() from gtest_main.cc\nRunning main() from x\n");
  relay_->OnReadable();
  EXPECT_EQ(Out(), "[rank 3] Running main() from x\n");
}

TEST_F(OutputRelayTest, CutsOverlongLines) {
  std::string huge(OutputRelay::kMaxLine + 10, 'x');
  Write(huge);
  relay_->OnReadable();
  std::string out = Out();
  EXPECT_EQ(out.size(), 9 + OutputRelay::kMaxLine + 1);
  close(write_fd_);
  write_fd_ = -1;
  relay_->Finish();
  EXPECT_EQ(Out().size(), out.size() + 9 + 10 + 1);
}

}  // namespace
}  // namespace disttest::internal
