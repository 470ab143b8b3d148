// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The memory a parent shares with the ranks it starts (the host arena, the
// collective ledgers): a memfd mapped shared before the ranks exist, which
// forked ranks inherit mapped and re-executed ones map from its descriptor.
//
//   SharedMemory m = MapShared("disttest-ledger", bytes, "a collective
//   ledger");
//   ... fork; in an exec'd child: void* p = MapInherited(fd, bytes, "the ...");
#ifndef DISTTEST_SRC_COMM_SHARED_MEMORY_H_
#define DISTTEST_SRC_COMM_SHARED_MEMORY_H_

#include <cstddef>

namespace disttest::internal {

struct SharedMemory {
  int fd = -1;  // The memfd (close-on-exec), -1 without one.
  void* memory = nullptr;
};

// `size` zeroed bytes in a memfd named `name` (never one of the stdio
// descriptors: a process started without stdin would give its rank's stdio
// that number), mapped shared; where memfd_create is not allowed, anonymous
// shared memory, which only forked processes share. Throws Error "cannot
// map <what> of <size> bytes: <cause>".
SharedMemory MapShared(const char* name, std::size_t size, const char* what);

// Maps `size` bytes of the inherited descriptor `fd` shared and closes it;
// throws Error "cannot map <what> (descriptor <fd>): <cause>".
void* MapInherited(int fd, std::size_t size, const char* what);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_SHARED_MEMORY_H_
