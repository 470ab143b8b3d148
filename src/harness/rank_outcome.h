// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankOutcome: how a rank process ended, from its wait status.
//
//   RankOutcome o = RankOutcome::FromWaitStatus(status);
//   o.str();   // "exited with status 3" / "killed by signal 11 (SIGSEGV)"
//
// Terms: the *wait status* is what waitpid() fills in; the *exit code* is
// the number a process passed to _exit(). A rank's exit code is one of
// RankExitCode when the harness ended it, anything else when the test did.
#ifndef DISTTEST_SRC_HARNESS_RANK_OUTCOME_H_
#define DISTTEST_SRC_HARNESS_RANK_OUTCOME_H_

#include <signal.h>

#include <string>
#include <utility>

namespace disttest::internal {

// Exit codes of a rank that the harness ended. Chosen away from 0-3 and
// 126-128+, which tests, shells and signals use.
enum RankExitCode : int {
  kExitPassed = 0,
  kExitFailed = 81,
  kExitSkipped = 82,
  kExitHarnessError = 83,  // Rendezvous, communicator or channel failed.
  kExitExecFailed = 84,    // exec() of the test binary failed.
};

class RankOutcome {
 public:
  RankOutcome() = default;
  static RankOutcome FromWaitStatus(int status);
  // From waitid()'s siginfo (si_code CLD_EXITED, CLD_KILLED or CLD_DUMPED).
  static RankOutcome FromSigInfo(const siginfo_t& info);

  bool exited() const { return exited_; }
  int exit_code() const { return code_; }
  bool signaled() const { return signaled_; }
  int signal() const { return code_; }

  // "exited with status 3", "killed by signal 11 (SIGSEGV, core dumped)",
  // "killed by signal 9 (SIGKILL) by the kernel's OOM killer (...)".
  std::string str() const;

  // Who sent the signal, when the harness found out: "by the kernel's OOM
  // killer (...)".
  void set_sender(std::string sender) { sender_ = std::move(sender); }

 private:
  bool exited_ = false;
  bool signaled_ = false;
  bool core_dumped_ = false;
  int code_ = 0;
  std::string sender_;
};

// "SIGSEGV", or "signal 77" for one without a name.
std::string SignalName(int signal);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_OUTCOME_H_
