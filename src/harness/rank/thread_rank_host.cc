// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/rank/thread_rank_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "base/threads.h"
#include "comm/ledger.h"
#include "disttest/env/names.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/internal_names.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/process/keeper.h"
#include "harness/process/stack_dump.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/rank_outcome.h"
#include "harness/report/race_report.h"
#include "harness/report/sanitizer_report.h"

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

// This process (a process a rank thread forks inherits the handlers and
// the ledger's mapping: it is not the rank), and whether a rank's thread
// has noted an end already (the first one ended the process; a crash that
// follows, in a static destructor that exit() runs, say, is not the cause).
pid_t g_host_pid = 0;
std::atomic<bool> g_noted{false};

void NoteEnd(int how) {
  if (getpid() != g_host_pid) return;
  if (g_noted.exchange(true)) return;
  Ledger::NoteEndedProcess(how);
}

void OnCrash(int sig) {
  const int saved = errno;
  NoteEnd(sig);
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i) {
    if (kCrashSignals[i] == sig) sigaction(sig, &g_crash_before[i], nullptr);
  }
  // Pending until this handler returns: then the action from before runs
  // (a fault that returns would fault again; a raise() would not).
  raise(sig);
  errno = saved;
}

// exit() from a rank's thread ends the process with the status it was
// given, here: the static destructors registered before this handler
// (handlers run newest first: gtest's, made at registration) are the other
// rank threads' statics too, still in use, and a crash in one would replace
// the status the rank gave. stdout and stderr are flushed only if no other
// thread holds them (one blocked in a write would hold this one forever).
void OnExit(int status, void*) {
  if (ThreadsRank() < 0) return;
  NoteEnd(LedgerMemory::kCalledExit);
  for (FILE* stream : {stdout, stderr}) {
    if (ftrylockfile(stream) == 0) {
      fflush_unlocked(stream);
      funlockfile(stream);
    }
  }
  _exit(status);
}

// quick_exit() from a rank's thread: noted, and the process ends as it
// asked (no handler is told the status).
void OnQuickExit() {
  if (ThreadsRank() < 0) return;
  NoteEnd(LedgerMemory::kCalledQuickExit);
}

void InstallProcessWideNotes() {
  g_host_pid = getpid();
  struct sigaction sa {};
  sa.sa_handler = OnCrash;
  // On the rank thread's own signal stack: a stack overflow is noted too.
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i) {
    sigaction(kCrashSignals[i], &sa, &g_crash_before[i]);
  }
  on_exit(OnExit, nullptr);
  at_quick_exit(OnQuickExit);
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
  for (const char* name :
       {env::kInternalResultsReadyFd, env::kInternalResultQueue,
        env::kInternalChildTest, env::kInternalChildParam,
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
                 std::string token, int device)
      : env_(std::move(env)),
        device_(device),
        arena_(std::move(arena)),
        ledger_(std::move(ledger)),
        store_port_(std::move(store_port)),
        token_(std::move(token)),
        test_timeout_(options.timeout) {}

  RankEnv Enter() override {
    if (ledger_ != nullptr) Ledger::InstallForThread(ledger_, env_.rank);
    WaitForDebugger(env_.rank);
    store_ = HarnessStore(env_, store_port_, RankTimeout(env_, test_timeout_),
                          token_);
    return env_;
  }

  Store& store() override { return *store_; }

  Communicator* Connect(const RankEnv& env, const Options& options,
                        std::chrono::milliseconds timeout) override {
    // NCCL: the rank's own device among every rank's GPUs, which the
    // process sees (visibility cannot differ between threads).
    comm_ = WorldCommunicator(env, options, *store_, arena_, timeout, device_);
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
    arena_->MarkLeft(env_.rank, /*passed=*/true);
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
    static std::mutex mu;
    static auto* kept = new std::vector<std::unique_ptr<Store>>;
    static auto* comms = new std::vector<std::unique_ptr<Communicator>>;
    std::lock_guard<std::mutex> lock(mu);
    kept->push_back(std::move(store_));
    comms->push_back(std::move(comm_));
  }

 private:
  RankEnv env_;
  int device_;  // Its CUDA device, for NCCL.
  std::shared_ptr<HostArena> arena_;
  std::shared_ptr<LedgerMemory> ledger_;
  std::string store_port_;
  std::string token_;
  std::chrono::milliseconds test_timeout_;
  std::unique_ptr<Store> store_;
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
  // Each rank's verdict, written by its thread alone.
  std::vector<RankVerdict> verdicts;
  // Each rank's CUDA device (DISTTEST_INTERNAL_THREAD_DEVICES); empty: its
  // rank number.
  std::vector<int> devices;
};

// A signal stack of the rank thread's own, for the crash handler.
class SignalStack {
 public:
  SignalStack() : memory_(kBytes) {
    stack_t ss{};
    ss.ss_sp = memory_.data();
    ss.ss_size = memory_.size();
    on_ = sigaltstack(&ss, nullptr) == 0;
  }
  ~SignalStack() {
    if (!on_) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  SignalStack(const SignalStack&) = delete;
  SignalStack& operator=(const SignalStack&) = delete;

 private:
  static constexpr std::size_t kBytes = 64 * 1024;
  std::vector<char> memory_;
  bool on_ = false;
};

void RunThread(Shared& s, int rank) {
  SetThreadsRank(rank);
  NameThisRankThread(rank);
  const SignalStack signal_stack;
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
  const int device = static_cast<std::size_t>(rank) < s.devices.size()
                         ? s.devices[static_cast<std::size_t>(rank)]
                         : rank;
  ThreadRankHost host(env, *s.options, s.arena, s.ledger, s.store_port, s.token,
                      device);
  s.verdicts[static_cast<std::size_t>(rank)] =
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
  keeper::GuardAgainstOrphanedHangup(getppid());
  Shared s{&make, &options, std::move(arena), nullptr, {}, "", "", file, line,
           {},    {}};
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
  if (const char* devices = std::getenv(env::kInternalThreadDevices)) {
    for (std::string_view d : SplitOn(devices, ',')) {
      s.devices.push_back(IsDigits(d) && d.size() < 5
                              ? std::stoi(std::string(d))
                              : static_cast<int>(s.devices.size()));
    }
    unsetenv(env::kInternalThreadDevices);
  }
  if (const Ledger* ledger = Ledger::Current()) {
    s.ledger = ledger->shared_memory();
  }
  TakeChannels(s.base.world_size);
  s.verdicts.assign(static_cast<std::size_t>(s.base.world_size),
                    RankVerdict::kFailed);
  // The process's environment is rank 0's: no thread's own. Code that reads
  // RANK fails rather than finding every thread rank 0.
  unsetenv(env::kRank);
  unsetenv(env::kLocalRank);
  SetRanksAreThreads();
  InstallProcessWideNotes();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(s.base.world_size));
  for (int r = 0; r < s.base.world_size; ++r) {
    try {
      threads.emplace_back(RunThread, std::ref(s), r);
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
  // ThreadSanitizer's reports that no rank took: found after their rank's
  // check (in its teardown, say), or by a thread that is no rank's.
  for (auto& [rank, races] : RacesNoRankTook()) {
    ReportForThreadRank(rank, {RankMessage::Kind::kNonFatalFailure, file, line,
                               std::move(races)});
  }
  // Under LeakSanitizer: the threads share one heap, so it is checked once,
  // now, and what leaked is every rank's to see (whose it was is unknown);
  // told to rank 0, where a failed test skips it as a failed rank does.
  const bool failed = std::find(s.verdicts.begin(), s.verdicts.end(),
                                RankVerdict::kFailed) != s.verdicts.end();
  if (LeakSanitizerRuns() && !failed) {
    if (std::optional<std::string> leaks = LeaksOfThisTest()) {
      ReportForThreadRank(
          0, {RankMessage::Kind::kFatalFailure, file, line,
              fmt::format("the rank threads (one heap: whose is unknown) "
                          "left leaks: {}",
                          *leaks)});
    }
  }
}

void LeaveThreadRanks() {
  EndLeftovers("the test");
  LeaveRankProcess(kExitPassed);
}

}  // namespace disttest::internal
