// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/emergency_cleanup.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <utility>

#include "harness/process/interrupt.h"

namespace disttest::internal {
namespace {

// What the handler reads. Arm() writes the slot that is not published, then
// publishes it, so a handler running on another thread never reads a plan
// being written (unless two Arms happen within one handler run).
struct Plan {
  std::vector<pid_t> pgids;
  std::vector<std::string> shm_paths;  // "/<queue name>", as shm_open sees it.
};

// Every live EmergencyCleanup's group and queues (a test's, and those of
// pooled ranks that outlive their tests), published to the handler as one
// plan: the handler reads one slot while the other is rewritten.
Plan g_slots[2];
std::atomic<int> g_published{-1};  // Index into g_slots, or -1.
struct sigaction g_previous[NSIG];
int g_installed = 0;  // Live EmergencyCleanup objects.

std::map<const void*, std::pair<pid_t, std::vector<std::string>>>&
Registered() {
  static auto* registered =
      new std::map<const void*, std::pair<pid_t, std::vector<std::string>>>;
  return *registered;
}

void Publish() {
  int next = g_published.load() == 0 ? 1 : 0;
  Plan& plan = g_slots[next];
  plan.pgids.clear();
  plan.shm_paths.clear();
  for (const auto& [owner, what] : Registered()) {
    if (what.first > 0) plan.pgids.push_back(what.first);
    for (const std::string& name : what.second) {
      plan.shm_paths.push_back("/" + name);
    }
  }
  g_published.store(next);
}

void OnSignal(int sig) {
  int saved_errno = errno;
  // The first SIGTERM or SIGINT during a supervised test ends that test
  // with its report (interrupt.h); the supervisor then cleans up. A second
  // one is an emergency.
  if (NoteInterrupt(sig)) {
    errno = saved_errno;
    return;
  }
  int slot = g_published.load();
  if (slot >= 0) {
    const Plan& plan = g_slots[slot];
    for (pid_t pgid : plan.pgids) kill(-pgid, SIGKILL);
    for (const std::string& path : plan.shm_paths) shm_unlink(path.c_str());
  }
  // Then whatever would have happened without disttest.
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
  errno = saved_errno;
}

}  // namespace

EmergencyCleanup::EmergencyCleanup() {
  Registered()[this] = {};
  if (g_installed++ > 0) return;
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
  Registered().erase(this);
  Publish();
  if (--g_installed > 0) return;
  for (int sig : kSignals) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == OnSignal) {
      sigaction(sig, &g_previous[sig], nullptr);
    }
  }
  g_published.store(-1);
}

void EmergencyCleanup::Arm(pid_t pgid,
                           const std::vector<std::string>& queue_names) {
  Registered()[this] = {pgid, queue_names};
  Publish();
}

void EmergencyCleanup::ResetInChild() {
  g_published.store(-1);
  Registered().clear();
  g_installed = 0;
  for (int sig : kSignals) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == OnSignal)
      sigaction(sig, &g_previous[sig], nullptr);
  }
}

}  // namespace disttest::internal
