// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/process/interrupt.h"

#include <fmt/format.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace disttest::internal {
namespace {

// The handlers read and write these, maybe on two threads at once (a
// process-directed signal goes to any thread): lock-free atomics.
std::atomic<int> g_signal{0};
// When it came (CLOCK_MONOTONIC, ns): set in the handler before g_signal.
std::atomic<long long> g_signal_ns{0};
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<long long>::is_always_lock_free);
// Lock-free, so the handler may read it.
std::atomic<int> g_depth{0};
// FinishInterrupted() runs: the signal now ends the process.
std::atomic<bool> g_finishing{false};
struct sigaction g_old_term {};
struct sigaction g_old_int {};

// Only async-signal-safe calls: the first signal is noted (the supervisor's
// loop sees it within a tick); a second one does what would have happened
// without the guard (the emergency clean-up of pooled ranks, then the
// default), now.
void OnSignal(int sig) {
  if (!NoteInterrupt(sig)) {
    struct sigaction before = sig == SIGTERM ? g_old_term : g_old_int;
    if ((before.sa_flags & SA_SIGINFO) == 0 && before.sa_handler == OnSignal) {
      before.sa_handler = SIG_DFL;  // Never this handler again: no loop.
      before.sa_flags = 0;
    }
    sigaction(sig, &before, nullptr);
    kill(getpid(), sig);  // Delivered when this handler returns.
  }
}

// Whether `sig`'s handler is the guard's.
bool Ours(int sig) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return (now.sa_flags & SA_SIGINFO) == 0 && now.sa_handler == OnSignal;
}

}  // namespace

bool NoteInterrupt(int sig) {
  if (sig != SIGTERM && sig != SIGINT) return false;
  if (g_finishing) return false;
  if (const int first = g_signal.load(); first != 0) {
    // The same request again: Slurm sends a step's processes SIGTERM twice
    // at its time limit, and its process group a third, from different
    // daemons (seconds apart on a loaded node). Not a request to end the
    // process at once, which would lose the report and the XML: the
    // launcher's SIGKILL bounds the wait (Slurm's KillWait, ctest's grace
    // period). A SIGINT after it, or a second one (Ctrl-C twice), is.
    return first == SIGTERM && sig == SIGTERM;
  }
  if (g_depth == 0) return false;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // Async-signal-safe.
  g_signal_ns =
      static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
  g_signal = sig;
  return true;
}

InterruptGuard::InterruptGuard() {
  if (g_depth++ > 0) return;
  // Still up from a guard that saw a signal (its handlers stay until the
  // process ends by it): what was before them stays what was before.
  if (g_signal != 0) return;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (auto [sig, old] :
       {std::pair{SIGTERM, &g_old_term}, {SIGINT, &g_old_int}}) {
    sigaction(sig, nullptr, old);
    if ((old->sa_flags & SA_SIGINFO) == 0 && old->sa_handler == OnSignal) {
      // Left by a guard whose handler another one replaced: what was
      // before it is the default.
      old->sa_handler = SIG_DFL;
      old->sa_flags = 0;
    }
    // An ignored signal (nohup, a background job's SIGINT) stays ignored.
    if ((old->sa_flags & SA_SIGINFO) == 0 && old->sa_handler == SIG_IGN) {
      continue;
    }
    sigaction(sig, &sa, nullptr);
  }
}

InterruptGuard::~InterruptGuard() {
  if (--g_depth > 0) return;
  // After a signal the handlers stay until FinishInterrupted(): a repeat
  // of the request that comes after the test, before gtest has written its
  // XML, must not end the process by the default action.
  if (g_signal != 0) return;
  // Only where the handler is still the guard's: one installed since (the
  // emergency clean-up of a pool made during the test) keeps this one as
  // its previous, and stays.
  if (Ours(SIGTERM)) sigaction(SIGTERM, &g_old_term, nullptr);
  if (Ours(SIGINT)) sigaction(SIGINT, &g_old_int, nullptr);
}

void ResetInterruptsInChild() {
  g_depth = 0;
  if (Ours(SIGTERM)) sigaction(SIGTERM, &g_old_term, nullptr);
  if (Ours(SIGINT)) sigaction(SIGINT, &g_old_int, nullptr);
}

int PendingInterrupt() { return g_signal; }

std::chrono::steady_clock::time_point InterruptArrivedAt() {
  // steady_clock is CLOCK_MONOTONIC on Linux. Not yet visible to this
  // thread (the handler ran on another): now, a moment late at most.
  const long long ns = g_signal_ns.load();
  if (ns == 0) return std::chrono::steady_clock::now();
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

namespace {
std::string& InterruptLauncher() {
  static std::string launcher;
  return launcher;
}
}  // namespace

void SetInterruptLauncher(const std::string& launcher) {
  InterruptLauncher() = launcher;
}

std::string InterruptText(int sig) {
  if (sig == SIGINT) return "SIGINT (Ctrl-C)";
  if (sig == SIGTERM) {
    const std::string& launcher = InterruptLauncher();
    if (launcher == "openmpi" || launcher == "mpich" ||
        launcher == "mvapich2") {
      return "SIGTERM (mpirun ends every rank once one has exited or died; "
             "or the job was cancelled, ctest's TIMEOUT)";
    }
    if (launcher == "slurm") {
      return "SIGTERM (Slurm ends a step at its time limit, on scancel, or "
             "with --kill-on-bad-exit once a task failed; or ctest's "
             "TIMEOUT)";
    }
    if (launcher == "torchrun") {
      return "SIGTERM (torchrun ends the other ranks once one failed; or "
             "the job was cancelled, ctest's TIMEOUT)";
    }
    return "SIGTERM (ctest's TIMEOUT, a CI job's cancellation or kill)";
  }
  return fmt::format("signal {}", sig);
}

std::optional<std::chrono::milliseconds> TimeBeforeTheKill() {
  if (g_signal != SIGTERM || InterruptLauncher() != "openmpi") {
    return std::nullopt;
  }
  long seconds = 1;  // Open MPI's default.
  if (const char* set = std::getenv("OMPI_MCA_odls_base_sigkill_timeout")) {
    char* end = nullptr;
    const long n = std::strtol(set, &end, 10);
    if (end != set && *end == '\0' && n >= 0) seconds = std::min(n, 3600L);
  }
  return std::chrono::seconds(seconds);
}

void FinishInterrupted() {
  const int sig = g_signal;
  if (sig == 0) return;
  g_finishing = true;  // The handlers now end the process by it.
  std::fflush(nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  // As it would have ended: through whatever handles it now (the emergency
  // clean-up of pooled ranks still alive, which then re-raises it), else by
  // the default action.
  raise(sig);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
  _exit(128 + sig);  // Not reached unless the signal is blocked elsewhere.
}

}  // namespace disttest::internal
