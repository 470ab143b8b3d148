// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/request_account.h"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "base/threads.h"

namespace disttest::internal {
namespace {

struct InFlight {
  std::string what;
  const char* file;
  unsigned line;
  int rank;  // Whose it is (RequestMade).
};

// Rank threads of one process (LaunchMode::kThreads) each take their own
// (a request made in a thread a rank started is charged to the rank of its
// communicator); a process's one rank is -1.
bool Takes(int taker, int owner) { return owner == taker; }

// Never destroyed: a request may be waited for from a static's destructor.
struct Account {
  std::mutex mu;
  std::uint64_t next = 1;
  std::map<std::uint64_t, InFlight> in_flight;  // By id: in order made.
  std::vector<std::pair<int, RequestProblem>> problems;  // By rank.
};
Account& TheAccount() {
  static auto* account = new Account;
  return *account;
}

}  // namespace

std::uint64_t RequestMade(std::string what, const char* file, unsigned line,
                          int rank_of_comm) {
  const int rank = ThreadsRank() >= 0  ? ThreadsRank()
                   : RanksAreThreads() ? rank_of_comm
                                       : -1;
  Account& a = TheAccount();
  std::lock_guard<std::mutex> lock(a.mu);
  const std::uint64_t id = a.next++;
  a.in_flight.emplace(id, InFlight{std::move(what), file, line, rank});
  return id;
}

int RequestOwner(std::uint64_t id) {
  Account& a = TheAccount();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.in_flight.find(id);
  return it != a.in_flight.end() ? it->second.rank : ThreadsRank();
}

void RequestWaited(std::uint64_t id) {
  if (id == 0) return;
  Account& a = TheAccount();
  std::lock_guard<std::mutex> lock(a.mu);
  a.in_flight.erase(id);
}

void RequestDroppedAndFailed(int owner, const std::string& what,
                             const char* file, unsigned line,
                             const std::string& error) {
  Account& a = TheAccount();
  std::lock_guard<std::mutex> lock(a.mu);
  a.problems.emplace_back(
      owner,
      RequestProblem{file, line,
                     fmt::format("the Request of {} made here was destroyed "
                                 "without wait(), and its operation failed: {}",
                                 what, error)});
}

std::vector<RequestProblem> TakeRequestProblems(bool ended) {
  Account& a = TheAccount();
  std::lock_guard<std::mutex> lock(a.mu);
  const int me = ThreadsRank();
  std::vector<RequestProblem> out;
  std::erase_if(a.problems, [&](auto& p) {
    if (!Takes(me, p.first)) return false;
    out.push_back(std::move(p.second));
    return true;
  });
  if (!ended) return out;
  for (auto it = a.in_flight.begin(); it != a.in_flight.end();) {
    const InFlight& request = it->second;
    if (!Takes(me, request.rank)) {
      ++it;
      continue;
    }
    out.push_back(
        {request.file, request.line,
         fmt::format("{} made here was never waited for: the test ended "
                     "with its Request pending (kept past the test, in a "
                     "static or a fixture member?); call wait(), or let the "
                     "Request go out of scope, before the test ends (a "
                     "message nobody receives, or a receive nobody sends to, "
                     "never completes)",
                     request.what)});
    it = a.in_flight.erase(it);
  }
  return out;
}

}  // namespace disttest::internal
