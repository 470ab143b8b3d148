// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// RankGroup's poll loop while the ranks run (Serve): store requests, their
// output, the results and expected ends in their queues, and their exits
// as they are seen.
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "disttest/error.h"
#include "harness/process/keeper.h"
#include "harness/process/resources.h"
#include "harness/supervise/rank_group.h"

namespace disttest::internal {

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
  // A keeper killed from outside is replaced at once: the ranks that run
  // stop when this process ends, for a keeper to end.
  const int keeper = keeper::Fd();
  if (keeper >= 0) fds_.push_back({keeper, POLLIN, 0});
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
  if (keeper >= 0 && n > 0 && fds_.back().revents != 0) keeper::Revive();
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
      // It has ended all the same: its peers are told at once (they would
      // wait for it until their deadline).
      rank.exited = rank.reaped = true;
      rank.report.channel_errors.push_back(error);
      rank.report.ended_at = std::chrono::steady_clock::now();
      ended.push_back(&rank);
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
    if (!rank->thread) OnRankEnded(*rank);
  }
  if (threads()) OnThreadsEnded(ended, /*notify=*/true);
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

}  // namespace disttest::internal
