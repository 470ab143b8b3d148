// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "comm/peer_errors.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace disttest::internal {
namespace {

// A test raises a few such errors (one per collective that a peer broke);
// a rank that keeps calling after that adds the same text again.
constexpr std::size_t kMaxNoted = 64;

struct Noted {
  std::mutex mu;
  std::vector<std::string> errors;
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
    if (n.errors.size() < kMaxNoted &&
        std::find(n.errors.begin(), n.errors.end(), what) == n.errors.end()) {
      n.errors.push_back(what);
    }
  }
  return CommError(what);
}

bool ReportsAnErrorOfAPeer(std::string_view failure_text) {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  return std::any_of(n.errors.begin(), n.errors.end(),
                     [&](const std::string& e) {
                       return failure_text.find(e) != std::string_view::npos;
                     });
}

void ForgetErrorsOfPeers() {
  Noted& n = TheNoted();
  std::lock_guard<std::mutex> lock(n.mu);
  n.errors.clear();
}

}  // namespace disttest::internal
