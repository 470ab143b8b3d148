// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// EmergencyCleanup: what a test leaves behind when its parent is stopped by
// SIGINT, SIGTERM or SIGHUP (Ctrl-C, a CI runner cancelling a job) rather
// than SIGKILL: the handler kills the test's process group and removes its
// result queues, then lets the signal end the process as it would have.
//
//   EmergencyCleanup guard;                 // handlers installed
//   guard.Arm(pgid, queue_names);           // once the ranks exist
//   ...                                     // guard's destructor restores
//
// Several may live at once (a test's, and pooled ranks'): the handler
// cleans up after all of them; the last one gone restores the handlers.
//
// Only async-signal-safe calls run in the handler (kill, shm_unlink,
// sigaction, raise); everything it needs is prepared by Arm(). A SIGKILLed
// parent cannot clean up: its ranks die through PDEATHSIG and its queues are
// removed by the next run (RemoveQueuesOfDeadProcesses).
#ifndef DISTTEST_SRC_HARNESS_PROCESS_EMERGENCY_CLEANUP_H_
#define DISTTEST_SRC_HARNESS_PROCESS_EMERGENCY_CLEANUP_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace disttest::internal {

class EmergencyCleanup {
 public:
  EmergencyCleanup();
  ~EmergencyCleanup();
  EmergencyCleanup(const EmergencyCleanup&) = delete;
  EmergencyCleanup& operator=(const EmergencyCleanup&) = delete;

  // What the handler cleans: the group (0: none) and the queues (Boost
  // names).
  void Arm(pid_t pgid, const std::vector<std::string>& queue_names);

  // In a forked rank: the parent's handlers and plan are not the rank's.
  static void ResetInChild();

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3];  // As found by the first live object.
};

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_EMERGENCY_CLEANUP_H_
