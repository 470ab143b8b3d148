// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank_outcome.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace disttest::internal {

RankOutcome RankOutcome::FromWaitStatus(int status) {
  RankOutcome o;
  if (WIFEXITED(status)) {
    o.exited_ = true;
    o.code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o.signaled_ = true;
    o.code_ = WTERMSIG(status);
    o.core_dumped_ = WCOREDUMP(status);
  }
  return o;
}

RankOutcome RankOutcome::FromSigInfo(const siginfo_t& info) {
  RankOutcome o;
  if (info.si_code == CLD_EXITED) {
    o.exited_ = true;
  } else {
    o.signaled_ = true;
    o.core_dumped_ = info.si_code == CLD_DUMPED;
  }
  o.code_ = info.si_status;
  return o;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return fmt::format("signal {}", signal);
  return fmt::format("SIG{}", abbrev);
}

std::string RankOutcome::str() const {
  if (exited_) return fmt::format("exited with status {}", code_);
  if (signaled_) {
    return fmt::format("killed by signal {} ({}{}){}", code_, SignalName(code_),
                       core_dumped_ ? ", core dumped" : "",
                       sender_.empty() ? "" : " " + sender_);
  }
  return "still running";
}

}  // namespace disttest::internal
