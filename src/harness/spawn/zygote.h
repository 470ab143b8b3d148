// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The zygote: where kExec ranks come from, each a fork of the test binary
// exec'd once and stopped before its program's start-up.
//
//   // ExecSpawner::Spawn, in the parent:
//   pid_t pid = Zygote::Get().Spawn(request, argv, envp);  // -1: exec it
//
// The protocol: docs/how-it-works.md#the-zygote.
#ifndef DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_H_
#define DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "harness/process/descendants.h"
#include "harness/spawn/rank_spawner.h"

namespace disttest::internal {

class Zygote {
 public:
  // The --gtest_filter argument the zygote is started with.
  static constexpr const char* kPlaceholderFilter = kZygotePlaceholderFilter;

  static Zygote& Get();
  // In the process that started it: ends and reaps it.
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // Starts the rank of `request` as a fork of the zygote (started now if
  // there is none, or if it was started with another command line), with
  // the command line `args` and the environment `env` ("NAME=value" each);
  // returns its pid, or -1 when the zygote is off or failed (the caller
  // then execs the rank itself; a zygote that failed is not used again).
  pid_t Spawn(const SpawnRequest& request, const std::vector<std::string>& args,
              const std::vector<std::string>& env);
  // Ends and reaps the zygote.
  void End();
  pid_t pid() const { return pid_; }

 private:
  Zygote();
  bool Start(const std::vector<std::string>& args);
  // Kills it unless it has exited, and reaps it; the socket stays open.
  void Reap();

  const pid_t owner_;
  std::vector<std::string> args_;  // Its command line.
  pid_t pid_ = -1;
  int socket_ = -1;
  bool broken_ = false;  // Failed once: exec every rank from now on.
};

// Whether the zygote is on (not DISTTEST_NO_ZYGOTE=1).
bool ZygoteEnabled();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SPAWN_ZYGOTE_H_
