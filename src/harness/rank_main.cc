// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank_main.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/rank_outcome.h"
#include "harness/verdict.h"

namespace disttest::internal {
namespace {

// How long a rank waits for room in its result queue. The parent drains it
// every few milliseconds; if it cannot for this long, it is gone.
constexpr std::chrono::seconds kSendTimeout(30);

// Leaves the rank. _exit, not exit(): no atexit handlers or static
// destructors of the parent's copy run here, and buffered stdio is flushed
// exactly once, by us.
[[noreturn]] void Leave(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

std::unique_ptr<ResultChannel> OpenChannel() {
  const char* name = std::getenv(env::kInternalResultQueue);
  if (name == nullptr) {
    std::fprintf(stderr, "disttest: %s is not set in a rank process\n",
                 env::kInternalResultQueue);
    Leave(kExitHarnessError);
  }
  try {
    auto channel = ResultChannel::Open(name);
    // Processes this rank starts must not mistake themselves for ranks.
    unsetenv(env::kInternalResultQueue);
    unsetenv(env::kInternalChildTest);
    return channel;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: %s\n", e.what());
    Leave(kExitHarnessError);
  }
}

// The deadline of every blocking operation in a rank: shorter than the
// test's, so that a rank stuck in a collective reports which operation and
// which peer before the parent's timeout kills it.
std::chrono::milliseconds RankTimeout(std::chrono::milliseconds test) {
  return test - std::min<std::chrono::milliseconds>(test / 10,
                                                    std::chrono::seconds(5));
}

// Rendezvous, communicator and the first barrier. Throws on failure.
std::unique_ptr<Communicator> Connect(const RankEnv& env,
                                      const Options& options,
                                      std::unique_ptr<TcpStore>* store) {
  *store = std::make_unique<TcpStore>(env.master_addr, env.master_port,
                                      RankTimeout(options.timeout));
  GlooOptions gloo;
  gloo.hostname = env.master_addr;
  gloo.timeout = RankTimeout(options.timeout);
  auto comm = CreateCommunicator(options.backend, **store, env.rank,
                                 env.world_size, gloo);
  comm->barrier();
  return comm;
}

}  // namespace

void RunRank(RankProgram& program, const Options& options) {
  // A peer that died closes its sockets; writing to one must fail the
  // operation with EPIPE (and a message naming the peer), not kill this rank
  // with SIGPIPE. Gloo writes without MSG_NOSIGNAL.
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<ResultChannel> channel = OpenChannel();
  ReportFn report = [&](const RankMessage& m) {
    if (!channel->Send(m, kSendTimeout)) {
      std::fprintf(stderr, "disttest: a result could not be sent: %s\n",
                   m.message.c_str());
    }
  };
  RankVerdict verdict = RankVerdict::kFailed;
  int code = kExitHarnessError;
  try {
    RankEnv env = RankEnv::FromEnvironment();
    std::unique_ptr<TcpStore> store;
    std::unique_ptr<Communicator> comm;
    if (options.init_distributed) comm = Connect(env, options, &store);
    verdict = program.Run(env, comm.get(), report);
    code = verdict == RankVerdict::kPassed    ? kExitPassed
           : verdict == RankVerdict::kSkipped ? kExitSkipped
                                              : kExitFailed;
    // The store and communicator are not destroyed: _exit tears the sockets
    // down at once, where Gloo's destructors would wait on its event loop.
    (void)store.release();
    (void)comm.release();
  } catch (const std::exception& e) {
    report({RankMessage::Kind::kFatalFailure, program.file(), program.line(),
            fmt::format("disttest could not set up the rank: {}", e.what())});
    verdict = RankVerdict::kFailed;
    code = kExitFailed;
  }
  const char* word = verdict == RankVerdict::kPassed    ? kVerdictPassed
                     : verdict == RankVerdict::kSkipped ? kVerdictSkipped
                                                        : kVerdictFailed;
  report({RankMessage::Kind::kDone, "", -1, word});
  Leave(code);
}

}  // namespace disttest::internal
