// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A system call retried while a signal interrupts it.
//
//   ssize_t n = RetryOnEintr([&] { return read(fd, buf, sizeof buf); });
//   pid_t got = RetryOnEintr([&] { return waitpid(pid, &status, 0); });
#ifndef DISTTEST_SRC_BASE_RETRY_H_
#define DISTTEST_SRC_BASE_RETRY_H_

#include <cerrno>

namespace disttest::internal {

// Calls `call` until it returns something other than -1 with errno EINTR;
// returns that (errno is the last call's).
template <typename Call>
auto RetryOnEintr(Call&& call) -> decltype(call()) {
  decltype(call()) result;
  do {
    result = call();
  } while (result == -1 && errno == EINTR);
  return result;
}

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_BASE_RETRY_H_
