// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup's spawning: the output pipes and the SpawnRequest of each rank,
// and what of the group a rank of another group must close.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "base/descriptors.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/internal_names.h"
#include "harness/process/resources.h"
#include "harness/rank/spawned_rank_host.h"
#include "harness/rank/thread_rank_host.h"
#include "harness/report/verdict.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {
namespace {

struct FdCloser {
  explicit FdCloser(int f) : fd(f) {}
  ~FdCloser() { close(fd); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int fd;
};

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

// `fd` moved to the lowest free number at or above `floor` (close-on-exec,
// as every descriptor of the group is); itself if it is there already.
int Above(int fd, int floor) {
  if (fd < 0 || floor < 0 || fd >= floor) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (moved < 0) {
    const int error = errno;
    close(fd);
    throw Error(fmt::format(
        "cannot move a descriptor above {}: {}{}", floor, std::strerror(error),
        error == EMFILE || error == EINVAL ? OpenFilesLimitText() : ""));
  }
  close(fd);
  return moved;
}

}  // namespace

void RankGroup::SpawnAll() {
  if (spec_.options.launch != LaunchMode::kExec) WarnIfThreaded(spec_.name);
  // One listing of this process's descriptors for both below.
  const std::optional<std::vector<int>> fds = OpenDescriptors();
  // Once for every rank it forks, not once in each (a pool forks its ranks
  // whatever the test's launch mode).
  NoteSocketsForkedRanksInherit(fds.value_or(std::vector<int>{}));
  // Rank r inherits the pipes and pidfds of ranks 0..r-1, all above the
  // floor: it closes them with one call, not 3r (which, summed over 256
  // ranks, was 100,000 calls and 8% of the test's time). Without that call
  // (a kernel before 5.9, a seccomp profile), without /proc, or without
  // room for them all above the floor (a descriptor open near the
  // open-files limit), each rank closes its siblings' one by one.
  fd_floor_ = fds && !fds->empty() && CanCloseFrom()
                  ? *std::max_element(fds->begin(), fds->end()) + 1
                  : -1;
  rlimit files{};
  if (fd_floor_ < 0 || getrlimit(RLIMIT_NOFILE, &files) != 0 ||
      (files.rlim_cur != RLIM_INFINITY &&
       static_cast<rlim_t>(fd_floor_) + 3 * spec_.world_size + 64 >
           files.rlim_cur)) {
    fd_floor_ = -1;
  }
  if (threads()) {
    std::vector<ResultChannel*> channels;
    for (Rank& rank : ranks_) channels.push_back(rank.channel.get());
    NoteThreadRankChannels(std::move(channels));
  }
  for (int r = 0; r < spec_.world_size; ++r) {
    try {
      if (threads() && r > 0) {
        // A thread of rank 0's process, which starts them all.
        ranks_[r].pid = ranks_[0].pid;
        ranks_[r].thread = true;
        ranks_[r].report.spawned_at = ranks_[0].report.spawned_at;
        continue;
      }
      SpawnRank(r);
      ranks_[r].thread = threads();
    } catch (const std::exception& e) {
      // The ranks already started are waiting for this one; end them now.
      Kill(fmt::format("rank {} {}", r, kCouldNotBeStarted),
           RankReport::KilledFor::kPeersStart);
      ranks_[r].report.not_started = e.what();
      ranks_[r].report.killed_for = RankReport::KilledFor::kItself;
      for (int later = r + 1; later < spec_.world_size; ++later) {
        ranks_[later].report.not_started =
            fmt::format("rank {} {}", r, kCouldNotBeStarted);
        ranks_[later].report.killed_for = RankReport::KilledFor::kPeersStart;
      }
      return;
    }
  }
}

SpawnRequest RankGroup::RequestFor(int r, int stdout_fd, int stderr_fd) {
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
  if (!spec_.rank_env.empty()) {
    const auto& own = spec_.rank_env.at(static_cast<std::size_t>(r));
    request.extra_env.insert(request.extra_env.end(), own.begin(), own.end());
  }
  request.arena = arena_;
  request.ledger = ledger_;
  request.results_ready_fd = results_ready_[1];
  if (results_ready_[0] >= 0) {
    request.close_in_child.push_back(results_ready_[0]);
  }
  if (master_port_fd_ >= 0) request.close_in_child.push_back(master_port_fd_);
  request.result_queue = ranks_[r].channel->name();
  request.channel = ranks_[r].channel.get();
  request.store_token = store_token_;
  request.stdout_fd = stdout_fd;
  request.stderr_fd = stderr_fd;
  request.pgid = pgid_;
  std::vector<pollfd> server_fds;
  server_->AppendPollFds(&server_fds);
  for (const pollfd& p : server_fds) request.close_in_child.push_back(p.fd);
  // The earlier ranks' pipes and pidfds (and this rank's own read ends).
  request.close_from = fd_floor_;
  if (fd_floor_ < 0) {
    for (const Rank& other : ranks_) {
      if (other.out && other.out->open())
        request.close_in_child.push_back(other.out->fd());
      if (other.err && other.err->open())
        request.close_in_child.push_back(other.err->fd());
      if (other.pidfd >= 0) request.close_in_child.push_back(other.pidfd);
    }
  }
  // What serves the other groups (pools that outlive their tests) is not
  // this rank's either.
  for (const RankGroup* other : LiveGroups()) {
    if (other != this) other->AppendDescriptors(&request.close_in_child);
  }
  return request;
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

void RankGroup::SpawnRank(int r) {
  Rank& rank = ranks_[r];
  // The relays own the read ends at once; the write ends are closed on every
  // path out of this function.
  auto [out_read_low, out_write_fd] = MakePipe();
  FdCloser out_write(out_write_fd);
  const int out_read = Above(out_read_low, fd_floor_);
  // Rank threads share their process's output: labelled as theirs.
  std::string prefix = threads() ? std::string("[rank threads] ")
                       : spec_.fixture.empty()
                           ? fmt::format("[rank {}] ", r)
                           : fmt::format("[{} rank {}] ", spec_.fixture, r);
  rank.out = std::make_unique<OutputRelay>(out_read, stdout, prefix);
  auto [err_read_low, err_write_fd] = MakePipe();
  FdCloser err_write(err_write_fd);
  const int err_read = Above(err_read_low, fd_floor_);
  rank.err = std::make_unique<OutputRelay>(err_read, stderr, prefix);
  rank.out->CopyTo(rank.log);
  rank.err->CopyTo(rank.log);
  if (spec_.options.launch == LaunchMode::kExec) {
    // gtest_main prints this banner before main() reaches the test.
    rank.out->DropFirstLineIfStartsWith("Running main() from ");
  }
  SpawnRequest request = RequestFor(r, out_write.fd, err_write.fd);
  rank.report.spawned_at = std::chrono::steady_clock::now();
  pid_t pid = spawner_->Spawn(request);
  LiveRanks().insert(pid);
  rank.pid = pid;
  if (pgid_ == 0) pgid_ = pid;
  // Without a pidfd (none above the floor) the poll loop's tick notices
  // the rank's end.
  try {
    rank.pidfd = Above(spawner_->OpenPidFd(pid), fd_floor_);
  } catch (const Error&) {
    rank.pidfd = -1;
  }
}

}  // namespace disttest::internal
