// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// OutputRelay: carries a rank's stdout or stderr to the parent's, one whole
// line at a time, each line prefixed with the rank.
//
//   OutputRelay relay(read_fd, stdout, "[rank 1] ");
//   relay.OnReadable();   // when poll() says read_fd is readable
//   relay.Finish();       // after the rank exited: drain and flush the tail
//
// Lines of different ranks never interleave mid-line because the parent
// writes each complete line with one fwrite. A line longer than 64 KiB is cut
// into pieces of that size.
#ifndef DISTTEST_SRC_HARNESS_CHANNEL_OUTPUT_RELAY_H_
#define DISTTEST_SRC_HARNESS_CHANNEL_OUTPUT_RELAY_H_

#include <cstdio>
#include <string>

#include "harness/report/sanitizer_report.h"

namespace disttest::internal {

class OutputRelay {
 public:
  static constexpr std::size_t kMaxLine = 64 * 1024;

  // Takes ownership of `fd` (non-blocking, close-on-exec read end).
  OutputRelay(int fd, std::FILE* sink, std::string prefix);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  // Drops the first line if it starts with `prefix` (gtest_main's banner in
  // a re-executed rank).
  void DropFirstLineIfStartsWith(std::string prefix);

  // Also appends every line, unprefixed, to `log` (not owned; may be shared
  // by a rank's two relays, which keeps its lines in the order they came).
  void CopyTo(std::FILE* log) { log_ = log; }

  // The sanitizer report among the lines so far (for a rank's stderr).
  SanitizerScanner& sanitizer() { return sanitizer_; }

  // Reads what is available; closes the fd at end of file.
  void OnReadable();
  // Reads until end of file or no more data, then writes any partial line.
  void Finish();

 private:
  void Emit(const char* data, std::size_t size);
  void Flush(bool all);

  int fd_;
  std::FILE* sink_;
  std::string prefix_;
  std::string pending_;
  std::string drop_prefix_;
  bool first_line_ = true;
  std::FILE* log_ = nullptr;
  SanitizerScanner sanitizer_;
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_CHANNEL_OUTPUT_RELAY_H_
