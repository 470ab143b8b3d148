// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What one distributed test costs: spawn, rendezvous, communicator, barrier,
// an allreduce of 8 floats, and teardown, at world sizes 1 to 256, with
// forked ranks (with and without the same-host arena), re-executed ranks,
// ranks as threads (to 1,024), pooled ranks, and ranks without a
// communicator. Prints
// the median (and the 10th and 90th percentiles) over N runs of each (at 64
// ranks and more, over --big-runs), and the peak RSS of the parent and of
// the largest rank.
//
//   ./build/bench/per_test_cost            # 50 runs (10 at 64+ ranks)
//   ./build/bench/per_test_cost --runs=200 --big-runs=20
//   ./build/bench/per_test_cost --big-runs=0   # up to 32 ranks only
//   ./build/bench/per_test_cost --gtest_filter='Pooled.*'   # no raw row
//   ./build/bench/per_test_cost --raw=no   # --raw=yes with a filter
//
// Beside ours, it times the same work done the plain way (RawForkGloo): fork
// one child per rank, each makes Gloo's tcp device and full mesh over a
// disttest TcpStore, a barrier and the allreduce, then _exit; the parent
// reaps them. That is what a hand-rolled fork loop costs with Gloo as it
// comes, so the two rows give the ratio.
//
// It is a gtest binary: re-executed ranks run its main() again, as ranks of
// any user's test binary do.
#include <disttest/disttest.h>
#include <disttest/env/names.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "comm/gloo_store.h"
#include "env/internal_names.h"
#include "rendezvous/store_server_thread.h"

namespace {

// The world sizes of the table; from kFirstBig on, a test runs --big-runs
// times (it skips itself after that, and skips are not timed), not --runs.
constexpr int kWorlds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
constexpr int kFirstBig = 64;
int g_big_runs = 10;

class Row : public disttest::DistributedTest {
 protected:
  void SetUp() override {
    // A re-executed rank runs SetUp() too, once, and so does each rank
    // thread (its own fixture object, beside the others' and this static):
    // a rank never skips; the parent decides.
    if (disttest::InRank()) return;
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name =
        std::string(info->test_suite_name()) + "." + info->name();
    static std::map<std::string, int> runs;
    if (world_size() >= kFirstBig && ++runs[name] > g_big_runs) {
      GTEST_SKIP() << "ran --big-runs=" << g_big_runs << " times";
    }
  }
};

class Fork : public Row {};

// Forked ranks whose collectives all go through Gloo, as without the
// same-host arena (DISTTEST_NO_HOST_ARENA=1, read when the ranks start).
class ForkGlooOnly : public Row {
 protected:
  void SetUp() override {
    Row::SetUp();
    setenv(disttest::env::kNoHostArena, "1", 1);
  }
  void TearDown() override { unsetenv(disttest::env::kNoHostArena); }
};

class Exec : public Row {
 protected:
  Exec() { options().launch = disttest::LaunchMode::kExec; }
};

// Every rank a thread of one process forked for the test.
class Threads : public Row {
 protected:
  Threads() { options().launch = disttest::LaunchMode::kThreads; }
};

class Pooled : public Row {
 protected:
  Pooled() { options().reuse_workers = true; }
};

class NoComm : public Row {
 protected:
  NoComm() { options().init_distributed = false; }
};

void BarrierAndAllReduce(disttest::Communicator& comm) {
  comm.barrier();
  std::vector<float> v(8, 1.0f);
  comm.allreduce(v.data(), v.size(), disttest::ReduceOp::kSum);
  EXPECT_EQ(v[0], static_cast<float>(comm.size()));
}

DIST_TEST_F(Fork, BarrierAllReduce, 1, 2, 4, 8, 16, 32, 64, 128, 256) {
  BarrierAndAllReduce(comm());
}
// Gloo's full mesh: W(W-1)/2 connections; 64 ranks take seconds.
DIST_TEST_F(ForkGlooOnly, BarrierAllReduce, 1, 2, 4, 8, 16, 32) {
  BarrierAndAllReduce(comm());
}
DIST_TEST_F(Exec, BarrierAllReduce, 1, 2, 4, 8, 16, 32, 64, 128, 256) {
  BarrierAndAllReduce(comm());
}
DIST_TEST_F(Threads, BarrierAllReduce, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024) {
  BarrierAndAllReduce(comm());
}
// At most four pools live at once (WorkerPools): more world sizes would take
// turns evicting each other.
DIST_TEST_F(Pooled, BarrierAllReduce, 1, 2, 4, 8) {
  BarrierAndAllReduce(comm());
}
DIST_TEST_F(NoComm, Empty, 1, 2, 4, 8, 16, 32, 64, 128, 256) {}

// One rank of RawForkGloo, in a forked child. It _exits with the Gloo
// objects alive, as the reference measurement did: destroying them would
// wait on Gloo's event loop (gloo_mesh_cost.md, cause A) and make the raw
// row slower still.
[[noreturn]] void RawRank(int port, int rank, int world) {
  try {
    disttest::TcpStore store("127.0.0.1", port, std::chrono::seconds(30));
    disttest::internal::GlooStore adapter(store);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->connectFullMesh(adapter, device);
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    std::vector<float> v(8, 1.0f);
    gloo::AllreduceOptions allreduce(context);
    allreduce.setOutput(v.data(), v.size());
    allreduce.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
    gloo::allreduce(allreduce);
    _exit(v[0] == static_cast<float>(world) ? 0 : 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw rank %d: %s\n", rank, e.what());
    _exit(1);
  }
}

// One raw test: fork, reap. False if a rank failed.
bool RawForkGloo(int world) {
  disttest::internal::StoreServerThread server("127.0.0.1", 0);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) RawRank(server.port(), r, world);
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ok &= waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0;
  }
  return ok;
}

class Timer : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    start_ = std::chrono::steady_clock::now();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Skipped()) return;
    std::chrono::duration<double, std::milli> ms =
        std::chrono::steady_clock::now() - start_;
    times_[info.test_suite_name()][info.name()].push_back(ms.count());
    if (info.result()->Failed()) ++failures_;
  }
  void Add(const std::string& suite, const std::string& test, double ms,
           bool failed) {
    times_[suite][test].push_back(ms);
    if (failed) ++failures_;
  }
  const auto& times() const { return times_; }
  int failures() const { return failures_; }

 private:
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, std::map<std::string, std::vector<double>>> times_;
  int failures_ = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * (v.size() - 1))];
}

// Decimals enough for the row: pooled tests take a fraction of a
// millisecond.
int Digits(const std::vector<double>& v) {
  return Percentile(v, 0.5) < 1.0 ? 2 : 1;
}

void PrintTable(const Timer& timer, int runs, int big_runs) {
  std::printf(
      "\nper-test cost, ms: median (p10-p90) over %d runs (%d at %d ranks and "
      "more)\n\n",
      runs, big_runs, kFirstBig);
  std::printf("| mode |");
  for (int n : kWorlds) std::printf(" %d rank%s |", n, n == 1 ? "" : "s");
  std::printf("\n|---|");
  for (int n : kWorlds) {
    std::printf("---|%s", n == kWorlds[std::size(kWorlds) - 1] ? "\n" : "");
  }
  const std::pair<const char*, const char*> rows[] = {
      {"RawForkGloo", "raw fork + Gloo (hand-rolled, for the ratio)"},
      {"Fork", "fork, barrier + allreduce"},
      {"ForkGlooOnly", "fork, Gloo only (no host arena)"},
      {"Exec", "exec, barrier + allreduce"},
      {"Threads", "threads, barrier + allreduce"},
      {"Pooled", "pooled (reuse_workers), barrier + allreduce"},
      {"NoComm", "fork, no communicator"}};
  for (const auto& [suite, label] : rows) {
    std::printf("| %s |", label);
    auto it = timer.times().find(suite);
    for (int n : kWorlds) {
      std::string name;
      if (it != timer.times().end()) {
        for (const auto& [test, v] : it->second) {
          if (test.ends_with("/" + std::to_string(n) + "ranks")) name = test;
        }
      }
      if (name.empty()) {
        std::printf(" - |");
        continue;
      }
      const std::vector<double>& v = it->second.at(name);
      std::printf(" %.*f (%.*f-%.*f) |", Digits(v), Percentile(v, 0.5),
                  Digits(v), Percentile(v, 0.1), Digits(v), Percentile(v, 0.9));
    }
    std::printf("\n");
  }
  // Whether a test costs the same at the end of a long run as at its start
  // (TIME_WAIT sockets or leaks would make it drift).
  for (const auto& [suite, tests] : timer.times()) {
    for (const auto& [test, v] : tests) {
      if (v.size() < 200) continue;
      std::size_t tenth = v.size() / 10;
      std::vector<double> head(v.begin(), v.begin() + tenth);
      std::vector<double> tail(v.end() - tenth, v.end());
      std::printf(
          "%s.%s over %zu runs: median of the first tenth %.2f ms, of the "
          "last tenth %.2f ms\n",
          suite.c_str(), test.c_str(), v.size(), Percentile(head, 0.5),
          Percentile(tail, 0.5));
    }
  }
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  std::printf("\npeak RSS: parent %.1f MiB, largest rank %.1f MiB\n",
              self.ru_maxrss / 1024.0, children.ru_maxrss / 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 50;
  int big_runs = 10;
  std::string raw = "auto";  // yes, no, auto: only without --gtest_filter
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--runs=", 7) == 0) {
      runs = std::atoi(argv[i] + 7);
    } else if (std::strncmp(argv[i], "--big-runs=", 11) == 0) {
      big_runs = std::atoi(argv[i] + 11);
    } else if (std::strncmp(argv[i], "--raw=", 6) == 0) {
      raw = argv[i] + 6;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  ::testing::InitGoogleTest(&n, args.data());
  // A re-executed rank runs this main() too: there it is an ordinary gtest
  // run of one test.
  if (std::getenv(disttest::env::kInternalChildTest) != nullptr) {
    return RUN_ALL_TESTS();
  }
  if (runs < 1 || big_runs < 0) {
    std::fprintf(stderr,
                 "per_test_cost: --runs must be at least 1 and --big-runs at "
                 "least 0\n");
    return 2;
  }
  if (raw != "yes" && raw != "no" && raw != "auto") {
    std::fprintf(stderr,
                 "per_test_cost: --raw must be yes, no or auto, not %s\n",
                 raw.c_str());
    return 2;
  }
  GTEST_FLAG_SET(repeat, runs);
  g_big_runs = big_runs;
  // Each round runs the rows (gtest's suites) in a new order, and the world
  // sizes within each: a test that follows one which left the CPUs idle a
  // while costs more (here, +1.5 ms after 20 ms idle), and shuffled, no row
  // always comes after the same one.
  GTEST_FLAG_SET(shuffle, true);
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* timer = new Timer;
  listeners.Append(timer);
  int rc = RUN_ALL_TESTS();
  // The raw row runs after disttest's rows, in rounds of its own: its ranks
  // leave TIME_WAIT sockets and idle CPUs behind, which would slow whatever
  // test came next (past some thousands of those sockets, binding any port
  // slows down). Only in a full run (no --gtest_filter) or with --raw.
  if (raw == "yes" || (raw == "auto" && GTEST_FLAG_GET(filter) == "*")) {
    std::mt19937 shuffle(std::random_device{}());
    std::vector<int> worlds = {1, 2, 4, 8, 16, 32};
    for (int round = 0; round < runs; ++round) {
      std::shuffle(worlds.begin(), worlds.end(), shuffle);
      for (int world : worlds) {
        auto start = std::chrono::steady_clock::now();
        bool ok = RawForkGloo(world);
        std::chrono::duration<double, std::milli> ms =
            std::chrono::steady_clock::now() - start;
        timer->Add("RawForkGloo",
                   "BarrierAllReduce/" + std::to_string(world) + "ranks",
                   ms.count(), !ok);
      }
    }
  }
  PrintTable(*timer, runs, big_runs);
  if (timer->failures() > 0) {
    std::printf("%d test runs failed\n", timer->failures());
  }
  return rc;
}
