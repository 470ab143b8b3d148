// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/report/trace.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/own_files.h"
#include "disttest/env/names.h"
#include "disttest/error.h"

namespace disttest::internal {
namespace {

// JSON string contents.
std::string Escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::int64_t Ns(std::chrono::steady_clock::time_point t) {
  // steady_clock is CLOCK_MONOTONIC, the ledgers' clock.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

class Events {
 public:
  explicit Events(std::int64_t zero) : zero_(zero) {}

  void Meta(const char* what, int tid, const std::string& name) {
    Add(fmt::format(R"({{"name":"{}","ph":"M","pid":1,"tid":{},)"
                    R"("args":{{"name":"{}"}}}})",
                    what, tid, Escaped(name)));
  }
  // A span from `from` to `to` (CLOCK_MONOTONIC ns; skipped unless both
  // are known), with `args` (a JSON object's members, or "").
  void Span(int tid, const std::string& name, const char* category,
            std::int64_t from, std::int64_t to, const std::string& args = "") {
    if (from <= 0 || to <= 0 || to < from) return;
    Add(fmt::format(
        R"({{"name":"{}","cat":"{}","ph":"X","pid":1,"tid":{},"ts":{:.3f},)"
        R"("dur":{:.3f},"args":{{{}}}}})",
        Escaped(name), category, tid, Us(from), (to - from) / 1000.0, args));
  }
  void Instant(int tid, const std::string& name, std::int64_t at,
               const std::string& args) {
    if (at <= 0) return;
    Add(fmt::format(
        R"({{"name":"{}","cat":"failure","ph":"i","s":"t","pid":1,"tid":{},)"
        R"("ts":{:.3f},"args":{{{}}}}})",
        Escaped(name), tid, Us(at), args));
  }
  std::string Json(const std::string& other) const {
    std::string out = "{\"traceEvents\":[\n";
    for (std::size_t i = 0; i < events_.size(); ++i) {
      out += events_[i];
      out += i + 1 < events_.size() ? ",\n" : "\n";
    }
    out += "],\"displayTimeUnit\":\"ms\",\"otherData\":{" + other + "}}\n";
    return out;
  }

 private:
  double Us(std::int64_t ns) const { return (ns - zero_) / 1000.0; }
  void Add(std::string e) { events_.push_back(std::move(e)); }

  std::int64_t zero_;
  std::vector<std::string> events_;
};

const char* StateName(LedgerState s) {
  switch (s) {
    case LedgerState::kEntered:
      return "did not complete";
    case LedgerState::kCompleted:
      return "completed";
    case LedgerState::kFailed:
      return "failed";
  }
  return "unknown";
}

// The trace's time zero: when the first rank started (or reached its first
// phase); 0 when that is not known.
std::int64_t FirstStart(const std::vector<RankReport>& ranks) {
  std::int64_t zero = INT64_MAX;
  // A reused rank (a worker pool's) was started for an earlier test: its
  // start is not this test's.
  for (const RankReport& r : ranks) {
    if (r.spawned_at && !r.parked) zero = std::min(zero, Ns(*r.spawned_at));
    if (r.ledger && r.ledger->phase_ns[0] > 0) {
      zero = std::min(zero, r.ledger->phase_ns[0]);
    }
  }
  if (zero == INT64_MAX) zero = 0;
  return zero;
}

// The phases of rank `r` (its ledger `v`), from its start to its end
// (`ended`, 0: unknown).
void AddPhases(Events& ev, int tid, const RankReport& r,
               const RankLedgerView& v, std::int64_t ended) {
  auto at = [&](RankPhase p) {
    return v.phase_ns[static_cast<std::size_t>(p)];
  };
  // Each phase lasts until the next one it reached (or the end).
  const std::int64_t last = ended > 0 ? ended : v.read_ns;
  auto until = [&](RankPhase p) {
    for (auto q = static_cast<std::size_t>(p) + 1; q < kPhases; ++q) {
      if (v.phase_ns[q] > 0) return v.phase_ns[q];
    }
    return last;
  };
  if (r.spawned_at && !r.parked) {
    ev.Span(tid, "start", "disttest", Ns(*r.spawned_at),
            at(RankPhase::kStarted));
  }
  ev.Span(tid, "connect", "disttest", at(RankPhase::kConnecting),
          until(RankPhase::kConnecting));
  ev.Span(tid, "set-up", "disttest", at(RankPhase::kSetUp),
          until(RankPhase::kSetUp));
  ev.Span(tid, "body", "disttest", at(RankPhase::kBody),
          until(RankPhase::kBody));
  ev.Span(tid, "tear-down", "disttest", at(RankPhase::kTearDown),
          until(RankPhase::kTearDown));
  ev.Span(tid, "leak check", "disttest", at(RankPhase::kCheckingLeaks),
          until(RankPhase::kCheckingLeaks));
  ev.Span(tid, "end", "disttest", at(RankPhase::kFinished), ended);
}

// Each operation in the rank's ledger (`v`).
void AddOperations(Events& ev, int tid, const RankLedgerView& v) {
  for (const LedgerRecord& op : v.records) {
    const std::int64_t to = op.ended_ns > 0 ? op.ended_ns : v.read_ns;
    ev.Span(tid, op.str(), op.collective() ? "collective" : "transfer",
            op.entered_ns, to,
            fmt::format(R"("number":{},"communicator":"{}","called":"{}",)"
                        R"("state":"{}")",
                        op.seq, Escaped(v.comm_name(op.comm)),
                        Escaped(op.where()), StateName(op.state)));
  }
}

// Each failure of the rank as it came, and how it ended unless it passed.
void AddFailures(Events& ev, int tid, const RankReport& r, std::int64_t ended) {
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const RankMessage& m = r.results[i];
    if (m.kind != RankMessage::Kind::kNonFatalFailure &&
        m.kind != RankMessage::Kind::kFatalFailure) {
      continue;
    }
    if (i >= r.received.size()) continue;
    ev.Instant(tid, "failure", Ns(r.received[i]),
               fmt::format(R"("message":"{}","at":"{}:{}")", Escaped(m.message),
                           Escaped(m.file), m.line));
  }
  if (r.outcome &&
      !(r.outcome->exited() && r.outcome->exit_code() == kExitPassed) &&
      ended > 0) {
    ev.Instant(tid, "ended", ended,
               fmt::format(R"("how":"{}")", Escaped(r.outcome->str())));
  }
}

}  // namespace

bool TraceWanted() {
  const char* dir = std::getenv(env::kTrace);
  return dir != nullptr && *dir != '\0';
}

std::string TraceJson(const TestSpec& spec,
                      const std::vector<RankReport>& ranks) {
  Events ev(FirstStart(ranks));
  ev.Meta("process_name", 0,
          spec.fixture.empty() ? spec.name
                               : spec.name + " (fixture " + spec.fixture + ")");
  std::uint64_t dropped = 0;
  for (const RankReport& r : ranks) {
    const int tid = r.rank;
    ev.Meta("thread_name", tid, fmt::format("rank {}", r.rank));
    const std::int64_t ended = r.ended_at ? Ns(*r.ended_at) : 0;
    if (!r.ledger) continue;
    const RankLedgerView& v = *r.ledger;
    dropped += v.dropped;
    AddPhases(ev, tid, r, v, ended);
    AddOperations(ev, tid, v);
    AddFailures(ev, tid, r, ended);
  }
  return ev.Json(fmt::format(R"("test":"{}","world_size":{},)"
                             R"("operations_not_kept":{})",
                             Escaped(spec.name), spec.world_size, dropped));
}

std::string WriteTrace(const TestSpec& spec,
                       const std::vector<RankReport>& ranks) {
  const char* dir = std::getenv(env::kTrace);
  std::string name = spec.name;
  std::replace(name.begin(), name.end(), '/', '.');
  if (!spec.fixture.empty()) name += "." + spec.fixture;
  const std::filesystem::path path =
      std::filesystem::path(dir) / (name + ".trace.json");
  std::string why = MakeOwnDirectory(dir);
  const int fd =
      why.empty() ? CreateOwnFile(path.string(), /*append=*/false, &why) : -1;
  if (fd < 0) {
    throw ConfigError(fmt::format("{}={}: {}", env::kTrace, dir, why));
  }
  const std::string json = TraceJson(spec, ranks);
  std::size_t done = 0;
  while (done < json.size()) {
    const ssize_t n = write(fd, json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd);
      throw ConfigError(fmt::format("{}={}: cannot write {}: {}", env::kTrace,
                                    dir, path.string(), std::strerror(e)));
    }
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  return path.string();
}

}  // namespace disttest::internal
