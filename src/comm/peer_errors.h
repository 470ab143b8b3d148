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
// error: a test that catches it still fails (MismatchesNotSaid). Noted for
// the calling rank: where the ranks are threads, one a rank started is
// `rank_of_comm`'s (its communicator's rank: its ledger's slot).
CommError MismatchOfCalls(std::string what, int rank_of_comm = -1);

// A CommError saying `what`, of another bug of the program that a test
// may catch and go on (a send buffer changed before its wait(), two
// threads in collectives of one communicator): noted as a mismatch is,
// with `bug` the sentence that says why the test fails all the same ("A
// send buffer changed before its wait() returned is a bug of the
// program"), placed at `file`:`line`, the call that found it.
CommError BugOfTheProgram(std::string what, std::string bug, const char* file,
                          unsigned line, int rank_of_comm = -1);

// The call made at `file`:`line` threw `error`: a MismatchOfCalls of this
// rank that `error` quotes, not placed yet, is placed there; so is one that
// `cut_reason` quotes, the reason disttest cut the communicators while the
// call waited ("": none), and a failure that quotes `error` then says it.
void PlaceMismatch(std::string_view error, std::string_view cut_reason,
                   const char* file, unsigned line, int rank_of_comm = -1);

// Whether `error` quotes a MismatchOfCalls of the calling rank (one that
// a call swallows and quotes in its own error then counts as said).
bool IsMismatchOfCalls(std::string_view error);

// Runs `compare`, the comparison with its peers' of a call this rank
// refuses anyway (which fails them too); returns "; <its error>" where that
// is a mismatch of calls (quoted in the refusal, it is said), else "":
//   throw CommError("... invalid root rank 7" + CompareBeforeRefusing(...));
template <typename Compare>
std::string CompareBeforeRefusing(Compare&& compare) {
  try {
    compare();
  } catch (const CommError& e) {
    if (IsMismatchOfCalls(e.what())) return std::string("; ") + e.what();
  }
  return "";
}

// A failure of this rank's test (a rank thread's, or its process's) was
// reported: the mismatches it quotes are said.
void NoteSaid(std::string_view failure_text);

// A mismatch of this rank's test, as its call threw it, where it was made.
struct MismatchThrown {
  std::string file;
  unsigned line = 0;
  std::string error;
  // Why a test that caught it fails: "Calls that do not match across the
  // ranks are a bug of the program", or BugOfTheProgram's `bug`.
  std::string bug;
};
// This rank's mismatches since the last ForgetErrorsOfPeers() that no
// failure of its test quoted (NoteSaid), in the order thrown: those the
// test caught. Taken: a second call returns none. One that no call of this
// rank threw (a launched rank's side thread found it after the rank's call
// had already failed, cut by a peer that found it first) is said by any
// failure of the test (`test_failed`): the test caught nothing of it.
std::vector<MismatchThrown> MismatchesNotSaid(bool test_failed);

// A new test: the errors of the last one are no longer its.
void ForgetErrorsOfPeers();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_PEER_ERRORS_H_
