// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What disttest::mpi knows of MPI in this process (mpi_comm.cc): whether
// the run's MPI can be used, and MPI's words for an error code.
//
//   if (std::string why = WhyNoMpi(); !why.empty()) throw CommError(why);
#ifndef DISTTEST_SRC_MPI_MPI_STATE_H_
#define DISTTEST_SRC_MPI_MPI_STATE_H_

#include <string>

namespace disttest::internal {

// Why this process's MPI cannot be used for disttest's communicators (not
// started by an MPI launcher, without thread support, or not started at
// all); "" where it can.
std::string WhyNoMpi();

// MPI_Error_string's text for `code`.
std::string MpiErrorText(int code);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_MPI_MPI_STATE_H_
