// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RunRank: the whole life of a rank process, read top to bottom in
// rank_main.cc: environment in, result queue open, store and communicator
// up, barrier, the program (set-up, body, tear-down), report, _exit.
//
//   class MyProgram : public RankProgram { ... };
//   RunRank(program, options);   // never returns
//
// It does not care how the process was started (forked, re-executed or, in
// time, by an external launcher): everything it needs is in the environment
// (RankEnv plus DISTTEST_INTERNAL_RESULT_QUEUE).
#ifndef DISTTEST_SRC_HARNESS_RANK_MAIN_H_
#define DISTTEST_SRC_HARNESS_RANK_MAIN_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/comm/host_arena.h"
#include "disttest/env/rank_env.h"
#include "disttest/harness/options.h"
#include "disttest/rendezvous/store.h"
#include "harness/result_channel.h"

namespace disttest::internal {

enum class RankVerdict { kPassed, kFailed, kSkipped };

using ReportFn = std::function<void(const RankMessage&)>;

// What a rank runs once its communicator is up. Implemented by the gtest
// glue; Run() must not throw.
class RankProgram {
 public:
  virtual ~RankProgram() = default;
  // `comm` is null when options.init_distributed is false; `store` is the
  // test's store, connected on first use.
  virtual RankVerdict Run(const RankEnv& env, Communicator* comm, Store& store,
                          const ReportFn& report) = 0;
  // Where harness failures (rendezvous, communicator) are reported.
  virtual const char* file() const = 0;
  virtual int line() const = 0;
  // A pooled rank's next test, by its full gtest name; null when this
  // binary has no such test. May throw (a fixture's constructor).
  virtual std::unique_ptr<RankProgram> Next(const std::string& /*test*/) {
    return nullptr;
  }
};

[[noreturn]] void RunRank(RankProgram& program, const Options& options);

// In a rank, the host arena of its test's ranks (null: none): set by the
// fork launcher in a forked rank, mapped from the descriptor it inherited in
// a re-executed one.
std::shared_ptr<HostArena>& RanksArena();

// This process's TCP sockets (IPv4 and IPv6): inode -> descriptor.
std::map<ino_t, int> TcpSockets();

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_RANK_MAIN_H_
