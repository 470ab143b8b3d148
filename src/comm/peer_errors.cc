// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/peer_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "base/threads.h"

namespace disttest::internal {
namespace {

// A test raises a few such errors (one per collective that a peer broke);
// a rank that keeps calling after that adds the same text again.
constexpr std::size_t kMaxNoted = 64;

constexpr std::string_view kCallsDoNotMatch =
    "Calls that do not match across the ranks are a bug of the program";

// By rank: rank threads of one process (LaunchMode::kThreads) each note
// their own (base/threads.h); -1 is a process's one rank.
struct Noted {
  std::mutex mu;
  std::map<int, std::vector<std::string>> errors;
  // What MismatchOfCalls said; where the call was, once placed.
  struct Mismatch {
    std::string what;
    MismatchThrown thrown;
    bool placed = false;
    bool said = false;  // A failure of the test quotes it.
    // The error of the call it was placed at, where that does not quote
    // `what` (a cut call's): a failure that quotes it says it too.
    std::string thrown_as;
  };
  std::map<int, std::vector<Mismatch>> mismatches;
};

Noted& TheNoted() {
  static Noted* noted = new Noted;  // Never destroyed: used until _exit.
  return *noted;
}

}  // namespace

CommError ErrorOfAPeer(std::string what) {
  Noted& n = TheNoted();
  {
    std::lock_guard<std::mutex> lock(n.mu);
    std::vector<std::string>& errors = n.errors[ThreadsRank()];
    if (errors.size() < kMaxNoted &&
        std::find(errors.begin(), errors.end(), what) == errors.end()) {
      errors.push_back(what);
    }
  }
  return CommError(what);
}

bool ReportsAnErrorOfAPeer(std::string_view failure_text) {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  const std::vector<std::string>& errors = n.errors[ThreadsRank()];
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) {
    return failure_text.find(e) != std::string_view::npos;
  });
}

// Whose a mismatch is: the calling rank thread's, a process's one rank
// (-1), or, in a thread a rank started where the ranks are threads, the
// rank of the communicator.
int MismatchOwner(int rank_of_comm) {
  if (ThreadsRank() >= 0) return ThreadsRank();
  return RanksAreThreads() ? rank_of_comm : -1;
}

CommError MismatchOfCalls(std::string what, int rank_of_comm) {
  Noted& n = TheNoted();
  {
    std::lock_guard<std::mutex> lock(n.mu);
    std::vector<Noted::Mismatch>& mismatches =
        n.mismatches[MismatchOwner(rank_of_comm)];
    if (mismatches.size() < kMaxNoted) {
      mismatches.push_back({what,
                            {"", 0, what, std::string(kCallsDoNotMatch)},
                            false,
                            false,
                            ""});
    }
  }
  return CommError(what);
}

CommError BugOfTheProgram(std::string what, std::string bug, const char* file,
                          unsigned line, int rank_of_comm) {
  Noted& n = TheNoted();
  {
    std::lock_guard<std::mutex> lock(n.mu);
    std::vector<Noted::Mismatch>& mismatches =
        n.mismatches[MismatchOwner(rank_of_comm)];
    if (mismatches.size() < kMaxNoted) {
      mismatches.push_back(
          {what,
           {file != nullptr ? file : "", line, what, std::move(bug)},
           /*placed=*/true,
           false,
           ""});
    }
  }
  return CommError(what);
}

void PlaceMismatch(std::string_view error, std::string_view cut_reason,
                   const char* file, unsigned line, int rank_of_comm) {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  auto it = n.mismatches.find(MismatchOwner(rank_of_comm));
  if (it == n.mismatches.end()) return;
  for (Noted::Mismatch& m : it->second) {
    if (m.placed) continue;
    if (error.find(m.what) != std::string_view::npos) {
      m.thrown = {file != nullptr ? file : "", line, std::string(error),
                  m.thrown.bug};
    } else if (!cut_reason.empty() &&
               cut_reason.find(m.what) != std::string_view::npos) {
      m.thrown = {file != nullptr ? file : "", line,
                  fmt::format("{} (disttest cut the communicators: {})", error,
                              cut_reason),
                  m.thrown.bug};
      m.thrown_as = std::string(error);
    } else {
      continue;
    }
    m.placed = true;
  }
}

bool IsMismatchOfCalls(std::string_view error) {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  auto it = n.mismatches.find(MismatchOwner(-1));
  if (it == n.mismatches.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](auto& m) {
    return error.find(m.what) != std::string_view::npos;
  });
}

void NoteSaid(std::string_view failure_text) {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  auto it = n.mismatches.find(ThreadsRank());
  if (it == n.mismatches.end()) return;
  for (Noted::Mismatch& m : it->second) {
    if (failure_text.find(m.what) != std::string_view::npos ||
        (!m.thrown_as.empty() &&
         failure_text.find(m.thrown_as) != std::string_view::npos)) {
      m.said = true;
    }
  }
}

std::vector<MismatchThrown> MismatchesNotSaid(bool test_failed) {
  std::vector<Noted::Mismatch> mismatches;
  {
    Noted& n = TheNoted();
    std::lock_guard<std::mutex> lock(n.mu);
    auto it = n.mismatches.find(ThreadsRank());
    if (it == n.mismatches.end()) return {};
    mismatches = std::move(it->second);
    n.mismatches.erase(it);
  }
  std::vector<MismatchThrown> out;
  for (Noted::Mismatch& m : mismatches) {
    // A wait that threw it again (a request's), or a rank that called on
    // after it: one report.
    const bool twice = std::any_of(out.begin(), out.end(), [&](auto& o) {
      return o.error.find(m.what) != std::string::npos;
    });
    if (twice || m.said || (!m.placed && test_failed)) continue;
    out.push_back(std::move(m.thrown));
  }
  return out;
}

void ForgetErrorsOfPeers() {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  n.errors.erase(ThreadsRank());
  n.mismatches.erase(ThreadsRank());
}

}  // namespace disttest::internal
