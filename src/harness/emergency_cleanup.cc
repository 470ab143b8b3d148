// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/emergency_cleanup.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>

namespace disttest::internal {
namespace {

// What the handler reads. Written before it is published and never changed
// while published.
struct Plan {
  pid_t pgid = 0;
  std::vector<std::string> shm_paths;  // "/<queue name>", as shm_open sees it.
};

std::atomic<const Plan*> g_plan{nullptr};
Plan g_storage;
// The dispositions before disttest's, restored before the signal is raised
// again, so a test program's own handler still runs.
struct sigaction g_previous[NSIG];

void OnSignal(int sig) {
  if (const Plan* plan = g_plan.load()) {
    if (plan->pgid > 0) kill(-plan->pgid, SIGKILL);
    for (const std::string& path : plan->shm_paths) shm_unlink(path.c_str());
  }
  // Then whatever would have happened without disttest.
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
}

}  // namespace

EmergencyCleanup::EmergencyCleanup() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    sigaction(kSignals[i], &sa, &old_[i]);
    g_previous[kSignals[i]] = old_[i];
  }
}

EmergencyCleanup::~EmergencyCleanup() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  g_plan.store(nullptr);
}

void EmergencyCleanup::Arm(pid_t pgid,
                           const std::vector<std::string>& queue_names) {
  // Unpublish before changing what the handler would read.
  g_plan.store(nullptr);
  g_storage.pgid = pgid;
  g_storage.shm_paths.clear();
  for (const std::string& name : queue_names) {
    g_storage.shm_paths.push_back("/" + name);
  }
  g_plan.store(&g_storage);
}

}  // namespace disttest::internal
