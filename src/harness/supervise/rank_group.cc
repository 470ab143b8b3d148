// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup's setup: what serves the ranks (store, queues, MASTER_PORT,
// logs, arena, ledgers), made at Start and relabeled for a pooled group's
// next test. The poll loop is rank_group_serve.cc, the end rank_group_end.cc.
#include "harness/supervise/rank_group.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "base/own_files.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "harness/process/descendants.h"
#include "harness/process/keeper.h"
#include "harness/process/process_hygiene.h"
#include "harness/process/resources.h"
#include "harness/report/trace.h"
#include "rendezvous/bind.h"

namespace disttest::internal {
namespace {

// Test sequence number within this process: part of every queue name, so a
// test that runs twice (--gtest_repeat) never meets its own old queues.
int NextTestSequence() {
  static int seq = 0;
  return ++seq;
}

// A socket bound to a free port of `host` with SO_REUSEADDR and not
// listening: {descriptor, port}. Code that binds the port with SO_REUSEADDR
// too (as stores do) may take it over; nothing else can, and the kernel
// gives it to no outgoing connection.
std::pair<int, int> ReservePort(const std::string& host) {
  try {
    return BindTcp(host, 0, 0);
  } catch (const std::exception& e) {
    const int error = errno;
    throw Error(fmt::format("cannot reserve a MASTER_PORT on {}: {}{}", host,
                            e.what(),
                            error == EMFILE ? OpenFilesLimitText() : ""));
  }
}

// The ranks' host arena. Under DISTTEST_NO_HOST_ARENA=1 it carries no
// data (collectives go through Gloo) but still checks that the ranks agree
// on every collective. Null when it cannot be mapped: collectives then go
// through Gloo unchecked, which the run says once.
std::shared_ptr<HostArena> MakeArena(int world_size) {
  // A malformed DISTTEST_NO_HOST_ARENA is the test's failure, not a note.
  const bool carry_data = !SetToOne(env::kNoHostArena);
  try {
    return HostArena::Create(world_size, carry_data);
  } catch (const Error& e) {
    static bool said = false;
    if (!said) {
      std::fprintf(stderr,
                   "[ disttest ] note: %s; collectives go through Gloo, and "
                   "ranks that call different collectives are not detected\n",
                   e.what());
      said = true;
    }
    return nullptr;
  }
}

}  // namespace

std::set<const RankGroup*>& RankGroup::LiveGroups() {
  static auto* groups = new std::set<const RankGroup*>;
  return *groups;
}

std::set<pid_t>& RankGroup::LiveRanks() {
  static auto* ranks = new std::set<pid_t>;
  return *ranks;
}

RankGroup::RankGroup(TestSpec spec, std::unique_ptr<RankSpawner> spawner)
    : spec_(std::move(spec)), spawner_(std::move(spawner)) {}

RankGroup::~RankGroup() { CleanUp(); }

void RankGroup::RemoveStaleQueuesOnce() {
  static bool done = false;
  if (done) return;
  done = true;
  std::vector<std::string> removed = RemoveQueuesOfDeadProcesses();
  if (!removed.empty()) {
    std::printf(
        "[ disttest ] removed %zu result queue%s that test processes which "
        "died left in /dev/shm (first: %s)\n",
        removed.size(), removed.size() == 1 ? "" : "s", removed[0].c_str());
    std::fflush(stdout);
  }
}

bool RankGroup::parks() const {
  for (const auto& [name, value] : spec_.child_env) {
    if (name == env::kInternalPool) return true;
  }
  return false;
}

std::string RankGroup::accept_trouble() const {
  if (!server_ || server_->accept_trouble().empty()) return "";
  if (server_->flood().empty()) return server_->accept_trouble();
  return server_->accept_trouble() + "; " + server_->flood();
}

std::string RankGroup::Subject() const {
  if (spec_.fixture.empty()) return spec_.name;
  return fmt::format("{} (its fixture {})", spec_.name, spec_.fixture);
}

void RankGroup::OpenLogs() {
  const char* dir = std::getenv(env::kLogDir);
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::path test_dir = std::filesystem::path(dir) / spec_.name;
  if (std::string why = MakeOwnDirectory(dir, spec_.name); !why.empty()) {
    throw ConfigError(fmt::format("{}={}: {}", env::kLogDir, dir, why));
  }
  for (Rank& rank : ranks_) {
    // Rank threads write to one output, the process's: one log.
    if (threads() && rank.report.rank > 0) continue;
    std::string file = threads() ? std::string("rank-threads.log")
                                 : fmt::format("rank-{}.log", rank.report.rank);
    if (!spec_.fixture.empty()) file = spec_.fixture + "-" + file;
    std::string path = (test_dir / file).string();
    std::string why;
    const int fd = CreateOwnFile(path, /*append=*/false, &why);
    rank.log = fd >= 0 ? fdopen(fd, "w") : nullptr;
    if (rank.log == nullptr) {
      if (fd >= 0) close(fd);
      throw ConfigError(fmt::format("{}={}: {}", env::kLogDir, dir, why));
    }
    rank.report.log_path = path;
  }
}

void RankGroup::Start() {
  // What a wrapper, or the test's own code, changed since the last test.
  ClaimStandardDescriptors();
  // While ranks run, a write to one's closed pipe or socket fails with
  // EPIPE instead of ending the run (put back at CleanUp).
  if (!started_) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigpipe_saved_ = sigaction(SIGPIPE, &ignore, &sigpipe_before_) == 0;
  }
  for (const std::string& note : PrepareSignals()) {
    std::printf("[ disttest ] %s\n", note.c_str());
    std::fflush(stdout);
  }
  RemoveStaleQueuesOnce();
  // Processes that ranks start and that outlive a rank the harness kills
  // (a daemon that called setsid() leaves the group) come to this process,
  // not to init: End ends them.
  if (!started_) {
    started_ = true;
    if (LiveGroups().empty()) {
      // First the keeper (harness/process/keeper.h), which is then no
      // child of this process.
      keeper::Start();
      prctl(PR_SET_CHILD_SUBREAPER, 1);
    } else {
      // One killed from outside meanwhile (pooled ranks wait for this test).
      keeper::Revive();
    }
    LiveGroups().insert(this);
    children_before_.clear();
    descendants_of_killed_.clear();
    started_at_ticks_ = NowInTicks();
    for (pid_t pid : Children()) children_before_.insert(pid);
  }
  // Limits that would otherwise hang the ranks (no descriptor for a peer's
  // connection), kill them (SIGBUS on a full /dev/shm) or start only some
  // of them fail the test now, before any rank starts.
  EnsureProcesses(spec_.world_size);
  oom_at_start_ = ReadOomCounts();
  EnsureOpenFiles(spec_.world_size, spec_.options.init_distributed);
  EnsureSharedMemory(spec_.world_size,
                     spec_.world_size * ResultChannel::kQueueBytes);
  pgid_ = 0;  // A new group (rank 0 leads it), also when a pool restarts.
  store_token_ = GenerateStoreToken();
  server_ = std::make_unique<TcpStoreServer>(spec_.options.master_addr, 0,
                                             store_token_);
  int seq = NextTestSequence();
  ranks_.clear();
  ranks_.resize(spec_.world_size);
  queue_names_.clear();
  for (int r = 0; r < spec_.world_size; ++r) {
    ranks_[r].report.rank = r;
    queue_names_.push_back(ResultQueueName(getpid(), seq, spec_.name, r));
  }
  emergency_ = std::make_unique<EmergencyCleanup>();
  emergency_->Arm(0, queue_names_);
  for (int r = 0; r < spec_.world_size; ++r) {
    ranks_[r].channel = ResultChannel::Create(queue_names_[r]);
  }
  if (master_port_fd_ < 0) {
    std::tie(master_port_fd_, master_port_) =
        ReservePort(spec_.options.master_addr);
  }
  if (results_ready_[0] < 0 &&
      pipe2(results_ready_, O_CLOEXEC | O_NONBLOCK) != 0) {
    // Without it the queues are drained on the tick alone.
    results_ready_[0] = results_ready_[1] = -1;
  }
  OpenLogs();
  arena_ =
      spec_.options.init_distributed ? MakeArena(spec_.world_size) : nullptr;
  // Every communicator of a rank records into it, the world's and those a
  // test makes itself, so it exists whether or not the test connects one.
  // A trace shows every operation of a test: a longer ring.
  ledger_ = LedgerMemory::Create(
      spec_.world_size, TraceWanted() ? kTraceRing : LedgerMemory::kRing);
  SpawnAll();
  emergency_->Arm(pgid_, queue_names_);
}

void RankGroup::Relabel(const TestSpec& spec) {
  spec_ = spec;
  if (!started_) return;  // Start() makes the ranks, reports and logs.
  for (Rank& rank : ranks_) {
    if (rank.log != nullptr) std::fclose(rank.log);
    rank.log = nullptr;
    rank.report = RankReport{};
    rank.report.rank = static_cast<int>(&rank - ranks_.data());
  }
  OpenLogs();
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->CopyTo(rank.log);
    if (rank.err) rank.err->CopyTo(rank.log);
  }
}

}  // namespace disttest::internal
