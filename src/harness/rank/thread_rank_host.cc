// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/thread_rank_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "base/threads.h"
#include "comm/ledger.h"
#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/internal_names.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/process/stack_dump.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/rank_outcome.h"

namespace disttest::internal {
namespace {

// How long a rank waits for room in its result queue (as a spawned one).
constexpr std::chrono::seconds kSendTimeout(30);

// Set in the parent before it forks; the fork has its copy, mapped.
std::vector<ResultChannel*>& Channels() {
  static auto* channels = new std::vector<ResultChannel*>;
  return *channels;
}

// The crashes a thread causes end the whole process; the thread's rank
// notes which it was, in its ledger area, before the signal's own action
// (the default, or a sanitizer's handler) runs: the parent names it.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_crash_before[sizeof kCrashSignals / sizeof(int)];

void OnCrash(int sig) {
  Ledger::NoteEndedProcess(sig);
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i) {
    if (kCrashSignals[i] == sig) sigaction(sig, &g_crash_before[i], nullptr);
  }
  // Pending until this handler returns: then the action from before runs
  // (a fault that returns would fault again; a raise() would not).
  raise(sig);
}

void OnExit() {
  if (ThreadsRank() >= 0) Ledger::NoteEndedProcess(LedgerMemory::kCalledExit);
}

void InstallProcessWideNotes() {
  struct sigaction sa {};
  sa.sa_handler = OnCrash;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i) {
    sigaction(kCrashSignals[i], &sa, &g_crash_before[i]);
  }
  std::atexit(OnExit);
}

// The queues by name are the parent's and this process's alone now: their
// names go, so nothing is left in /dev/shm whoever is killed.
void TakeChannels(int world_size) {
  if (static_cast<int>(Channels().size()) != world_size) {
    std::fprintf(stderr,
                 "disttest: %zu result queues for %d rank threads: the "
                 "parent did not note them\n",
                 Channels().size(), world_size);
    LeaveRankProcess(kExitHarnessError);
  }
  int ready = -1;
  if (const char* fd = std::getenv(env::kInternalResultsReadyFd)) {
    if (IsDigits(fd) && std::strlen(fd) < 10) ready = std::atoi(fd);
    if (ready >= 0) fcntl(ready, F_SETFD, FD_CLOEXEC);
  }
  for (ResultChannel* channel : Channels()) {
    ResultChannel::Remove(channel->name());
    if (ready >= 0) channel->NotifyOnSend(ready);
  }
  ResultChannel::SetInherited(nullptr);
  for (const char* name : {env::kInternalResultsReadyFd,
                           env::kInternalResultQueue, env::kInternalChildTest,
                           env::kInternalStoreToken, env::kInternalStorePort}) {
    unsetenv(name);
  }
}

// DISTTEST_DEBUG_RANK names this thread's rank: it waits for a debugger,
// which sees every rank's thread in this one process.
void WaitForDebugger(int rank) {
  std::optional<int> debug_rank = DebugRankVariable();
  if (!debug_rank || *debug_rank != rank) return;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::fprintf(stderr,
               "disttest: rank %d is thread %d of pid %d (every rank is a "
               "thread of it) and waits for a debugger; the other ranks wait "
               "for it. Attach with:\n  gdb -p %d\nthen `thread find %d`\n",
               rank, gettid(), getpid(), getpid(), gettid());
  std::fflush(stderr);
  while (!DebuggerAttached()) poll(nullptr, 0, 100);
}

// What a spawned rank's host does, for one thread: the ranks share the
// process, the arena and the ledger memory; each has its own queue, store
// client, communicator and ledger area.
class ThreadRankHost : public RankHost {
 public:
  ThreadRankHost(RankEnv env, const Options& options,
                 std::shared_ptr<HostArena> arena,
                 std::shared_ptr<LedgerMemory> ledger, std::string store_port,
                 std::string token)
      : env_(std::move(env)),
        arena_(std::move(arena)),
        ledger_(std::move(ledger)),
        store_port_(std::move(store_port)),
        token_(std::move(token)),
        test_timeout_(options.timeout) {}

  RankEnv Enter() override {
    if (ledger_ != nullptr) Ledger::InstallForThread(ledger_, env_.rank);
    WaitForDebugger(env_.rank);
    store_ = std::make_unique<TcpStore>(
        env_.master_addr,
        IsDigits(store_port_) && store_port_.size() <= 5
            ? std::stoi(store_port_)
            : env_.master_port,
        RankTimeout(env_, test_timeout_), token_);
    return env_;
  }

  Store& store() override { return *store_; }

  Communicator* Connect(const RankEnv& env, const Options& options,
                        std::chrono::milliseconds timeout) override {
    GlooOptions gloo;
    gloo.hostname = env.master_addr;
    gloo.timeout = timeout;
    gloo.arena = arena_;
    gloo.name = "world";
    // NCCL: one device per rank thread, in rank order (the process sees
    // every rank's GPUs; visibility cannot differ between threads).
    comm_ = CreateCommunicator(options.backend, *store_, env.rank,
                               env.world_size, gloo, /*device=*/env.rank);
    return comm_.get();
  }

  void Report(const RankMessage& m) override {
    ReportForThreadRank(env_.rank, MarkedIfItFollows(m));
  }

  RankVerdict Finish(RankVerdict verdict, Communicator* comm) override {
    ReportVerdict([this](const RankMessage& m) { Report(m); }, verdict);
    if (comm == nullptr || arena_ == nullptr) return verdict;
    // A rank that failed has ended, as a spawned one that exits: every
    // wait of its peers for it fails now, naming it (its thread's sockets
    // stay open until the process ends, so Gloo would not tell them).
    if (verdict == RankVerdict::kFailed) {
      arena_->MarkEnded(env_.rank);
      return verdict;
    }
    // One that passed meets the others, as a spawned one does; a peer still
    // waiting in a send to it or a receive from it fails now, naming it.
    arena_->MarkLeft(env_.rank);
    try {
      arena_->Check(env_.rank, CollectiveCall::EndOfTest(),
                    RankTimeout(env_, test_timeout_));
    } catch (const std::exception&) {
      // A peer did not get here; its own report says why.
    }
    return verdict;
  }

  // The store and communicator go with the process (_exit), as a spawned
  // rank's do: Gloo's destructors would wait on its event loop.
  void Abandon() {
    (void)store_.release();
    (void)comm_.release();
  }

 private:
  RankEnv env_;
  std::shared_ptr<HostArena> arena_;
  std::shared_ptr<LedgerMemory> ledger_;
  std::string store_port_;
  std::string token_;
  std::chrono::milliseconds test_timeout_;
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<Communicator> comm_;
};

// A rank whose thread could not run its program: its failure and verdict,
// and its peers' waits in the arena end at once.
void FailUnstarted(int rank, const std::string& why, const char* file, int line,
                   HostArena* arena) {
  ReportForThreadRank(rank,
                      {RankMessage::Kind::kFatalFailure, file, line, why});
  ReportVerdict([rank](const RankMessage& m) { ReportForThreadRank(rank, m); },
                RankVerdict::kFailed);
  if (arena != nullptr) arena->MarkLeft(rank);
}

struct Shared {
  const ProgramMaker* make;
  const Options* options;
  std::shared_ptr<HostArena> arena;
  std::shared_ptr<LedgerMemory> ledger;
  RankEnv base;
  std::string store_port;
  std::string token;
  const char* file;
  int line;
};

void RunThread(const Shared& s, int rank) {
  SetThreadsRank(rank);
  RankEnv env = s.base;
  env.rank = env.local_rank = rank;
  std::unique_ptr<RankProgram> program;
  try {
    program = (*s.make)(rank);
    if (program == nullptr) {
      throw std::runtime_error(
          "this binary has no test of that name to make for the thread");
    }
  } catch (const std::exception& e) {
    FailUnstarted(
        rank,
        fmt::format("disttest could not make rank {}'s test object in its "
                    "thread: {}",
                    rank, e.what()),
        s.file, s.line, s.arena.get());
    return;
  }
  ThreadRankHost host(env, *s.options, s.arena, s.ledger, s.store_port,
                      s.token);
  RunRank(*program, *s.options, host);
  host.Abandon();
}

}  // namespace

void NoteThreadRankChannels(std::vector<ResultChannel*> channels) {
  Channels() = std::move(channels);
}

void ReportForThreadRank(int rank, const RankMessage& m) {
  std::vector<ResultChannel*>& channels = Channels();
  if (rank < 0 || rank >= static_cast<int>(channels.size()) ||
      !channels[static_cast<std::size_t>(rank)]->Send(m, kSendTimeout)) {
    std::fprintf(stderr, "disttest: rank %d: a result could not be sent: %s\n",
                 rank, m.message.c_str());
  }
}

void RunThreadRanks(const ProgramMaker& make, const Options& options,
                    std::shared_ptr<HostArena> arena, const char* file,
                    int line) {
  BecomeRankProcess();
  // As in a spawned rank: a dead peer's socket fails a write with EPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  InstallStackSignalHandler();
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  Shared s{&make, &options, std::move(arena), nullptr, {}, "", "", file, line};
  try {
    s.base = RankEnv::FromEnvironment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest: %s\n", e.what());
    LeaveRankProcess(kExitHarnessError);
  }
  if (const char* token = std::getenv(env::kInternalStoreToken)) {
    s.token = token;
  }
  if (const char* port = std::getenv(env::kInternalStorePort)) {
    s.store_port = port;
  }
  if (const Ledger* ledger = Ledger::Current()) {
    s.ledger = ledger->shared_memory();
  }
  TakeChannels(s.base.world_size);
  // The process's environment is rank 0's: no thread's own. Code that reads
  // RANK fails rather than finding every thread rank 0.
  unsetenv(env::kRank);
  unsetenv(env::kLocalRank);
  InstallProcessWideNotes();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(s.base.world_size));
  for (int r = 0; r < s.base.world_size; ++r) {
    try {
      threads.emplace_back(RunThread, std::cref(s), r);
    } catch (const std::system_error& e) {
      for (int later = r; later < s.base.world_size; ++later) {
        FailUnstarted(
            later,
            later == r
                ? fmt::format("disttest could not start the thread of rank "
                              "{}: {}{}",
                              r, e.what(), AddressSpaceHint(e.what()))
                : fmt::format("rank {}'s thread could not be started", r),
            file, line, s.arena.get());
      }
      break;
    }
  }
  for (std::thread& t : threads) t.join();
}

void LeaveThreadRanks() {
  EndLeftovers("the test");
  LeaveRankProcess(kExitPassed);
}

}  // namespace disttest::internal
