// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/shared_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "disttest/error.h"

namespace disttest::internal {

SharedMemory MapShared(const char* name, std::size_t size, const char* what) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd >= 0 && fd <= STDERR_FILENO) {
    // A process started without stdin: a rank's stdio would replace it.
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(fd);
    fd = moved;
  }
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    fd = -1;
  }
  // Without a memfd, anonymous shared memory still serves forked ranks.
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, fd, 0);
  if (memory == MAP_FAILED) {
    const int error = errno;
    if (fd >= 0) close(fd);
    throw Error(fmt::format("cannot map {} of {} bytes: {}", what, size,
                            std::strerror(error)));
  }
  return {fd, memory};
}

void* MapInherited(int fd, std::size_t size, const char* what) {
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (memory == MAP_FAILED) {
    throw Error(fmt::format("cannot map {} (descriptor {}): {}", what, fd,
                            std::strerror(error)));
  }
  return memory;
}

}  // namespace disttest::internal
