// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NCCL calls run as one group (ncclGroupStart ... ncclGroupEnd), for the
// collectives made of sends and receives and for the pending isends and
// irecvs.
#ifndef DISTTEST_SRC_COMM_NCCL_GROUP_H_
#define DISTTEST_SRC_COMM_NCCL_GROUP_H_

#include <nccl.h>

namespace disttest {

// Runs `calls` (each an NCCL call's result) between ncclGroupStart and
// ncclGroupEnd; the first error ends the group and is the result.
template <typename Calls>
ncclResult_t Group(Calls&& calls) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  result = calls();
  const ncclResult_t end = ncclGroupEnd();
  return result != ncclSuccess && result != ncclInProgress ? result : end;
}

// Stops a group's loop at the first error.
inline bool Failed(ncclResult_t r) {
  return r != ncclSuccess && r != ncclInProgress;
}

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_NCCL_GROUP_H_
