// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/peer_errors.h"

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

// By rank: rank threads of one process (LaunchMode::kThreads) each note
// their own (base/threads.h); -1 is a process's one rank.
struct Noted {
  std::mutex mu;
  std::map<int, std::vector<std::string>> errors;
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

void ForgetErrorsOfPeers() {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  n.errors.erase(ThreadsRank());
}

}  // namespace disttest::internal
