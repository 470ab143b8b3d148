// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The account of a process's non-blocking requests (Communicator::isend,
// irecv), for the failures no call returns: a Request destroyed without
// wait() whose operation failed (its destructor cannot throw), and a request
// still in flight when the test ends (a message nobody received, a receive
// nobody sent to, a Request kept in a static). The rank runtime takes them
// after each test and fails it at the line that made each request:
//
//   for (const RequestProblem& p : TakeRequestProblems(/*ended=*/true)) {
//     ADD_FAILURE_AT(p.file, p.line) << p.message;
//   }
//
// Every backend's requests are counted here, on every communicator (the
// world's, split ones, created ones), whatever carries their data. Safe from
// several threads.
#ifndef DISTTEST_SRC_COMM_REQUEST_ACCOUNT_H_
#define DISTTEST_SRC_COMM_REQUEST_ACCOUNT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace disttest::internal {

struct RequestProblem {
  std::string file;
  unsigned line = 0;
  std::string message;
};

// A request now in flight: "isend(1 x int32 to rank 1, tag 7) on
// communicator \"grads\"", made at file:line on a communicator of rank
// `rank_of_comm` (its ledger's slot; -1: unknown). Returns its id (never
// 0). Where ranks are threads, it is that rank's, whichever thread made
// it (one the rank started included).
std::uint64_t RequestMade(std::string what, const char* file, unsigned line,
                          int rank_of_comm);
// The rank whose request `id` is (as RequestMade charged it); the calling
// thread's when it is no longer in flight.
int RequestOwner(std::uint64_t id);
// Request `id` is being waited for (or was reported): it leaves the account.
void RequestWaited(std::uint64_t id);
// A request of rank `owner` (RequestOwner) was destroyed without wait()
// and its wait failed with `error`.
void RequestDroppedAndFailed(int owner, const std::string& what,
                             const char* file, unsigned line,
                             const std::string& error);
// What went wrong since the last call: dropped requests that failed and,
// with `ended` (the test is over), every request still in flight, which
// then leaves the account.
std::vector<RequestProblem> TakeRequestProblems(bool ended);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_COMM_REQUEST_ACCOUNT_H_
