// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// SIGTERM and SIGINT while a distributed test runs: ctest's TIMEOUT (with
// TIMEOUT_SIGNAL_NAME SIGTERM), a CI job's cancellation, a user's Ctrl-C.
// Instead of dying with nothing written, the parent ends the test in flight
// as a failure with its report (the ranks' ledgers and stacks, bounded),
// gtest skips the tests after it and writes its XML and JSON, and the
// process then ends by the same signal.
//
//   InterruptGuard guard;                 // while a test is supervised
//   if (int sig = PendingInterrupt()) ... // the supervisor's loop
//   ...
//   FinishInterrupted();                  // after gtest wrote its files
//
// A second signal while this goes on ends the process at once (the ranks
// go with it: they die with their parent, and the emergency clean-up
// removes their queues), except a SIGTERM after a SIGTERM: the launcher's
// repeat of its request (Slurm's time limit sends three, from two daemons),
// absorbed until the process ends by it, even after the test (the handlers
// stay until FinishInterrupted()). The launcher's SIGKILL bounds that. Outside
// a distributed test the signals do what they did before. SIGKILL cannot be
// caught: then no XML is written; the ranks and queues still go
// (PR_SET_PDEATHSIG, the emergency clean-up).
#ifndef DISTTEST_SRC_HARNESS_PROCESS_INTERRUPT_H_
#define DISTTEST_SRC_HARNESS_PROCESS_INTERRUPT_H_

#include <chrono>
#include <optional>
#include <string>

namespace disttest::internal {

// Catches SIGTERM and SIGINT for its lifetime (nested guards: the
// outermost), then puts back what was there.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal that came while a guard was up (0: none); it stays pending
// until the process ends.
int PendingInterrupt();
// When the pending signal came (steady clock); meaningful once
// PendingInterrupt() is not 0.
std::chrono::steady_clock::time_point InterruptArrivedAt();

// In a child forked while a guard is up, before anything else: the
// signals do there what they did before the guard (async-signal-safe).
void ResetInterruptsInChild();

// From a signal handler (async-signal-safe): notes `sig` and returns true
// when it is the first SIGTERM or SIGINT while a guard is up, which the
// supervisor then handles, or a SIGTERM that repeats a first SIGTERM
// (nothing more to do) until FinishInterrupted(); false when the handler
// should do what it would have done (the emergency clean-up's, which runs
// before this one).
bool NoteInterrupt(int sig);

// "SIGTERM (a CI job's cancellation, ctest's TIMEOUT or kill)", "SIGINT
// (Ctrl-C)": why the test in flight was ended. Under a launcher (set by the
// launched job), a SIGTERM is first the launcher's: "SIGTERM (mpirun ends
// every rank once one has exited or died; or the job was cancelled)".
std::string InterruptText(int sig);
// The launcher that started this process ("openmpi", "slurm", "torchrun"),
// for InterruptText.
void SetInterruptLauncher(const std::string& launcher);

// After the SIGTERM that came, how long the launcher lets this process live
// before its SIGKILL, where that is known: Open MPI's mpirun sends SIGTERM
// once a rank has exited or died and SIGKILL odls_base_sigkill_timeout
// seconds later (1 by default; OMPI_MCA_odls_base_sigkill_timeout). Nothing
// where no signal came, or the sender waits as long as it likes.
std::optional<std::chrono::milliseconds> TimeBeforeTheKill();

// When a signal came: ends the process by it, as it would have ended
// (after flushing stdio). Returns otherwise.
void FinishInterrupted();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PROCESS_INTERRUPT_H_
