// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/emergency_cleanup.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>

namespace disttest::internal {
namespace {

// What the handler reads. Arm() writes the slot that is not published, then
// publishes it, so a handler running on another thread never reads a plan
// being written (unless two Arms happen within one handler run).
struct Plan {
  pid_t pgid = 0;
  std::vector<std::string> shm_paths;  // "/<queue name>", as shm_open sees it.
};

Plan g_slots[2];
std::atomic<int> g_published{-1};  // Index into g_slots, or -1.
// The dispositions before disttest's, restored before the signal is raised
// again, so a test program's own handler still runs.
struct sigaction g_previous[NSIG];

void OnSignal(int sig) {
  int saved_errno = errno;
  int slot = g_published.load();
  if (slot >= 0) {
    const Plan& plan = g_slots[slot];
    if (plan.pgid > 0) kill(-plan.pgid, SIGKILL);
    for (const std::string& path : plan.shm_paths) shm_unlink(path.c_str());
  }
  // Then whatever would have happened without disttest.
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
  errno = saved_errno;
}

}  // namespace

EmergencyCleanup::EmergencyCleanup() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    sigaction(kSignals[i], nullptr, &old_[i]);
    // A signal the program ignores (nohup, some CI runners) stays ignored:
    // it would not have stopped the test.
    if (old_[i].sa_handler == SIG_IGN) continue;
    g_previous[kSignals[i]] = old_[i];
    sigaction(kSignals[i], &sa, nullptr);
  }
}

EmergencyCleanup::~EmergencyCleanup() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  g_published.store(-1);
}

void EmergencyCleanup::Arm(pid_t pgid,
                           const std::vector<std::string>& queue_names) {
  int next = g_published.load() == 0 ? 1 : 0;
  Plan& plan = g_slots[next];
  plan.pgid = pgid;
  plan.shm_paths.clear();
  for (const std::string& name : queue_names) {
    plan.shm_paths.push_back("/" + name);
  }
  g_published.store(next);
}

void EmergencyCleanup::ResetInChild() {
  g_published.store(-1);
  for (int sig : kSignals) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == OnSignal)
      sigaction(sig, &g_previous[sig], nullptr);
  }
}

}  // namespace disttest::internal
