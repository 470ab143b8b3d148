// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <tuple>

#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "env/text.h"
#include "harness/descendants.h"
#include "harness/emergency_cleanup.h"
#include "harness/resources.h"
#include "harness/stack_dump.h"
#include "harness/worker_pool.h"
#include "rendezvous/bind.h"

namespace disttest::internal {
namespace {

// Result queues have no descriptor to poll; the loop looks at them this
// often while ranks run. Store requests, output and exits wake it at once.
constexpr int kDrainTickMs = 10;

// Test sequence number within this process: part of every queue name, so a
// test that runs twice (--gtest_repeat) never meets its own old queues.
int NextTestSequence() {
  static int seq = 0;
  return ++seq;
}

// Supervisors between StartRanks and CleanUp: while any is, this process is
// a child subreaper.
int& SupervisorsRunning() {
  static int running = 0;
  return running;
}

// The ranks of every supervisor of this process, not yet reaped: never
// taken for another test's orphans.
std::set<pid_t>& LiveRanks() {
  static auto* ranks = new std::set<pid_t>;
  return *ranks;
}

int PidFdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;  // The drain tick notices exits instead.
#endif
}

struct FdCloser {
  explicit FdCloser(int f) : fd(f) {}
  ~FdCloser() { close(fd); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int fd;
};

// How long taking the stacks of stuck ranks may take, all ranks together.
constexpr std::chrono::seconds kStackDeadline(15);

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

std::pair<int, int> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    const int error = errno;
    throw Error(fmt::format("cannot create an output pipe: {}{}",
                            std::strerror(error),
                            error == EMFILE ? OpenFilesLimitText() : ""));
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return {fds[0], fds[1]};
}

}  // namespace

Supervisor::Supervisor(TestSpec spec, std::unique_ptr<Launcher> launcher)
    : spec_(std::move(spec)), launcher_(std::move(launcher)) {}

Supervisor::~Supervisor() { CleanUp(); }

void Supervisor::RemoveStaleQueuesOnce() {
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

void Supervisor::OpenLogs() {
  const char* dir = std::getenv(env::kLogDir);
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::path test_dir = std::filesystem::path(dir) / spec_.name;
  std::error_code ec;
  std::filesystem::create_directories(test_dir, ec);
  if (ec) {
    throw ConfigError(fmt::format("{}={}: cannot create {}: {}", env::kLogDir,
                                  dir, test_dir.string(), ec.message()));
  }
  for (Rank& rank : ranks_) {
    std::string file = fmt::format("rank-{}.log", rank.report.rank);
    if (!spec_.fixture.empty()) file = spec_.fixture + "-" + file;
    std::string path = (test_dir / file).string();
    rank.log = std::fopen(path.c_str(), "we");
    if (rank.log == nullptr) {
      throw ConfigError(fmt::format("{}={}: cannot write {}: {}", env::kLogDir,
                                    dir, path, std::strerror(errno)));
    }
    rank.report.log_path = path;
  }
}

std::string Supervisor::Subject() const {
  if (spec_.fixture.empty()) return spec_.name;
  return fmt::format("{} (its fixture {})", spec_.name, spec_.fixture);
}

void Supervisor::PrintHeartbeat(Clock::time_point now) {
  std::vector<int> done, running, stopped;
  for (const Rank& rank : ranks_) {
    (rank.exited || rank.report.done ? done : running)
        .push_back(rank.report.rank);
    if (!rank.exited && !rank.report.done && Stopped(rank.pid)) {
      stopped.push_back(rank.report.rank);
    }
  }
  auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  std::printf(
      "[ disttest ] %s: %lld s; finished: %s; running: %s\n", Subject().c_str(),
      static_cast<long long>(seconds),
      done.empty() ? "none" : fmt::format("{}", fmt::join(done, ", ")).c_str(),
      running.empty() ? "none"
                      : fmt::format("{}", fmt::join(running, ", ")).c_str());
  if (!stopped.empty()) {
    std::printf(
        "[ disttest ] %s: stopped, not running (SIGSTOP, SIGTSTP or "
        "a tracer): %s\n",
        Subject().c_str(), RanksText(stopped).c_str());
  }
  std::fflush(stdout);
}

void Supervisor::Validate() const {
  if (spec_.world_size < 1 || spec_.world_size > kMaxWorldSize) {
    throw ConfigError(fmt::format(
        "world size {} is invalid: DIST_TEST_F world sizes must be between 1 "
        "and {}",
        spec_.world_size, kMaxWorldSize));
  }
  if (spec_.options.timeout.count() <= 0) {
    throw ConfigError(
        fmt::format("options().timeout of {} ms is invalid: it must be > 0",
                    spec_.options.timeout.count()));
  }
  auto backend = static_cast<int>(spec_.options.backend);
  if (backend < static_cast<int>(Backend::kGloo) ||
      backend > static_cast<int>(Backend::kAuto)) {
    throw ConfigError(
        fmt::format("options().backend has the unknown value {}", backend));
  }
  auto launch = static_cast<int>(spec_.options.launch);
  if (launch != static_cast<int>(LaunchMode::kFork) &&
      launch != static_cast<int>(LaunchMode::kExec)) {
    throw ConfigError(
        fmt::format("options().launch has the unknown value {}", launch));
  }
  if (spec_.options.failure_grace.count() < 0) {
    throw ConfigError("options().failure_grace must not be negative");
  }
}

void Supervisor::StartClock() {
  start_ = Clock::now();
  heartbeat_ = HeartbeatInterval();
  next_heartbeat_ = start_ + heartbeat_;
  grace_deadline_.reset();
  std::optional<int> debug_rank = DebugRankVariable();
  if (debug_rank && *debug_rank < spec_.world_size) {
    // Someone is at a debugger; the clock does not run meanwhile.
    deadline_ = Clock::time_point::max();
  } else {
    deadline_ = Clock::now() + spec_.options.timeout;
  }
}

namespace {

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

void Supervisor::StartRanks() {
  // Processes that ranks start and that outlive a rank the harness kills
  // (a daemon that called setsid() leaves the group) come to this process,
  // not to init: EndRanks ends them.
  if (!started_) {
    started_ = true;
    if (SupervisorsRunning()++ == 0) prctl(PR_SET_CHILD_SUBREAPER, 1);
    children_before_.clear();
    for (pid_t pid : Children()) children_before_.insert(pid);
  }
  // Limits that would otherwise hang the ranks (no descriptor for a peer's
  // connection) or kill them (SIGBUS on a full /dev/shm) fail the test now.
  EnsureOpenFiles(spec_.world_size, spec_.options.init_distributed);
  EnsureSharedMemory(spec_.world_size,
                     spec_.world_size * ResultChannel::kQueueBytes);
  resource_trouble_ = false;
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
  SpawnAll();
  emergency_->Arm(pgid_, queue_names_);
}

std::vector<RankReport> Supervisor::EndRanks(const std::string& reason) {
  // Kill the group and reap first: a process a rank started may still hold
  // the output pipes, and its death lets the relays see end of file.
  KillRemaining(reason);
  ReapAll();
  EndOrphans();
  // Rank 0 is reaped: the group id may now be reused.
  emergency_->Arm(0, queue_names_);
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->Finish();
    if (rank.err) rank.err->Finish();
  }
  DrainChannels();
  std::vector<RankReport> reports;
  for (Rank& rank : ranks_) reports.push_back(std::move(rank.report));
  CleanUp();
  return reports;
}

std::vector<RankReport> Supervisor::Run() {
  RemoveStaleQueuesOnce();
  Validate();
  StartClock();
  StartRanks();
  Supervise();
  return EndRanks("the test ended");
}

std::vector<RankReport> Supervisor::RunPooled(const TestSpec& spec) {
  const bool first = !alive_;
  spec_ = spec;
  pooled_ = true;
  RemoveStaleQueuesOnce();
  Validate();
  StartClock();
  if (!first) {
    // While parked, a rank may have died or said something (a store error
    // while it waited): that is the pool's, not the next test's. Start over.
    ObserveExits();
    DrainChannels();
    bool quiet = true;
    for (const Rank& rank : ranks_) {
      quiet &= !rank.exited && rank.report.results.empty() &&
               rank.report.channel_errors.empty();
    }
    if (!quiet) {
      (void)EndRanks("the pool broke while it waited");
      alive_ = false;
    }
  }
  if (!alive_) {
    StartRanks();
    alive_ = true;
    dispatched_ = 0;
  } else {
    for (Rank& rank : ranks_) {
      if (rank.log != nullptr) std::fclose(rank.log);
      rank.log = nullptr;
      rank.report = RankReport{};
      rank.report.rank = static_cast<int>(&rank - ranks_.data());
    }
    OpenLogs();
    for (Rank& rank : ranks_) {
      rank.out->CopyTo(rank.log);
      rank.err->CopyTo(rank.log);
    }
    ++dispatched_;
    server_->Set(PoolKey(dispatched_),
                 std::vector<char>(spec_.name.begin(), spec_.name.end()));
  }
  Supervise();
  // What a rank printed before its verdict is in the pipe by now (ranks
  // flush before they report); a line left open ends with the test.
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->Finish();
    if (rank.err) rank.err->Finish();
  }
  DrainChannels();
  ObserveExits();
  bool clean = true;
  for (const Rank& rank : ranks_) {
    const RankReport& r = rank.report;
    clean &= !rank.exited && r.done && Succeeded(*r.done) &&
             r.killed_because.empty() && r.channel_errors.empty();
    for (const RankMessage& m : r.results) {
      clean &= m.kind != RankMessage::Kind::kFatalFailure &&
               m.kind != RankMessage::Kind::kNonFatalFailure;
    }
  }
  // A rank that reported may still leave (its communicator failed): parked
  // means asking for the next test.
  if (clean) clean = AwaitParked();
  std::vector<RankReport> reports;
  if (clean) {
    for (Rank& rank : ranks_) {
      rank.report.parked = true;
      reports.push_back(rank.report);
      // What came is this test's (its properties, say): whatever comes
      // while the ranks are parked is the pool's trouble.
      rank.report.results.clear();
    }
    return reports;
  }
  // Anything else ends the pool, as a test ends its ranks.
  alive_ = false;
  return EndRanks("the test ended");
}

bool Supervisor::AwaitParked() {
  const std::string next = PoolKey(dispatched_ + 1);
  const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
  std::vector<pollfd> fds;
  for (;;) {
    ObserveExits();
    for (const Rank& rank : ranks_) {
      if (rank.exited) return false;
    }
    if (server_->waiting_on(next) == ranks_.size()) return true;
    if (Clock::now() >= until) return false;
    fds.clear();
    server_->AppendPollFds(&fds);
    const std::size_t server_count = fds.size();
    for (const Rank& rank : ranks_) {
      if (rank.pidfd >= 0) fds.push_back({rank.pidfd, POLLIN, 0});
    }
    int n = poll(fds.data(), fds.size(), kDrainTickMs);
    if (n > 0) server_->HandlePollFds(fds.data(), server_count);
    for (Rank& rank : ranks_) {
      if (rank.out) rank.out->OnReadable();
      if (rank.err) rank.err->OnReadable();
    }
  }
}

void Supervisor::RequestShutdown() {
  if (!alive_) return;
  alive_ = false;
  // An empty name: leave.
  ++dispatched_;
  server_->Set(PoolKey(dispatched_), {});
  deadline_ = Clock::now() + std::chrono::seconds(2);
  grace_deadline_.reset();
  pooled_ = false;
  shutting_down_ = true;
  heartbeat_ = std::chrono::milliseconds(0);
}

void Supervisor::FinishShutdown() {
  if (!shutting_down_) return;
  // Serve the store while they meet and reset their connections; whoever is
  // left at the deadline is ended (no stacks: nothing is wrong).
  Supervise();
  shutting_down_ = false;
  for (Rank& rank : ranks_) {
    if (rank.out) rank.out->Finish();
    if (rank.err) rank.err->Finish();
  }
  CleanUp();
}

void Supervisor::AppendDescriptors(std::vector<int>* fds) const {
  if (server_) {
    std::vector<pollfd> server_fds;
    server_->AppendPollFds(&server_fds);
    for (const pollfd& p : server_fds) fds->push_back(p.fd);
  }
  if (arena_ != nullptr && arena_->fd() >= 0) fds->push_back(arena_->fd());
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

void Supervisor::SpawnAll() {
  if (spec_.options.launch == LaunchMode::kFork) WarnIfThreaded(spec_.name);
  for (int r = 0; r < spec_.world_size; ++r) {
    try {
      SpawnRank(r);
    } catch (const std::exception& e) {
      // The ranks already started are waiting for this one; end them now.
      KillRemaining(fmt::format("rank {} could not be started", r));
      ranks_[r].report.not_started = e.what();
      for (int later = r + 1; later < spec_.world_size; ++later) {
        ranks_[later].report.not_started =
            fmt::format("rank {} could not be started", r);
      }
      return;
    }
  }
}

void Supervisor::SpawnRank(int r) {
  Rank& rank = ranks_[r];
  // The relays own the read ends at once; the write ends are closed on every
  // path out of this function.
  auto [out_read, out_write_fd] = MakePipe();
  FdCloser out_write(out_write_fd);
  std::string prefix = spec_.fixture.empty()
                           ? fmt::format("[rank {}] ", r)
                           : fmt::format("[{} rank {}] ", spec_.fixture, r);
  rank.out = std::make_unique<OutputRelay>(out_read, stdout, prefix);
  auto [err_read, err_write_fd] = MakePipe();
  FdCloser err_write(err_write_fd);
  rank.err = std::make_unique<OutputRelay>(err_read, stderr, prefix);
  rank.out->CopyTo(rank.log);
  rank.err->CopyTo(rank.log);
  if (spec_.options.launch == LaunchMode::kExec) {
    // gtest_main prints this banner before main() reaches the test.
    rank.out->DropFirstLineIfStartsWith("Running main() from ");
  }
  SpawnRequest request;
  request.rank.rank = r;
  request.rank.world_size = spec_.world_size;
  request.rank.local_rank = r;
  request.rank.local_size = spec_.world_size;
  request.rank.master_addr = spec_.options.master_addr;
  request.rank.master_port = master_port_;
  request.test_name = spec_.name;
  request.extra_env = spec_.child_env;
  request.extra_env.emplace_back(env::kInternalStorePort,
                                 std::to_string(server_->port()));
  if (!spec_.visible_devices.empty()) {
    request.extra_env.emplace_back(
        env::kCudaVisibleDevices,
        spec_.visible_devices.at(static_cast<std::size_t>(r)));
  }
  request.arena = arena_;
  request.results_ready_fd = results_ready_[1];
  if (results_ready_[0] >= 0) {
    request.close_in_child.push_back(results_ready_[0]);
  }
  if (master_port_fd_ >= 0) request.close_in_child.push_back(master_port_fd_);
  request.result_queue = rank.channel->name();
  request.store_token = store_token_;
  request.stdout_fd = out_write.fd;
  request.stderr_fd = err_write.fd;
  request.pgid = pgid_;
  std::vector<pollfd> server_fds;
  server_->AppendPollFds(&server_fds);
  for (const pollfd& p : server_fds) request.close_in_child.push_back(p.fd);
  for (const Rank& other : ranks_) {
    if (other.out && other.out->open())
      request.close_in_child.push_back(other.out->fd());
    if (other.err && other.err->open())
      request.close_in_child.push_back(other.err->fd());
    if (other.pidfd >= 0) request.close_in_child.push_back(other.pidfd);
  }
  pid_t pid = launcher_->Spawn(request);
  LiveRanks().insert(pid);
  rank.pid = pid;
  if (pgid_ == 0) pgid_ = pid;
  rank.pidfd = PidFdOpen(pid);
}

bool Supervisor::AnyRunning() const {
  for (const Rank& rank : ranks_) {
    if (rank.pid > 0 && !rank.exited && !(pooled_ && rank.report.done)) {
      return true;
    }
  }
  return false;
}

int Supervisor::PollTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = deadline_;
  if (grace_deadline_ && *grace_deadline_ < next) next = *grace_deadline_;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
  return static_cast<int>(
      std::clamp<long long>(left.count() + 1, 0, kDrainTickMs));
}

void Supervisor::Supervise() {
  std::vector<pollfd> fds;
  while (AnyRunning()) {
    Clock::time_point now = Clock::now();
    if (now >= deadline_ && shutting_down_) {
      KillRemaining("the pool was shut down");
      deadline_ = Clock::time_point::max();
    } else if (now >= deadline_) {
      KillStuck(fmt::format("the test timed out after {} ms",
                            spec_.options.timeout.count()),
                /*deadline=*/true);
      deadline_ = Clock::time_point::max();  // Now only reaping is left.
    } else if (grace_deadline_ && now >= *grace_deadline_) {
      KillStuck(grace_reason_, /*deadline=*/false);
    }
    if (!server_->accept_trouble().empty() && !resource_trouble_) {
      // A rank waits for a connection that will not be accepted: the test
      // cannot go on, and waiting for the timeout would blame the store.
      resource_trouble_ = true;
      KillRemaining(fmt::format("the harness ran out of resources: {}{}",
                                server_->accept_trouble(),
                                OpenFilesLimitText()));
    }
    if (heartbeat_.count() > 0 && now >= next_heartbeat_) {
      PrintHeartbeat(now);
      next_heartbeat_ = now + heartbeat_;
    }
    fds.clear();
    server_->AppendPollFds(&fds);
    std::size_t server_count = fds.size();
    if (results_ready_[0] >= 0) fds.push_back({results_ready_[0], POLLIN, 0});
    for (Rank& rank : ranks_) {
      for (OutputRelay* relay : {rank.out.get(), rank.err.get()}) {
        if (relay != nullptr && relay->open())
          fds.push_back({relay->fd(), POLLIN, 0});
      }
      if (rank.pidfd >= 0 && !rank.exited)
        fds.push_back({rank.pidfd, POLLIN, 0});
    }
    int n = poll(fds.data(), fds.size(), PollTimeoutMs(now));
    if (n < 0 && errno != EINTR) {
      throw Error(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    if (n > 0) {
      server_->HandlePollFds(fds.data(), server_count);
      for (Rank& rank : ranks_) {
        for (OutputRelay* relay : {rank.out.get(), rank.err.get()}) {
          if (relay == nullptr || !relay->open()) continue;
          for (std::size_t i = server_count; i < fds.size(); ++i) {
            if (fds[i].fd == relay->fd() && fds[i].revents != 0)
              relay->OnReadable();
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
}

void Supervisor::DrainChannels() {
  for (Rank& rank : ranks_) {
    if (!rank.channel || rank.channel_broken) continue;
    std::string error;
    while (auto m = rank.channel->TryReceive(&error)) {
      if (m->kind == RankMessage::Kind::kDone) {
        std::optional<RankVerdict> verdict = ParseRankVerdict(m->message);
        if (!verdict) {
          rank.report.channel_errors.push_back(
              fmt::format("reported the unknown verdict '{}'", m->message));
          verdict = RankVerdict::kFailed;
        }
        rank.report.done = verdict;
        // A pooled rank does not exit: its verdict starts the grace its
        // exit would (peers may wait for it in a collective).
        if (pooled_ && *verdict != RankVerdict::kPassed && !grace_deadline_) {
          bool skipped = *verdict == RankVerdict::kSkipped;
          auto grace = spec_.options.failure_grace * (skipped ? 5 : 1);
          grace_deadline_ = Clock::now() + grace;
          grace_reason_ =
              fmt::format("still running {} ms after rank {} {}", grace.count(),
                          rank.report.rank, NameOf(*verdict));
        }
      } else {
        rank.report.results.push_back(std::move(*m));
      }
    }
    if (!error.empty()) {
      // A queue that failed once (a writer died holding its lock, or wrote
      // garbage) is not read again; the exit status still says how it ended.
      rank.channel_broken = true;
      rank.report.channel_errors.push_back(error);
    }
  }
}

void Supervisor::ObserveExits() {
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    siginfo_t info{};
    int rc = waitid(P_PID, rank.pid, &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == rank.pid) {
      rank.exited = true;
      rank.report.outcome = RankOutcome::FromSigInfo(info);
      OnRankEnded(rank);
    } else if (rc < 0 && errno != EINTR) {
      // ECHILD: someone else (a SIGCHLD handler of the test?) reaped it.
      rank.exited = rank.reaped = true;
      rank.report.channel_errors.push_back(
          fmt::format("could not be waited for: {}", std::strerror(errno)));
    }
  }
}

void Supervisor::OnRankEnded(Rank& rank) {
  if (rank.pidfd >= 0) {
    close(rank.pidfd);
    rank.pidfd = -1;
  }
  // Its peers' collectives in the arena cannot complete now; their waits
  // end at once, naming it (as Gloo's do when its connections close).
  if (arena_) arena_->MarkEnded(rank.report.rank);
  const RankOutcome& o = *rank.report.outcome;
  bool passed = o.exited() && o.exit_code() == kExitPassed;
  if (passed || grace_deadline_ || !rank.report.killed_because.empty()) return;
  // Peers may be waiting for this rank in a collective that will never
  // complete: give them a grace period, then end them. Ranks that skip
  // usually all skip at once, so after a skip the others get longer before
  // they count as stuck.
  bool skipped = o.exited() && o.exit_code() == kExitSkipped;
  std::string how = skipped                                      ? "skipped"
                    : o.exited() && o.exit_code() == kExitFailed ? "failed"
                                                                 : o.str();
  auto grace = spec_.options.failure_grace * (skipped ? 5 : 1);
  grace_deadline_ = Clock::now() + grace;
  grace_reason_ = fmt::format("still running {} ms after rank {} {}",
                              grace.count(), rank.report.rank, how);
}

void Supervisor::KillStuck(const std::string& reason, bool deadline) {
  std::vector<pid_t> pids;
  std::vector<Rank*> stuck;
  DrainChannels();  // A rank that reported its verdict is not stuck.
  ObserveExits();
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited || rank.report.done) continue;
    pids.push_back(rank.pid);
    stuck.push_back(&rank);
    // Decided now: whatever the rank does while its stack is taken, it did
    // not finish in time.
    if (deadline) rank.report.overran = reason;
    if (Stopped(rank.pid) && rank.report.killed_because.empty()) {
      rank.report.killed_because = fmt::format(
          "{}; it was stopped, not running (SIGSTOP, SIGTSTP or a tracer)",
          reason);
    }
  }
  if (!pids.empty()) {
    std::printf("[ disttest ] %s: %s; taking the stacks of %zu rank%s\n",
                Subject().c_str(), reason.c_str(), pids.size(),
                pids.size() == 1 ? "" : "s");
    std::fflush(stdout);
    std::vector<std::string> stacks = DumpStacks(pids, kStackDeadline);
    for (std::size_t i = 0; i < stuck.size(); ++i) {
      stuck[i]->report.stack = std::move(stacks[i]);
    }
    // Taking stacks takes a while: a rank that finished meanwhile is not
    // stuck, and is not killed.
    DrainChannels();
    ObserveExits();
  }
  KillRemaining(reason);
}

void Supervisor::KillRemaining(const std::string& reason) {
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    if (rank.report.done) {
      rank.report.killed_after_done = true;
    } else if (rank.report.killed_because.empty()) {
      rank.report.killed_because = reason;
    }
    kill(rank.pid, SIGKILL);
  }
  // The group also holds whatever the ranks started. Its id is rank 0's pid,
  // which stays ours until rank 0 is reaped (ObserveExits leaves it a
  // zombie), so this never signals a stranger's group.
  if (pgid_ > 0 && !ranks_.empty() && !ranks_[0].reaped) kill(-pgid_, SIGKILL);
  grace_deadline_.reset();
}

void Supervisor::ReapAll() {
  Clock::time_point deadline = Clock::now() + kReapDeadline;
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.reaped) continue;
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(rank.pid, &status, WNOHANG)) == 0 ||
           (got < 0 && errno == EINTR)) {
      if (Clock::now() >= deadline) break;
      poll(nullptr, 0, 1);  // Only after SIGKILL, so only briefly.
    }
    if (got != rank.pid) {
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
      rank.report.outcome = RankOutcome::FromWaitStatus(status);
    }
  }
}

void Supervisor::EndOrphans() {
  if (!started_) return;
  // Only processes of this test's ranks: not there when its ranks started,
  // not a rank (of any test), and carrying its MASTER_PORT (set at exec);
  // forked ranks' descendants that never exec'd show the environment the
  // parent was started with, but the parent of forked ranks runs no
  // threads that could have started them.
  const std::string mine = fmt::format("{}={}", env::kMasterPort, master_port_);
  const bool forked = spec_.options.launch == LaunchMode::kFork;
  const auto pick = [&](pid_t pid) {
    if (children_before_.count(pid) != 0 || LiveRanks().count(pid) != 0) {
      return false;
    }
    return forked || EnvironmentHas(pid, mine);
  };
  for (const std::string& process : EndChildren(pick)) {
    std::printf(
        "[ disttest ] note: %s: ended process %s, which its ranks started "
        "and left running\n",
        Subject().c_str(), process.c_str());
    std::fflush(stdout);
  }
}

void Supervisor::CleanUp() {
  KillRemaining("the test ended");
  ReapAll();
  EndOrphans();
  if (started_) {
    started_ = false;
    // The last one: orphans of other code go to init again, as before.
    if (--SupervisorsRunning() == 0) prctl(PR_SET_CHILD_SUBREAPER, 0);
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
