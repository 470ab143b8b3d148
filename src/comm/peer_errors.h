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
// Errors of the rank's own call that does not match its peers' are noted
// too (MismatchOfCalls): the rank fails its test with one the test caught.
//
// Safe from several threads; ForgetErrorsOfPeers() at each test's start.
#ifndef DISTTEST_SRC_COMM_PEER_ERRORS_H_
#define DISTTEST_SRC_COMM_PEER_ERRORS_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// A CommError saying `what`: this rank's call and its peers' do not match
// (a collective's count, type, reduce op or root; a message's count or
// type). That is a bug of the program, whatever the test does with the
// error: a test that catches it still fails (MismatchesNotSaid).
CommError MismatchOfCalls(std::string what);

// The call made at `file`:`line` threw `error`: a MismatchOfCalls of this
// rank that `error` quotes, not placed yet, is placed there.
void PlaceMismatch(std::string_view error, const char* file, unsigned line);

// A mismatch of this rank's test, as its call threw it, where it was made.
struct MismatchThrown {
  std::string file;
  unsigned line = 0;
  std::string error;
};
// This rank's mismatches since the last ForgetErrorsOfPeers() that no
// failure of its test quotes (`said`: whether one does), in the order
// thrown: those the test caught. Taken: a second call returns none.
std::vector<MismatchThrown> MismatchesNotSaid(
    const std::function<bool(std::string_view)>& said);

// A new test: the errors of the last one are no longer its.
void ForgetErrorsOfPeers();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_PEER_ERRORS_H_
