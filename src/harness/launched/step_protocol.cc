// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/step_protocol.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <sstream>

#include "comm/ledger.h"
#include "disttest/error.h"
#include "env/knobs.h"
#include "harness/rank_outcome.h"

namespace disttest::internal::launched {
namespace {

// How long rank 0 waits beyond the timeout for the ranks' results (a body
// whose collectives fail at the deadline takes a moment to return).
constexpr std::chrono::milliseconds kReportGrace{6000};

std::string Text(const std::vector<char>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

RankReport Reported(LaunchedJob& job, const StepKeys& keys, int r) {
  RankReport report;
  report.rank = r;
  const std::string all = Text(job.store().get(keys.Done(r)));
  // "<count> <verdict> [<age of each result>...]", then its collective
  // ledger (the ages are before its read).
  const std::size_t newline = all.find('\n');
  std::istringstream first(all.substr(0, newline));
  int count = 0;
  std::string word;
  first >> count >> word;
  std::vector<std::int64_t> ages;
  for (std::int64_t age = 0; first >> age;) ages.push_back(age);
  if (newline != std::string::npos) {
    std::string error;
    report.ledger =
        DecodeLedger(std::string_view(all).substr(newline + 1), &error);
    if (!report.ledger) {
      // The report goes without it; the rank's own verdict stands.
      std::fprintf(stderr,
                   "[ disttest ] rank %d's collective ledger could not be "
                   "read: %s\n",
                   r, error.c_str());
    } else {
      OnThisClock(&*report.ledger);
      if (report.ledger->read_wall_ns > 0) {
        for (const std::int64_t age : ages) {
          report.received.emplace_back(
              std::chrono::nanoseconds(report.ledger->read_ns - age));
        }
      }
    }
  }
  std::optional<RankVerdict> verdict = ParseRankVerdict(word);
  if (!verdict) {
    report.channel_errors.push_back(
        fmt::format("reported the unknown verdict '{}'", word));
  }
  report.done = verdict.value_or(RankVerdict::kFailed);
  // As a spawned rank with that verdict would have ended.
  report.outcome =
      RankOutcome::FromWaitStatus(W_EXITCODE(ExitCodeOf(*report.done), 0));
  for (int i = 0; i < count; ++i) {
    std::vector<char> bytes =
        job.store().get(keys.Message(r, static_cast<std::size_t>(i)));
    RankMessage m;
    std::string error;
    if (DecodeRankMessage(bytes.data(), bytes.size(), &m, &error)) {
      report.results.push_back(std::move(m));
    } else {
      report.channel_errors.push_back("a result could not be read: " + error);
    }
  }
  return report;
}

}  // namespace

// How long past a start's deadline the ranks other than 0 wait for it.
constexpr std::chrono::milliseconds kSayWhyFirst{2000};

namespace {

// One line of the encoded plan: `text` with its backslashes and line ends
// escaped (a parameter prints as its type's PrintTo() will).
std::string OneLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FromOneLine(const std::string& line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      out += line[++i] == 'n' ? '\n' : line[i];
    } else {
      out += line[i];
    }
  }
  return out;
}

}  // namespace

// world size, repeat, the count of settings, the settings, then each test
// and its parameter on lines of their own.
std::string RunPlan::Encode() const {
  std::string text =
      fmt::format("{}\n{}\n{}\n", world_size, repeat, settings.size());
  for (const std::string& setting : settings) text += OneLine(setting) + "\n";
  for (std::size_t i = 0; i < tests.size(); ++i) {
    text += OneLine(tests[i]) + "\n";
    text += OneLine(i < params.size() ? params[i] : "") + "\n";
  }
  return text;
}

RunPlan RunPlan::Decode(const std::string& text) {
  RunPlan plan;
  std::istringstream in(text);
  std::string line;
  if (std::getline(in, line)) plan.world_size = std::atoi(line.c_str());
  if (std::getline(in, line)) plan.repeat = std::atoi(line.c_str());
  std::size_t settings = 0;
  if (std::getline(in, line))
    settings = std::strtoul(line.c_str(), nullptr, 10);
  for (std::size_t i = 0; i < settings && std::getline(in, line); ++i) {
    plan.settings.push_back(FromOneLine(line));
  }
  while (std::getline(in, line)) {
    plan.tests.push_back(FromOneLine(line));
    plan.params.push_back(std::getline(in, line) ? FromOneLine(line) : "");
  }
  return plan;
}

namespace {

// "A.B/2ranks, A.C/2ranks and 3 more"
std::string SomeNames(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 3;
  std::vector<std::string> shown(
      names.begin(), names.begin() + std::min(names.size(), kShown));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > kShown) {
    text += fmt::format(" and {} more", names.size() - kShown);
  }
  return text;
}

}  // namespace

std::string PlanDifference(const RunPlan& mine, const RunPlan& zero) {
  std::vector<std::string> how;
  if (mine.world_size != zero.world_size) {
    how.push_back(fmt::format("says WORLD_SIZE={} (rank 0: {})",
                              mine.world_size, zero.world_size));
  }
  if (mine.repeat != zero.repeat) {
    how.push_back(fmt::format("runs --gtest_repeat={} (rank 0: {})",
                              mine.repeat, zero.repeat));
  }
  for (std::size_t i = 0;
       i < std::min(mine.settings.size(), zero.settings.size()); ++i) {
    if (mine.settings[i] != zero.settings[i]) {
      how.push_back(fmt::format("runs with {} (rank 0: {})", mine.settings[i],
                                zero.settings[i]));
    }
  }
  // Each process's gtest made the parameters: a generator that gives other
  // values in each (std::random_device, the time) gives the ranks other
  // tests under one name.
  std::map<std::string, std::string> zero_params;
  for (std::size_t i = 0; i < zero.tests.size() && i < zero.params.size();
       ++i) {
    zero_params.emplace(zero.tests[i], zero.params[i]);
  }
  std::vector<std::string> other_params;
  for (std::size_t i = 0; i < mine.tests.size() && i < mine.params.size();
       ++i) {
    auto it = zero_params.find(mine.tests[i]);
    if (it == zero_params.end() || it->second == mine.params[i]) continue;
    other_params.push_back(fmt::format("{}: {}, rank 0's: {}", mine.tests[i],
                                       mine.params[i], it->second));
  }
  if (!other_params.empty()) {
    how.push_back(fmt::format(
        "gives {} test{} another parameter ({}): gtest makes the parameters "
        "in each process, and the generator gave other values here; make it "
        "give the same values in every process",
        other_params.size(), other_params.size() == 1 ? "" : "s",
        SomeNames(other_params)));
  }
  std::vector<std::string> a = mine.tests, b = zero.tests;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<std::string> lacks, extra;
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(),
                      std::back_inserter(lacks));
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(),
                      std::back_inserter(extra));
  if (!lacks.empty()) {
    how.push_back(fmt::format(
        "lacks {} of rank 0's {} test{} ({})", lacks.size(), zero.tests.size(),
        zero.tests.size() == 1 ? "" : "s", SomeNames(lacks)));
  }
  if (!extra.empty()) {
    how.push_back(fmt::format("runs {} test{} rank 0 does not ({})",
                              extra.size(), extra.size() == 1 ? "" : "s",
                              SomeNames(extra)));
  }
  if (lacks.empty() && extra.empty() && mine.tests != zero.tests) {
    std::size_t i = 0;
    while (mine.tests[i] == zero.tests[i]) ++i;
    how.push_back(fmt::format(
        "runs the same tests in another order (test {}: {}, rank 0's: {})",
        i + 1, mine.tests[i], zero.tests[i]));
  }
  return fmt::format("{}", fmt::join(how, "; "));
}

namespace {

// Rank 0 waits for every rank's key. Once every rank came, or the deadline
// passed, a rank that never reached the store never will (the job's end
// waits for it no more); not when trouble elsewhere ended the wait first (a
// rank that found the plans differ): a rank still starting then may come
// late, and is waited for at the end, so that it leaves with the run
// instead of looking for a store that is gone.
void AwaitEveryRank(LaunchedJob& job, const std::vector<std::string>& keys,
                    const std::vector<int>& from, Clock::time_point deadline,
                    const std::string& what) {
  try {
    job.liveness().Await(keys, deadline, from, what);
  } catch (...) {
    if (Clock::now() >= deadline) job.NoteStartWaited();
    throw;
  }
  job.NoteStartWaited();
}

}  // namespace

void ComparePlans(LaunchedJob& job, const RunPlan& plan,
                  Clock::time_point deadline) {
  const std::string what = "the comparison of the ranks' test lists";
  std::string finding = "ok";
  if (job.rank() == 0) {
    job.store().set(kPlanKey, plan.Encode());
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int r = 1; r < job.size(); ++r) {
      keys.push_back(PlanSeenKey(r));
      from.push_back(r);
    }
    AwaitEveryRank(job, keys, from, deadline, what);
    job.AllJoined();
    std::vector<std::string> differ;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string said = Text(job.store().get(keys[i]));
      if (said != "ok")
        differ.push_back(fmt::format("rank {} {}", from[i], said));
    }
    if (!differ.empty()) {
      finding = fmt::format(
          "the launched ranks would not run the same tests alike: {}; every "
          "rank must run the same binary with the same --gtest_filter, "
          "--gtest_repeat, --gtest_shuffle and --gtest_random_seed, the "
          "same WORLD_SIZE, and the same DISTTEST_TIMEOUT, "
          "DISTTEST_TIMEOUT_SCALE, DISTTEST_COMPARE_CALLS, DISTTEST_HEARTBEAT, "
          "DISTTEST_SHARE_GPUS and DISTTEST_REQUIRE_GPUS (a launcher that "
          "does not pass the environment on to every node: mpirun -x NAME)",
          fmt::join(differ, "; "));
    }
  } else {
    job.liveness().Await({kPlanKey}, deadline, {0}, what);
    const std::string how =
        PlanDifference(plan, RunPlan::Decode(Text(job.store().get(kPlanKey))));
    job.store().set(PlanSeenKey(job.rank()), how.empty() ? "ok" : how);
    // It need not wait for rank 0's finding (which may never come, when
    // rank 0 waits for ranks its WORLD_SIZE has and the launcher did not
    // start): the caller breaks the run with this, and everyone stops.
    if (!how.empty()) {
      throw Error(fmt::format(
          "the launched ranks would not run the same tests alike: rank {} "
          "{}",
          job.rank(), how));
    }
  }
  if (job.rank() == 0) {
    job.store().set(kPlansKey, finding);
  } else {
    // Rank 0 knows why the comparison failed (which ranks never came): the
    // others give it a moment past the deadline to say so first.
    job.liveness().Await({kPlansKey}, deadline + kSayWhyFirst, {0}, what);
    finding = Text(job.store().get(kPlansKey));
  }
  if (finding != "ok") throw Error(finding);
}

void MeetAtTest(LaunchedJob& job, int seq, const std::string& name,
                Clock::time_point deadline) {
  job.store().set(AtKey(seq, job.rank()), name);
  if (job.rank() == 0) {
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int r = 0; r < job.size(); ++r) {
      keys.push_back(AtKey(seq, r));
      from.push_back(r);
    }
    AwaitEveryRank(job, keys, from, deadline,
                   fmt::format("the start of {}", name));
    std::vector<std::string> elsewhere;
    for (int r = 1; r < job.size(); ++r) {
      std::string test =
          Text(job.store().get(keys[static_cast<std::size_t>(r)]));
      if (test != name) {
        elsewhere.push_back(fmt::format("rank {} at {}", r, test));
      }
    }
    job.store().set(
        StartKey(seq),
        elsewhere.empty()
            ? std::string("ok")
            : fmt::format("the ranks are not at the same test: rank 0 at {}, "
                          "{}; every rank must run the same binary with the "
                          "same --gtest_filter, --gtest_repeat and "
                          "--gtest_random_seed",
                          name, fmt::join(elsewhere, ", ")));
  }
  // Rank 0 knows why a start failed (which ranks never came): the others
  // give it a moment past the deadline to say so first.
  job.liveness().Await({StartKey(seq)},
                       job.rank() == 0 ? deadline : deadline + kSayWhyFirst,
                       {0}, fmt::format("the start of {}", name));
  std::string start = Text(job.store().get(StartKey(seq)));
  if (start != "ok") throw Error(start);
}

std::string ShareFromRankZero(LaunchedJob& job, const std::string& key,
                              const std::string& value,
                              Clock::time_point deadline,
                              const std::string& what) {
  if (job.rank() == 0) {
    job.store().set(key, value);
    return value;
  }
  job.liveness().Await({key}, deadline, {0}, what);
  return Text(job.store().get(key));
}

std::vector<RankReport> GatherReports(LaunchedJob& job, const StepKeys& keys,
                                      const TestSpec& spec,
                                      Clock::time_point deadline) {
  const int n = spec.world_size;
  std::vector<std::string> done;
  std::vector<int> from;
  for (int q = 0; q < n; ++q) {
    done.push_back(keys.Done(q));
    from.push_back(q);
  }
  // Collected even after an abort: the ranks that can still report say
  // how the others' failure looked from where they were.
  std::map<int, std::string> missing = job.liveness().AwaitResults(
      done, from, deadline + ScaledUp(kReportGrace), /*cut_on_interrupt=*/true);
  std::vector<RankReport> reports;
  for (int q = 0; q < n; ++q) {
    auto it = missing.find(q);
    if (it == missing.end()) {
      reports.push_back(Reported(job, keys, q));
      continue;
    }
    RankReport lost;
    lost.rank = q;
    lost.done = RankVerdict::kFailed;
    lost.outcome = RankOutcome::FromWaitStatus(
        W_EXITCODE(ExitCodeOf(RankVerdict::kFailed), 0));
    lost.results.push_back({RankMessage::Kind::kFatalFailure, spec.file,
                            spec.line,
                            "did not report its result: " + it->second});
    reports.push_back(std::move(lost));
  }
  // A failed test's report says where each rank's collectives were: as its
  // watchdog found them at the timeout, when it did.
  if (std::any_of(reports.begin(), reports.end(), RankFailed)) {
    for (RankReport& r : reports) {
      try {
        const std::string key = keys.Ledger(r.rank);
        if (!job.store().check({key})) continue;
        std::optional<RankLedgerView> at_timeout =
            DecodeLedger(Text(job.store().get(key)));
        if (at_timeout) {
          OnThisClock(&*at_timeout);
          r.ledger = std::move(at_timeout);
        }
      } catch (const std::exception&) {
        break;  // The store is gone: what came with the verdicts.
      }
    }
  }
  return reports;
}

void PublishVerdict(LaunchedJob& job, const StepKeys& keys,
                    RankVerdict verdict) {
  job.store().set(keys.Verdict(), std::string(NameOf(verdict)));
}

RankVerdict AwaitVerdict(LaunchedJob& job, const StepKeys& keys,
                         const std::string& name, Clock::time_point deadline) {
  // Not ended by an abort either: rank 0 reports the test all the same.
  std::map<int, std::string> missing = job.liveness().AwaitResults(
      {keys.Verdict()}, {0}, deadline + 2 * ScaledUp(kReportGrace));
  if (!missing.empty()) {
    throw Error(fmt::format("rank 0 gave no verdict for {}: {}", name,
                            missing.begin()->second));
  }
  const std::string word = Text(job.store().get(keys.Verdict()));
  std::optional<RankVerdict> verdict = ParseRankVerdict(word);
  if (!verdict) {
    throw Error(
        fmt::format("rank 0 gave the unknown verdict '{}' for {}", word, name));
  }
  return *verdict;
}

}  // namespace disttest::internal::launched
