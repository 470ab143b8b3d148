// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Errors that follow from a peer's: raised on a rank whose collective a
// peer broke (the peer gave up, ended, or saw the ranks' calls differ in the
// host arena). The comm layer notes each one it raises; the rank marks a
// failure that reports one (RankMessage::follows, glue/rank_program.cc),
// and the verdict lists it after that peer's own error. The verdict reads a
// value, not this layer's words:
//
//   throw ErrorOfAPeer(fmt::format("rank {} {}", r, kPeerEnded));
//   ...
//   m.follows = ReportsAnErrorOfAPeer(m.message);  // On the same rank.
//
// Safe from several threads; ForgetErrorsOfPeers() at each test's start.
#ifndef DISTTEST_SRC_COMM_PEER_ERRORS_H_
#define DISTTEST_SRC_COMM_PEER_ERRORS_H_

#include <string>
#include <string_view>

#include "disttest/error.h"

namespace disttest::internal {

// The reasons, after the peer's rank ("rank 2 gave up ...").
inline constexpr std::string_view kPeerGaveUp =
    "gave up waiting in the host arena (see its error)";
inline constexpr std::string_view kPeerEnded =
    "ended while its peers waited for it in a collective";
inline constexpr std::string_view kPeerSawMismatch =
    "did not match across the ranks (see that error)";

// A CommError saying `what`, noted as following from a peer's error.
CommError ErrorOfAPeer(std::string what);

// Whether `failure_text` (a gtest failure of this rank, which may quote the
// error among other words) reports an error ErrorOfAPeer() made in this
// process since the last ForgetErrorsOfPeers().
bool ReportsAnErrorOfAPeer(std::string_view failure_text);

// A new test: the errors of the last one are no longer its.
void ForgetErrorsOfPeers();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_PEER_ERRORS_H_
