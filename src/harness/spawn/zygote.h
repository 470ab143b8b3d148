// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The zygote: where kExec ranks come from. Re-executing the test binary
// costs about 3 ms of CPU a rank on a 2-core machine, nearly all of it
// exec() and the dynamic loader mapping and relocating a dozen shared
// libraries, before the binary runs a line of its own. The zygote is the
// binary exec'd once with a rank's command line and stopped in the first
// static constructor of the executable, before any of the program's own
// (the shared libraries' have run). Each kExec rank is a fork of it (as
// Android starts its apps): a process in the state of a freshly exec'd one,
// which then takes its rank's environment, working directory, output pipes,
// open-files limit, umask and process group, and goes on with the program's
// start-up as an exec'd rank does. Of the test process it has nothing but
// what it was started with: no descriptor but the ones each message brings.
//
//   // ExecSpawner::Spawn, in the parent:
//   pid_t pid = Zygote::Get().Spawn(request, argv, envp);  // -1: exec it
//
// The protocol, whole:
//   - the first kExec rank starts the zygote: posix_spawn of /proc/self/exe
//     with the rank's command line, whose --gtest_filter is
//     kPlaceholderFilter, the parent's environment, and
//     DISTTEST_INTERNAL_ZYGOTE_FD naming its end of a socket pair;
//   - its constructor (priority 101: before the executable's own static
//     initialisers) serves that socket until it closes;
//   - Spawn() sends one message: the process group to join, the working
//     directory, the --gtest_filter argument and the whole environment, with
//     the output pipes, the arena's and the ledgers' memfds and the
//     results-ready pipe as SCM_RIGHTS;
//   - the zygote forks twice; the middle process puts the rank into the
//     ranks' process group, sends its pid and exits, so that the rank is
//     reparented to the parent, which is a subreaper while a test runs: it
//     is the parent's child like any rank it forks. The zygote sends the pid
//     on to the parent with one end of a socket pair whose other end the
//     rank waits on; the parent, now knowing the pid, says go: a rank whose
//     pid the parent does not have never runs;
//   - the rank sets PR_SET_PDEATHSIG, puts what came in place and returns
//     into the program's start-up;
//   - a closed socket (the parent ends it at exit, or died) ends the zygote,
//     as does PR_SET_PDEATHSIG;
//   - a zygote gone (or silent for 10 s, then killed) before it answered:
//     the rank it may have forked sees its go's socket close and exits
//     unseen (a zombie child of the test process until that ends: at most
//     one a run); that rank and every one after it are exec'd, with a
//     note. The test goes on. One gone after it answered changes nothing
//     for that rank.
//
// What a rank cannot take from its test: what the shared libraries did in
// their own initialisers, with the environment the zygote started with
// (disttest and gtest read theirs later); /proc/self/cmdline, which shows
// the placeholder filter; /proc/<pid>/environ, which shows the zygote's
// environment (what the process started with); descriptors the test
// process leaves open across exec. The zygote is a child of the test
// process for the whole run: a test that wait()s for any child may reap
// it (the next kExec rank is then exec'd). DISTTEST_NO_ZYGOTE=1 execs every
// rank.
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
