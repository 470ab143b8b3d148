// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank_main.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "disttest/comm/create.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/text.h"
#include "harness/descendants.h"
#include "harness/rank_outcome.h"
#include "harness/stack_dump.h"
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
    if (const char* ready = std::getenv(env::kInternalResultsReadyFd)) {
      if (IsDigits(ready) && std::strlen(ready) < 10) {
        const int fd = std::atoi(ready);
        // Not for the programs this rank executes.
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) channel->NotifyOnSend(fd);
      }
      unsetenv(env::kInternalResultsReadyFd);
    }
    // Processes this rank starts must not mistake themselves for ranks.
    unsetenv(env::kInternalResultQueue);
    unsetenv(env::kInternalChildTest);
    unsetenv(env::kInternalStoreToken);
    unsetenv(env::kInternalStorePort);
    return channel;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: %s\n", e.what());
    Leave(kExitHarnessError);
  }
}

// Tells the parent the rank's verdict. Sent before the rank meets the others
// at the end, so that a rank killed while it waits there for a stuck peer
// is judged by what it did, not by how it was ended.
void ReportDone(const ReportFn& report, RankVerdict verdict) {
  // The test's output reaches the pipe before its verdict the parent (a
  // pooled rank goes on to another test, whose output must not hold it).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const char* word = verdict == RankVerdict::kPassed    ? kVerdictPassed
                     : verdict == RankVerdict::kSkipped ? kVerdictSkipped
                                                        : kVerdictFailed;
  report({RankMessage::Kind::kDone, "", -1, word});
}

// Ends the processes `whose` test started and left running, saying so: the
// rank is their subreaper, so a daemon that forked twice and called
// setsid() is still its own. Only once every rank is done with the test
// (after the exit meeting, or when a pooled rank gets its next test): a
// helper one rank started may serve its peers until then.
void EndLeftovers(const char* whose) {
  for (const std::string& process : EndChildren()) {
    std::cout.flush();
    std::fprintf(stderr,
                 "disttest: note: ended process %s, which %s started and left "
                 "running\n",
                 process.c_str(), whose);
  }
  std::fflush(stderr);
}

// While a rank waits for a debugger, nothing in any rank should time out.
constexpr std::chrono::hours kDebugTimeout(24);

// The deadline of every blocking operation in a rank: shorter than the
// test's, so that a rank stuck in a collective reports which operation and
// which peer before the parent's timeout kills it.
std::chrono::milliseconds RankTimeout(const RankEnv& env,
                                      std::chrono::milliseconds test) {
  std::optional<int> debug_rank = DebugRankVariable();
  if (debug_rank && *debug_rank < env.world_size) return kDebugTimeout;
  return test - std::min<std::chrono::milliseconds>(test / 10,
                                                    std::chrono::seconds(5));
}

bool DebuggerAttached() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("TracerPid:", 0) == 0) {
      return std::strtol(line.c_str() + 10, nullptr, 10) != 0;
    }
  }
  return false;
}

// DISTTEST_DEBUG_RANK: this rank waits, before it joins the others, until a
// debugger has attached. Any process of this user may attach to it.
void WaitForDebugger(const RankEnv& env) {
  std::optional<int> debug_rank = DebugRankVariable();
  if (!debug_rank || *debug_rank != env.rank) return;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::fprintf(stderr,
               "disttest: rank %d is pid %d and waits for a debugger; the "
               "other ranks wait for it. Attach with:\n  gdb -p %d\n",
               env.rank, getpid(), getpid());
  std::fflush(stderr);
  while (!DebuggerAttached()) poll(nullptr, 0, 100);
  std::fprintf(stderr, "disttest: rank %d: a debugger is attached; going on\n",
               env.rank);
  std::fflush(stderr);
}

// Meets every rank after the body, through the store, then makes this
// rank's own TCP connections (not those it inherited: they are shared with
// the parent) end with a reset when it exits, so that thousands
// of tests leave no TIME_WAIT sockets behind (which would make binding a
// port ever slower). Only after the meeting: no peer still waits for data.
// A rank that failed only says it is here and leaves at once (its peers may
// be blocked in a collective with it, and must see its connections close).
void MeetAndDropConnections(TcpStore& store, const RankEnv& env,
                            const std::map<ino_t, int>& inherited,
                            bool failed) {
  // A rank alone has nobody to meet.
  if (env.world_size > 1) {
    try {
      store.set_timeout(std::chrono::seconds(1));
      if (store.add("disttest/exit", 1) == env.world_size) {
        store.set("disttest/exit/all", std::string_view("1"));
      }
      if (!failed) store.wait({"disttest/exit/all"});
    } catch (const std::exception&) {
      return;  // A peer did not get here; end the usual way.
    }
  }
  if (failed) return;
  for (const auto& [inode, fd] : TcpSockets()) {
    if (inherited.count(inode) != 0) continue;
    linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
}

// Whether a pooled rank's communicator may serve another test: no operation
// of it failed (a test may have caught the CommError). A rank whose
// communicator failed leaves after its verdict, and the parent starts over
// with fresh ranks.
bool Reusable(Communicator* comm) { return comm == nullptr || !comm->failed(); }

// A pooled rank (DISTTEST_INTERNAL_POOL): after its first test it runs the
// tests the parent hands it ("disttest/pool/<n>" = a test's name), each
// under a store prefix of its own, until the name is empty (leave) or a test
// fails here (the parent ends the pool then). Returns the last verdict.
RankVerdict ServePool(RankProgram& first, const RankEnv& env,
                      Communicator* comm, TcpStore& store,
                      const ReportFn& report) {
  const std::chrono::milliseconds timeout = store.timeout();
  for (int n = 1;; ++n) {
    // Waiting for the next test has no deadline: the parent decides, and a
    // parent that dies takes this process with it (PR_SET_PDEATHSIG).
    store.set_timeout(std::chrono::hours(24 * 365));
    // Parked, the communicator's event loop sleeps instead of waking every
    // 10 ms (and taking CPU from the tests that run meanwhile).
    auto* gloo = dynamic_cast<GlooCommunicator*>(comm);
    if (gloo != nullptr) gloo->PauseEventLoop();
    std::vector<char> name = store.get(fmt::format("disttest/pool/{}", n));
    if (gloo != nullptr) gloo->ResumeEventLoop();
    store.set_timeout(timeout);
    if (name.empty()) return RankVerdict::kPassed;
    // Every rank has finished the last test: what it left running goes now.
    EndLeftovers("an earlier test on this rank");
    const std::string test(name.begin(), name.end());
    RankVerdict verdict = RankVerdict::kFailed;
    try {
      std::unique_ptr<RankProgram> next = first.Next(test);
      if (next == nullptr) {
        throw Error(
            fmt::format("this binary has no distributed test {}", test));
      }
      PrefixStore own(fmt::format("disttest/pool/{}", n), store);
      verdict = next->Run(env, comm, own, report);
    } catch (const std::exception& e) {
      report({RankMessage::Kind::kFatalFailure, first.file(), first.line(),
              fmt::format("a pooled rank could not start {}: {}", test,
                          e.what())});
    }
    const bool again = verdict != RankVerdict::kFailed && Reusable(comm);
    ReportDone(report, verdict);
    if (!again) return verdict;
  }
}

// A re-executed rank maps the host arena from the descriptor it kept across
// exec (a forked one has it mapped already). Throws on a bad descriptor.
void AttachInheritedArena(const RankEnv& env) {
  const char* fd = std::getenv(env::kInternalArenaFd);
  if (fd == nullptr) return;
  std::string value = fd;
  unsetenv(env::kInternalArenaFd);  // Not for the processes a test starts.
  if (!IsDigits(value) || value.size() > 9) {
    throw Error(
        fmt::format("{}={} is not a descriptor", env::kInternalArenaFd, value));
  }
  RanksArena() = HostArena::Attach(std::stoi(value), env.world_size);
}

// Rendezvous, communicator and the first barrier. Throws on failure.
std::unique_ptr<Communicator> Connect(const RankEnv& env,
                                      const Options& options,
                                      std::unique_ptr<TcpStore>* store) {
  GlooOptions gloo;
  gloo.hostname = env.master_addr;
  gloo.timeout = RankTimeout(env, options.timeout);
  gloo.arena = RanksArena();
  // An NCCL rank uses device 0: the harness lists its own GPU first in
  // CUDA_VISIBLE_DEVICES.
  auto comm = CreateCommunicator(options.backend, **store, env.rank,
                                 env.world_size, gloo, /*device=*/0);
  comm->barrier();
  return comm;
}

}  // namespace

std::shared_ptr<HostArena>& RanksArena() {
  static auto* arena = new std::shared_ptr<HostArena>;
  return *arena;
}

std::map<ino_t, int> TcpSockets() {
  std::map<ino_t, int> sockets;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(entry.path().filename().c_str());
    int type = 0;
    socklen_t len = sizeof type;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    struct stat st {};
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 ||
        (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) ||
        fstat(fd, &st) != 0) {
      continue;
    }
    sockets.emplace(st.st_ino, fd);
  }
  return sockets;
}

void RunRank(RankProgram& program, const Options& options) {
  // A peer that died closes its sockets; writing to one must fail the
  // operation with EPIPE (and a message naming the peer), not kill this rank
  // with SIGPIPE. Gloo writes without MSG_NOSIGNAL.
  std::signal(SIGPIPE, SIG_IGN);
  InstallStackSignalHandler();
  // Orphans of the processes the test starts come to this rank, not to
  // init: ReportDone ends them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Only a rank with a communicator resets its connections at the end.
  const std::map<ino_t, int> inherited_sockets =
      options.init_distributed ? TcpSockets() : std::map<ino_t, int>{};
  const char* token_variable = std::getenv(env::kInternalStoreToken);
  const std::string token = token_variable != nullptr ? token_variable : "";
  // The harness's store; MASTER_PORT is the code under test's.
  const char* store_port = std::getenv(env::kInternalStorePort);
  const std::string store_port_text = store_port != nullptr ? store_port : "";
  std::unique_ptr<ResultChannel> channel = OpenChannel();
  ReportFn report = [&](const RankMessage& m) {
    if (!channel->Send(m, kSendTimeout)) {
      std::fprintf(stderr, "disttest: a result could not be sent: %s\n",
                   m.message.c_str());
    }
  };
  int code = kExitHarnessError;
  try {
    RankEnv env = RankEnv::FromEnvironment();
    AttachInheritedArena(env);
    WaitForDebugger(env);
    // Connects on first use: a test without a communicator that never
    // touches the store never connects.
    auto store = std::make_unique<TcpStore>(
        env.master_addr,
        IsDigits(store_port_text) && store_port_text.size() <= 5
            ? std::stoi(store_port_text)
            : env.master_port,
        RankTimeout(env, options.timeout), token);
    std::unique_ptr<Communicator> comm;
    if (options.init_distributed) comm = Connect(env, options, &store);
    RankVerdict verdict = program.Run(env, comm.get(), *store, report);
    const bool pooled = std::getenv(env::kInternalPool) != nullptr &&
                        verdict != RankVerdict::kFailed && Reusable(comm.get());
    ReportDone(report, verdict);
    if (pooled) verdict = ServePool(program, env, comm.get(), *store, report);
    // The meeting never throws; a peer that does not come only costs the
    // reset (and a second).
    if (comm) {
      MeetAndDropConnections(*store, env, inherited_sockets,
                             verdict == RankVerdict::kFailed);
    }
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
    ReportDone(report, RankVerdict::kFailed);
    code = kExitFailed;
  }
  EndLeftovers("the test");
  Leave(code);
}

}  // namespace disttest::internal
