// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/supervise/rank_group.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "base/own_files.h"
#include "base/threads.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/internal_names.h"
#include "env/text.h"
#include "harness/process/descendants.h"
#include "harness/process/process_hygiene.h"
#include "harness/process/resources.h"
#include "harness/report/trace.h"
#include "harness/spawn/zygote.h"
#include "rendezvous/bind.h"

namespace disttest::internal {
namespace {

// Test sequence number within this process: part of every queue name, so a
// test that runs twice (--gtest_repeat) never meets its own old queues.
int NextTestSequence() {
  static int seq = 0;
  return ++seq;
}

// How long, after SIGKILL, the parent waits for a rank to be reapable. Only
// a process stuck in uninterruptible sleep (a hung driver) takes longer.
constexpr std::chrono::seconds kReapDeadline(10);

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
  try {
    return HostArena::Create(world_size,
                             /*carry_data=*/!SetToOne(env::kNoHostArena));
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
    std::string file = fmt::format("rank-{}.log", rank.report.rank);
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
    if (LiveGroups().empty()) prctl(PR_SET_CHILD_SUBREAPER, 1);
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

std::vector<RankReport> RankGroup::End(const std::string& reason) {
  // Kill the group and reap first: a process a rank started may still hold
  // the output pipes, and its death lets the relays see end of file.
  Kill(reason);
  ReapAll();
  EndOrphans();
  // Rank 0 is reaped: the group id may now be reused.
  if (emergency_) emergency_->Arm(0, queue_names_);
  FinishOutput();
  DrainChannels();
  // What the ranks' communicators did, for the verdict of a failed test
  // (read before CleanUp: the next Start() makes a new ledger).
  if (TraceWanted() ||
      std::any_of(ranks_.begin(), ranks_.end(),
                  [](const Rank& r) { return RankFailed(r.report); }) ||
      (ledger_ != nullptr && !ledger_->DigestsAgree())) {
    ReadLedgers(/*again=*/false);
  }
  std::vector<RankReport> reports;
  for (Rank& rank : ranks_) {
    if (!rank.late_expectation.empty() && !rank.report.expected_end) {
      rank.report.channel_errors.push_back(rank.late_expectation);
    }
    rank.late_expectation.clear();
    reports.push_back(std::move(rank.report));
  }
  CleanUp();
  return reports;
}

void RankGroup::ReadLedgers(bool again) {
  if (ledger_ == nullptr) return;
  for (Rank& rank : ranks_) {
    if (!again && rank.report.ledger) continue;
    rank.report.ledger = ledger_->Read(rank.report.rank);
  }
}

void RankGroup::FinishOutput() {
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->Finish();
    if (rank.err) rank.err->Finish();
    // A sanitizer writes to stderr (to stdout where told to): the first
    // report of either is the rank's.
    for (OutputRelay* relay : {rank.err.get(), rank.out.get()}) {
      if (relay == nullptr) continue;
      std::optional<SanitizerReport> found = relay->sanitizer().Take();
      if (found && !rank.report.sanitizer) rank.report.sanitizer = found;
    }
  }
}

void RankGroup::AppendDescriptors(std::vector<int>* fds) const {
  if (server_) {
    std::vector<pollfd> server_fds;
    server_->AppendPollFds(&server_fds);
    for (const pollfd& p : server_fds) fds->push_back(p.fd);
  }
  if (arena_ != nullptr && arena_->fd() >= 0) fds->push_back(arena_->fd());
  if (ledger_ != nullptr && ledger_->fd() >= 0) fds->push_back(ledger_->fd());
  for (int fd : results_ready_) {
    if (fd >= 0) fds->push_back(fd);
  }
  if (master_port_fd_ >= 0) fds->push_back(master_port_fd_);
  for (const Rank& rank : ranks_) {
    if (rank.out && rank.out->open()) fds->push_back(rank.out->fd());
    if (rank.err && rank.err->open()) fds->push_back(rank.err->fd());
    if (rank.pidfd >= 0) fds->push_back(rank.pidfd);
  }
}

void RankGroup::Serve(int timeout_ms) {
  fds_.clear();
  server_->AppendPollFds(&fds_);
  std::size_t server_count = fds_.size();
  if (results_ready_[0] >= 0) fds_.push_back({results_ready_[0], POLLIN, 0});
  for (Rank& rank : ranks_) {
    for (OutputRelay* relay : {rank.out.get(), rank.err.get()}) {
      if (relay != nullptr && relay->open()) {
        fds_.push_back({relay->fd(), POLLIN, 0});
      }
    }
    if (rank.pidfd >= 0 && !rank.exited) {
      fds_.push_back({rank.pidfd, POLLIN, 0});
    }
  }
  int n = poll(fds_.data(), fds_.size(), timeout_ms);
  if (n < 0 && errno != EINTR) {
    throw Error(fmt::format("poll failed: {}", std::strerror(errno)));
  }
  // Also without events: connections that never presented the token are
  // closed at their deadline.
  if (n >= 0) server_->HandlePollFds(fds_.data(), server_count);
  if (n > 0) {
    for (Rank& rank : ranks_) {
      for (OutputRelay* relay : {rank.out.get(), rank.err.get()}) {
        if (relay == nullptr || !relay->open()) continue;
        for (std::size_t i = server_count; i < fds_.size(); ++i) {
          if (fds_[i].fd == relay->fd() && fds_[i].revents != 0) {
            relay->OnReadable();
          }
        }
      }
    }
  }
  if (results_ready_[0] >= 0) {
    char bytes[4096];
    while (read(results_ready_[0], bytes, sizeof bytes) > 0) {
    }
  }
  DrainChannels();
  ObserveExits();
}

void RankGroup::DrainChannels() {
  for (Rank& rank : ranks_) {
    if (!rank.channel || rank.channel_broken) continue;
    std::string error;
    while (auto m = rank.channel->TryReceive(&error)) {
      if (m->kind == RankMessage::Kind::kExpectEnd) {
        ExpectEnd(rank, m->message);
        continue;
      }
      if (m->kind != RankMessage::Kind::kDone) {
        rank.report.received.push_back(std::chrono::steady_clock::now());
        rank.report.results.push_back(std::move(*m));
        const RankMessage& last = rank.report.results.back();
        if (on_failure_ && (last.kind == RankMessage::Kind::kFatalFailure ||
                            last.kind == RankMessage::Kind::kNonFatalFailure)) {
          on_failure_(rank, last);
        }
        continue;
      }
      std::optional<RankVerdict> verdict = ParseRankVerdict(m->message);
      if (!verdict) {
        rank.report.channel_errors.push_back(
            fmt::format("reported the unknown verdict '{}'", m->message));
        verdict = RankVerdict::kFailed;
      }
      rank.report.done = verdict;
      if (on_verdict_) on_verdict_(rank);
    }
    if (!error.empty()) {
      // A queue that failed once (a writer died holding its lock, or wrote
      // garbage) is not read again; the exit status still says how it ended.
      rank.channel_broken = true;
      rank.report.channel_errors.push_back(error);
    }
  }
}

void RankGroup::ExpectEnd(Rank& from, const std::string& text) {
  const auto expected = DecodeExpectedEnd(text);
  if (!expected || expected->first < 0 ||
      expected->first >= static_cast<int>(ranks_.size())) {
    from.report.channel_errors.push_back(
        fmt::format("sent the malformed expected end '{}'", text));
    return;
  }
  ExpectedEnd end = expected->second;
  end.declared_by = from.report.rank;
  Rank& rank = ranks_[expected->first];
  RankReport& target = rank.report;
  // An end must be expected before it comes: one declared after the rank
  // had ended (by the declaring rank's clock, which is this one's on one
  // host) excuses nothing, however it matches.
  const std::int64_t ended_ns =
      rank.exited && target.ended_at
          ? std::chrono::duration_cast<std::chrono::nanoseconds>(
                target.ended_at->time_since_epoch())
                .count()
          : 0;
  // Other ranks may declare the same end after it came, once one declared
  // it in time: that one counts (the queues are read in rank order, so a
  // late one may be read first).
  // The declaring rank may have seen it ended before this process did.
  if (end.after_end || (ended_ns != 0 && end.declared_ns > ended_ns)) {
    if (rank.late_expectation.empty()) {
      rank.late_expectation =
          ended_ns != 0 && end.declared_ns > ended_ns
              ? fmt::format(
                    "had already ended ({}) when rank {} declared "
                    "ExpectRankToEnd({}, ...), {} ms later: declare an end "
                    "before it can come",
                    target.outcome ? target.outcome->str()
                                   : std::string("ended"),
                    end.declared_by, expected->first,
                    (end.declared_ns - ended_ns) / 1000000)
              : fmt::format(
                    "had already ended when rank {} declared "
                    "ExpectRankToEnd({}, ...): declare an end before it can "
                    "come",
                    end.declared_by, expected->first);
    }
    return;
  }
  if (!target.expected_end) {
    target.expected_end = end;
  } else if (!target.expected_end->SameEnd(end)) {
    target.channel_errors.push_back(fmt::format(
        "two ends were expected of it: rank {} expected it to {}, rank {} to "
        "{}",
        target.expected_end->declared_by, target.expected_end->str(),
        end.declared_by, end.str()));
  }
}

void RankGroup::ObserveExits() {
  std::vector<Rank*> ended;
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    std::string error;
    if (std::optional<RankOutcome> outcome =
            spawner_->Ended(rank.pid, &error)) {
      rank.exited = true;
      // A SIGKILL that the harness did not send: the OOM killer's?
      if (outcome->signaled() && outcome->signal() == SIGKILL &&
          rank.report.killed_because.empty()) {
        outcome->set_sender(OomKillerText(oom_at_start_, ReadOomCounts()));
      }
      rank.report.outcome = *outcome;
      rank.report.ended_at = std::chrono::steady_clock::now();
      ended.push_back(&rank);
    } else if (!error.empty()) {
      // ECHILD: someone else (a SIGCHLD handler of the test?) reaped it.
      rank.exited = rank.reaped = true;
      rank.report.channel_errors.push_back(error);
    }
  }
  if (ended.empty()) return;
  // What a rank sent before it ended, or before a peer ended it (an
  // expected end, its last failures), is in the queues now: read it before
  // the end is judged.
  DrainChannels();
  for (Rank* rank : ended) {
    // Killed (or ended) while it sent a result in parts: what came is not
    // a whole result, so no part of it is shown as one; that it was cut is
    // itself a failure of the rank.
    if (rank->channel && !rank->channel_broken &&
        rank->channel->PartialResultBytes() > 0) {
      rank->report.channel_errors.push_back(fmt::format(
          "ended while it sent a result ({} bytes of it had arrived)",
          rank->channel->PartialResultBytes()));
    }
    OnRankEnded(*rank);
  }
}

void RankGroup::OnRankEnded(Rank& rank) {
  if (rank.pidfd >= 0) {
    close(rank.pidfd);
    rank.pidfd = -1;
  }
  // Its peers' collectives in the arena cannot complete now; their waits
  // end at once, naming it (as Gloo's do when its connections close).
  if (arena_) arena_->MarkEnded(rank.report.rank);
  if (on_exit_) on_exit_(rank);
}

void RankGroup::Kill(const std::string& reason) {
  std::set<pid_t> alive;
  for (const Rank& rank : ranks_) {
    if (rank.pid > 0 && !rank.exited) alive.insert(rank.pid);
  }
  if (!alive.empty()) {
    for (pid_t pid : DescendantsOf(alive)) descendants_of_killed_.insert(pid);
  }
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    if (rank.report.done) {
      rank.report.killed_after_done = true;
    } else if (rank.report.killed_because.empty()) {
      rank.report.killed_because = reason;
    }
    spawner_->Kill(rank.pid);
  }
  // The group also holds whatever the ranks started. Its id is rank 0's pid,
  // which stays ours until rank 0 is reaped (ObserveExits leaves it a
  // zombie), so this never signals a stranger's group.
  if (pgid_ > 0 && !ranks_.empty() && !ranks_[0].reaped) {
    spawner_->KillGroup(pgid_);
  }
}

void RankGroup::ReapAll() {
  auto deadline = std::chrono::steady_clock::now() + kReapDeadline;
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.reaped) continue;
    std::optional<RankOutcome> outcome = spawner_->Reap(rank.pid, deadline);
    if (!outcome) {
      rank.report.channel_errors.push_back(fmt::format(
          "could not be reaped within {} s of SIGKILL (uninterruptible "
          "sleep in a driver?)",
          kReapDeadline.count()));
      continue;
    }
    rank.reaped = true;
    LiveRanks().erase(rank.pid);
    if (!rank.exited) {
      rank.exited = true;
      rank.report.outcome = *outcome;
      rank.report.ended_at = std::chrono::steady_clock::now();
    }
  }
}

void RankGroup::EndOrphans() {
  if (!started_) return;
  // Only processes of this test's ranks: not there when its ranks started,
  // not a rank (of any test), and carrying its MASTER_PORT (set at exec);
  // forked ranks' descendants that never exec'd show the environment the
  // parent was started with, but the parent of forked ranks runs no
  // threads that could have started them.
  const std::string mine = fmt::format("{}={}", env::kMasterPort, master_port_);
  const std::string zygote_child =
      fmt::format("{}={}", env::kInternalZygoteParent, getpid());
  // A parent that runs no thread but this one started no process during
  // the test: every new child is an orphan of the ranks (a daemon that
  // cleared its environment too).
  const bool only_ranks_start_processes =
      spec_.options.launch == LaunchMode::kFork || ThreadCount() == 1;
  const auto pick = [&](pid_t pid) {
    if (children_before_.count(pid) != 0 || LiveRanks().count(pid) != 0 ||
        pid == Zygote::Get().pid()) {
      return false;
    }
    // A process a rank forked without exec started with the environment
    // of what the rank was forked from: a kExec rank's is the zygote's.
    // Started during the test (a tick's slack): not a helper's child from
    // before it that came to this subreaper meanwhile.
    return (only_ranks_start_processes &&
            StartedAt(pid) + 1 >= started_at_ticks_) ||
           descendants_of_killed_.count(pid) != 0 ||
           EnvironmentHas(pid, mine) || EnvironmentHas(pid, zygote_child);
  };
  for (const std::string& process : EndChildren(pick)) {
    std::printf(
        "[ disttest ] note: %s: ended process %s, which its ranks started "
        "and left running\n",
        Subject().c_str(), process.c_str());
    std::fflush(stdout);
  }
}

void RankGroup::CleanUp() {
  Kill("the test ended");
  ReapAll();
  EndOrphans();
  if (started_) {
    started_ = false;
    if (sigpipe_saved_) sigaction(SIGPIPE, &sigpipe_before_, nullptr);
    sigpipe_saved_ = false;
    LiveGroups().erase(this);
    // The last one: orphans of other code go to init again, as before.
    if (LiveGroups().empty()) prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  for (Rank& rank : ranks_) {
    if (rank.pidfd >= 0) close(rank.pidfd);
    rank.pidfd = -1;
    rank.out.reset();
    rank.err.reset();
    if (rank.log != nullptr) std::fclose(rank.log);
    rank.log = nullptr;
    if (rank.channel) {
      ResultChannel::Remove(rank.channel->name());
      rank.channel.reset();
    }
  }
  server_.reset();
  emergency_.reset();
  for (int& fd : results_ready_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (master_port_fd_ >= 0) close(master_port_fd_);
  master_port_fd_ = -1;
}

}  // namespace disttest::internal
