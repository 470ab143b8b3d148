// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/spawned_rank_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/sockets.h"
#include "comm/ledger.h"
#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/internal_names.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/process/descendants.h"
#include "harness/process/keeper.h"
#include "harness/process/stack_dump.h"
#include "harness/rank/pooled_rank.h"
#include "harness/rank/rank_control.h"
#include "harness/rank_outcome.h"
#include "harness/report/race_report.h"

namespace disttest::internal {
namespace {

// How long a rank waits for room in its result queue. The parent drains it
// every few milliseconds; if it cannot for this long, it is gone.
constexpr std::chrono::seconds kSendTimeout(30);

// The coverage runtimes' entry points, in a program built with --coverage
// (gcov) or -fprofile-instr-generate (clang); null otherwise. __gcov_exit
// is in the part of libgcov every instrumented program links (weak
// references pull nothing from an archive); __gcov_dump and __gcov_reset
// only where the program links them (-Wl,-u,__gcov_reset).
extern "C" {
__attribute__((weak)) void __gcov_exit();
__attribute__((weak)) void __gcov_dump();
__attribute__((weak)) void __gcov_reset();
__attribute__((weak)) int __llvm_profile_write_file();
__attribute__((weak)) void __llvm_profile_reset_counters();
}

// A rank counts only what it runs where it can: a forked rank starts with
// its parent's counters, which the parent writes itself.
void ResetCoverage() {
  if (&__gcov_reset != nullptr) __gcov_reset();
  if (&__llvm_profile_reset_counters != nullptr) {
    __llvm_profile_reset_counters();
  }
}

// _exit skips the runtimes' exit-time writers: the rank writes its counts
// itself (gcov merges them into the .gcda files under a file lock; clang's
// go where LLVM_PROFILE_FILE says: give it %p or %m for several ranks).
void WriteCoverage() {
  if (&__gcov_dump != nullptr) {
    __gcov_dump();
  } else if (&__gcov_exit != nullptr) {
    __gcov_exit();
  }
  if (&__llvm_profile_write_file != nullptr) __llvm_profile_write_file();
}

// Leaves the rank. _exit, not exit(): no atexit handlers or static
// destructors of the parent's copy run here, and buffered stdio is flushed
// exactly once, by us (and coverage counts are written).
[[noreturn]] void Leave(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  WriteCoverage();
  // ThreadSanitizer's _exit() may put 66 in place of the status after any
  // report; where each was told to its rank already, the status says the
  // rest.
  if (EveryRaceWasTold()) {
    syscall(SYS_exit_group, code);
  }
  _exit(code);
}

// Set in the parent before it forks ranks (NoteSocketsForkedRanksInherit);
// a forked rank has its copy.
std::optional<std::map<ino_t, int>>& ParentSockets() {
  static std::optional<std::map<ino_t, int>> sockets;
  return sockets;
}

// The rank's end of its result queue: a forked rank's copy of its parent's
// (already mapped), else the queue opened by name (kept in `opened`).
ResultChannel* OpenChannel(std::unique_ptr<ResultChannel>* opened) {
  const char* name = std::getenv(env::kInternalResultQueue);
  if (name == nullptr) {
    std::fprintf(stderr, "disttest: %s is not set in a rank process\n",
                 env::kInternalResultQueue);
    Leave(kExitHarnessError);
  }
  try {
    ResultChannel* channel = ResultChannel::Inherited();
    // Not for what this rank forks.
    ResultChannel::SetInherited(nullptr);
    if (channel == nullptr || channel->name() != name) {
      *opened = ResultChannel::Open(name);
      channel = opened->get();
    }
    // Held (mapped) by this rank and the parent, the queue needs its name
    // no more: without it, nothing is left in /dev/shm whoever is killed
    // from here on, and no later run has a queue of this one to sweep.
    ResultChannel::Remove(name);
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
    unsetenv(env::kInternalChildParam);
    unsetenv(env::kInternalStoreToken);
    unsetenv(env::kInternalStorePort);
    return channel;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: %s\n", e.what());
    Leave(kExitHarnessError);
  }
}

}  // namespace

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

namespace {

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

// A re-executed rank maps the host arena from the descriptor it kept across
// exec (a forked one has it mapped already). Throws on a bad descriptor.
std::shared_ptr<HostArena> AttachInheritedArena(const RankEnv& env) {
  const char* fd = std::getenv(env::kInternalArenaFd);
  if (fd == nullptr) return nullptr;
  std::string value = fd;
  unsetenv(env::kInternalArenaFd);  // Not for the processes a test starts.
  if (!IsDigits(value) || value.size() > 9) {
    throw Error(
        fmt::format("{}={} is not a descriptor", env::kInternalArenaFd, value));
  }
  return HostArena::Attach(std::stoi(value), env.world_size);
}

// A re-executed rank maps the ranks' ledgers the same way and installs its
// own (a forked one did so before its entry).
void InstallInheritedLedger(const RankEnv& env) {
  const char* fd = std::getenv(env::kInternalLedgerFd);
  if (fd == nullptr) return;
  std::string value = fd;
  unsetenv(env::kInternalLedgerFd);
  if (!IsDigits(value) || value.size() > 9) {
    throw Error(fmt::format("{}={} is not a descriptor", env::kInternalLedgerFd,
                            value));
  }
  Ledger::Install(LedgerMemory::Attach(std::stoi(value), env.world_size),
                  env.rank);
}

// Meets every rank after the body, then makes this rank's own TCP
// connections (not those it inherited: they are shared with the parent) end
// with a reset when it exits, so that thousands of tests leave no TIME_WAIT
// sockets behind (which would make binding a port ever slower). Only after
// the meeting: no peer still waits for data.
//
// The ranks meet in the host arena when they have one: a futex, no
// connection, and a peer still in a collective fails at once, its peer's
// call being no collective (the arena compares them). Without an arena they
// meet through the store. A rank that failed meets nobody (its peers may be
// blocked in a collective with it, and must see it go): in the arena its
// peers learn that it ended; through the store it only says it is here.
void MeetAndDropConnections(TcpStore& store, HostArena* arena,
                            const RankEnv& env,
                            const std::map<ino_t, int>& inherited, bool failed,
                            std::chrono::milliseconds timeout) {
  if (arena != nullptr) {
    // A peer still waiting in a send to or a receive from this rank fails
    // now, naming it, instead of at its timeout.
    arena->MarkLeft(env.rank, /*passed=*/!failed);
    if (failed) return;
    try {
      arena->Check(env.rank, CollectiveCall::EndOfTest(), timeout);
    } catch (const std::exception&) {
      return;  // A peer did not get here; end the usual way.
    }
  } else if (env.world_size > 1) {  // A rank alone has nobody to meet.
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

class SpawnedRankHost : public RankHost {
 public:
  SpawnedRankHost(RankProgram& program, const Options& options,
                  std::shared_ptr<HostArena> arena)
      : program_(program), arena_(std::move(arena)) {
    // A peer that died closes its sockets; writing to one must fail the
    // operation with EPIPE (and a message naming the peer), not kill this
    // rank with SIGPIPE. Gloo writes without MSG_NOSIGNAL.
    std::signal(SIGPIPE, SIG_IGN);
    InstallStackSignalHandler();
    // Orphans of the processes the test starts come to this rank, not to
    // init: Leave ends them.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    // An exec'd rank lost the guard its fork had (harness/process/keeper.h).
    keeper::GuardAgainstOrphanedHangup(getppid());
    // Only a rank with a communicator resets its connections at the end.
    // A forked rank has the list its parent made; an exec'd one (a fresh
    // process, or a fork of the zygote) has none, and makes its own.
    if (options.init_distributed) {
      inherited_sockets_ = ParentSockets() ? *ParentSockets() : TcpSockets();
    }
    const char* token = std::getenv(env::kInternalStoreToken);
    token_ = token != nullptr ? token : "";
    // The harness's store; MASTER_PORT is the code under test's.
    const char* port = std::getenv(env::kInternalStorePort);
    store_port_ = port != nullptr ? port : "";
    channel_ = OpenChannel(&opened_channel_);
    test_timeout_ = options.timeout;
  }

  ~SpawnedRankHost() override { SetRankControl(nullptr); }

  RankEnv Enter() override {
    env_ = RankEnv::FromEnvironment();
    if (arena_ == nullptr) arena_ = AttachInheritedArena(env_);
    InstallInheritedLedger(env_);
    // ExpectRankToEnd() and SignalRank(): the ranks' process ids are in
    // their ledgers, each written by the rank itself when it installed its.
    const Ledger* ledger = Ledger::Current();
    control_ = std::make_unique<RankControl>(
        env_.rank, env_.world_size, [this](const RankMessage& m) { Report(m); },
        ledger != nullptr ? &ledger->memory() : nullptr);
    SetRankControl(control_.get());
    WaitForDebugger(env_);
    // Connects on first use: a test without a communicator that never
    // touches the store never connects.
    store_ = HarnessStore(env_, store_port_, RankTimeout(env_, test_timeout_),
                          token_);
    return env_;
  }

  Store& store() override { return *store_; }

  Communicator* Connect(const RankEnv& env, const Options& options,
                        std::chrono::milliseconds timeout) override {
    // An NCCL rank uses device 0: the harness lists its own GPU first in
    // CUDA_VISIBLE_DEVICES.
    comm_ = WorldCommunicator(env, options, *store_, arena_, timeout,
                              /*device=*/0);
    return comm_.get();
  }

  void Report(const RankMessage& m) override {
    if (!channel_->Send(MarkedIfItFollows(m), kSendTimeout)) {
      std::fprintf(stderr, "disttest: a result could not be sent: %s\n",
                   m.message.c_str());
    }
  }

  RankVerdict Finish(RankVerdict verdict, Communicator* comm) override {
    const ReportFn report = [this](const RankMessage& m) { Report(m); };
    const bool pooled = store_ != nullptr && PooledRank() &&
                        Succeeded(verdict) && Reusable(comm);
    // Parked before the verdict goes: the parent, which waits for every
    // rank's, then finds every rank parked.
    if (pooled && arena_ != nullptr) arena_->Park(env_.rank, 1);
    ReportVerdict(report, verdict);
    if (pooled) {
      try {
        verdict =
            ServePool(program_, env_, comm, *store_, arena_.get(), report);
      } catch (const std::exception& e) {
        // The store went while the rank waited for its next test there (a
        // name the arena did not carry, or no arena) or during one.
        report({RankMessage::Kind::kFatalFailure, program_.file(),
                program_.line(),
                fmt::format("a pooled rank lost its parent's store: {}",
                            e.what())});
        ReportVerdict(report, RankVerdict::kFailed);
        verdict = RankVerdict::kFailed;
      }
    }
    // The meeting never throws; a peer that does not come costs the reset,
    // and the wait until the parent marks it ended (or, without an arena,
    // a second).
    if (comm != nullptr) {
      MeetAndDropConnections(*store_, arena_.get(), env_, inherited_sockets_,
                             verdict == RankVerdict::kFailed,
                             RankTimeout(env_, test_timeout_));
    }
    return verdict;
  }

  [[noreturn]] void Exit(RankVerdict verdict) {
    // The store and communicator are not destroyed: _exit tears the sockets
    // down at once, where Gloo's destructors would wait on its event loop.
    (void)store_.release();
    (void)comm_.release();
    EndLeftovers("the test");
    Leave(ExitCodeOf(verdict));
  }

 private:
  RankProgram& program_;
  std::shared_ptr<HostArena> arena_;
  std::map<ino_t, int> inherited_sockets_;
  std::string token_;
  std::string store_port_;
  std::chrono::milliseconds test_timeout_{0};
  ResultChannel* channel_ = nullptr;
  std::unique_ptr<ResultChannel> opened_channel_;
  RankEnv env_;
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<RankControl> control_;
};

}  // namespace

std::unique_ptr<TcpStore> HarnessStore(const RankEnv& env,
                                       const std::string& store_port,
                                       std::chrono::milliseconds timeout,
                                       const std::string& token) {
  return std::make_unique<TcpStore>(
      env.master_addr,
      IsDigits(store_port) && store_port.size() <= 5 ? std::stoi(store_port)
                                                     : env.master_port,
      timeout, token);
}

std::unique_ptr<Communicator> WorldCommunicator(
    const RankEnv& env, const Options& options, Store& store,
    std::shared_ptr<HostArena> arena, std::chrono::milliseconds timeout,
    int device) {
  GlooOptions gloo;
  gloo.hostname = env.master_addr;
  gloo.timeout = timeout;
  gloo.arena = std::move(arena);
  gloo.name = "world";
  return CreateCommunicator(options.backend, store, env.rank, env.world_size,
                            gloo, device);
}

void NoteSocketsForkedRanksInherit(const std::vector<int>& fds) {
  ParentSockets() = TcpSockets(fds);
}

void ReportVerdict(const ReportFn& report, RankVerdict verdict) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  report({RankMessage::Kind::kDone, "", -1, NameOf(verdict)});
}

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

namespace {
std::atomic<bool> g_in_rank{false};
}  // namespace

bool InSpawnedRank() { return g_in_rank.load(std::memory_order_relaxed); }

void BecomeRankProcess() {
  // Once: the counts of what the rank ran so far are its own.
  if (g_in_rank.exchange(true, std::memory_order_relaxed)) return;
  ResetCoverage();
}

void LeaveRankProcess(int code) { Leave(code); }

void RunSpawnedRank(RankProgram& program, const Options& options,
                    std::shared_ptr<HostArena> forked_arena) {
  BecomeRankProcess();
  SpawnedRankHost host(program, options, std::move(forked_arena));
  host.Exit(RunRank(program, options, host));
}

void StopAtFailureForDebugger(int rank, const std::string& where) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::fprintf(stderr,
               "disttest: --gtest_break_on_failure: rank %d is pid %d and "
               "stops at its failure at %s; the test's timeout is off. "
               "Attach with:\n  gdb -p %d\n",
               rank, getpid(), where.c_str(), getpid());
  std::fflush(stderr);
  while (!DebuggerAttached()) poll(nullptr, 0, 100);
  // gtest's own break (a trap) follows as this returns.
  std::fprintf(stderr,
               "disttest: rank %d: a debugger is attached; gtest breaks at "
               "the failure\n",
               rank);
  std::fflush(stderr);
}

}  // namespace disttest::internal
