// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/channel/output_relay.h"

#include <unistd.h>

#include <cerrno>

namespace disttest::internal {

OutputRelay::OutputRelay(int fd, std::FILE* sink, std::string prefix)
    : fd_(fd), sink_(sink), prefix_(std::move(prefix)) {}

OutputRelay::~OutputRelay() {
  if (fd_ >= 0) close(fd_);
}

void OutputRelay::DropFirstLineIfStartsWith(std::string prefix) {
  drop_prefix_ = std::move(prefix);
}

void OutputRelay::OnReadable() {
  char buf[16384];
  while (fd_ >= 0) {
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<std::size_t>(n));
      Flush(false);
      if (static_cast<std::size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(fd_);  // End of file, or an error that ends the stream alike.
    fd_ = -1;
  }
}

void OutputRelay::Finish() {
  OnReadable();
  Flush(true);
}

void OutputRelay::Flush(bool all) {
  std::size_t start = 0;
  while (start < pending_.size()) {
    std::size_t nl = pending_.find('\n', start);
    std::size_t end;
    if (nl != std::string::npos) {
      end = nl + 1;
    } else if (pending_.size() - start >= kMaxLine || all) {
      end = std::min(pending_.size(), start + kMaxLine);
    } else {
      break;
    }
    Emit(pending_.data() + start, end - start);
    start = end;
  }
  pending_.erase(0, start);
}

void OutputRelay::Emit(const char* data, std::size_t size) {
  bool first = first_line_;
  first_line_ = false;
  if (first && !drop_prefix_.empty() &&
      std::string_view(data, size).rfind(drop_prefix_, 0) == 0) {
    return;
  }
  sanitizer_.Line(std::string_view(data, size));
  std::string line = prefix_;
  line.append(data, size);
  if (line.back() != '\n') line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), sink_);
  std::fflush(sink_);
  if (log_ != nullptr) {
    std::fwrite(line.data() + prefix_.size(), 1, line.size() - prefix_.size(),
                log_);
    std::fflush(log_);
  }
}

}  // namespace disttest::internal
