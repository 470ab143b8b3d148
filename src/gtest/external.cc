// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "gtest/external.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/launch/launcher_env.h"
#include "disttest/rendezvous/prefix_store.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/text.h"
#include "gtest/rank_program.h"
#include "harness/launcher.h"
#include "harness/rank_main.h"
#include "harness/rank_outcome.h"
#include "harness/result_channel.h"
#include "harness/stack_dump.h"
#include "harness/verdict.h"
#include "launch/launch_internal.h"
#include "rendezvous/store_server_thread.h"

namespace disttest::internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kHeartbeatEvery{500};
constexpr milliseconds kDeadAfter{5000};     // No heartbeat for this long.
constexpr milliseconds kGoodbyeWait{30000};  // Rank 0 waits at the end.
// The store's timeout once every rank is connected: every request of the
// run's own is short (waits poll), so a store that is gone (rank 0 ended)
// is noticed within this, not after the test's whole timeout.
constexpr milliseconds kRequestTimeout{5000};
// After the timeout: how long a body may take to return once its
// collectives fail, and how long rank 0 waits beyond the timeout for the
// ranks' results.
constexpr milliseconds kBodyReturnGrace{2000};
constexpr milliseconds kReportGrace{6000};
constexpr char kAbortKey[] = "external/abort";
constexpr char kEndKey[] = "external/end";
constexpr char kStuck[] =
    "it was still in its body at the test's timeout (it printed its stacks "
    "to its stderr)";

std::string StuckKey(int rank) {
  return fmt::format("external/stuck/{}", rank);
}

// The variables a launcher is recognised by, for messages.
const char* VariablesOf(const std::string& launcher) {
  if (launcher == "torchrun") return "RANK, WORLD_SIZE and MASTER_ADDR";
  if (launcher == "slurm") return "SLURM_PROCID and SLURM_NTASKS";
  if (launcher == "openmpi") {
    return "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE";
  }
  return "the launcher's variables";
}

struct Detection {
  bool external = false;
  std::string error;  // Set: external, but the environment is unusable.
  LauncherEnv env;
};

const Detection& Detect() {
  static const Detection detection = [] {
    Detection d;
    if (std::getenv(env::kInternalChildTest) != nullptr) return d;
    // A death test's child runs the body as the rank that started it.
    if (IsDeathTestChild()) return d;
    const char* mode_variable = std::getenv(env::kLauncher);
    const std::string mode = mode_variable != nullptr ? mode_variable : "";
    if (mode == "spawn") return d;
    if (!mode.empty() && mode != "external") {
      d.external = true;
      d.error = fmt::format("{}={}: expected \"external\" or \"spawn\"",
                            env::kLauncher, mode);
      return d;
    }
    try {
      d.env = DetectLauncherEnv();
      // A launcher that started one process (`srun -n1 ctest`) leaves the
      // spawning to disttest.
      d.external = mode == "external" || d.env.world_size > 1;
    } catch (const ConfigError& e) {
      bool launcher_found = false;
      for (const char* rank : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                               "MV2_COMM_WORLD_RANK", "SLURM_PROCID"}) {
        const char* value = std::getenv(rank);
        if (value != nullptr && *value != '\0') launcher_found = true;
      }
      if (mode == "external" || launcher_found) {
        d.external = true;
        d.error = e.what();
      }
    }
    return d;
  }();
  return detection;
}

// Ranks other than 0 stay quiet: no gtest output, no XML and no stdout
// (rank 0 reports for everyone); with DISTTEST_LOG_DIR their stdout and
// stderr, gtest's output included, go to dir/rank-<r>.log. gtest creates its
// XML writer after this runs, so it is dropped when the run starts.
class DropXmlOutput : public ::testing::EmptyTestEventListener {
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    ::testing::TestEventListeners& listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_xml_generator());
  }
};

const bool kQuietRank = [] {
  const Detection& d = Detect();
  if (!d.external || !d.error.empty() || d.env.rank == 0) return false;
  // Said before it goes quiet: a rank started by an enclosing job's
  // variables, rather than by a launcher of this binary, must not just
  // hang, or exit without a word.
  std::fprintf(stderr,
               "[ disttest ] rank %d of %d, launched by %s: rank 0 (at "
               "%s:%d) serves the store and reports for every rank; this "
               "rank's gtest output is dropped (DISTTEST_LOG_DIR keeps it)\n",
               d.env.rank, d.env.world_size, d.env.launcher.c_str(),
               d.env.master_addr.c_str(), d.env.master_port);
  std::fflush(stderr);
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  listeners.Append(new DropXmlOutput);
  // stdout is rank 0's; stderr stays for what must be seen (a crash, the
  // stacks of a hang).
  const char* dir = std::getenv(env::kLogDir);
  if (dir != nullptr && *dir != '\0') {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::string path =
        (std::filesystem::path(dir) / fmt::format("rank-{}.log", d.env.rank))
            .string();
    if (std::freopen(path.c_str(), "a", stdout) != nullptr) {
      std::setvbuf(stdout, nullptr, _IOLBF, 0);
      (void)!dup2(fileno(stdout), STDERR_FILENO);
    }
    // The log keeps this rank's own view of each test.
  } else {
    delete listeners.Release(listeners.default_result_printer());
    (void)!std::freopen("/dev/null", "w", stdout);
  }
  return true;
}();

// The run's shared state in this process: the store (rank 0 hosts it), the
// communicators, the heartbeat and the watchdog. Created at the first
// distributed test and kept until the process exits.
class ExternalWorld {
 public:
  // The world, created at the first call; a failure to create it is
  // remembered, so that every later test fails at once rather than wait
  // for the ranks again.
  static ExternalWorld& Get() {
    static ExternalWorld* world = nullptr;
    static std::string failure;
    if (world == nullptr && failure.empty()) {
      const Detection& d = Detect();
      try {
        if (!d.error.empty()) throw ConfigError(d.error);
        world = new ExternalWorld(d.env);
      } catch (const std::exception& e) {
        failure = e.what();
        // Every rank says why it stops (the gtest output of ranks other
        // than 0 is dropped), once.
        if (!d.error.empty()) {
          // The environment itself is unusable: the error says what.
          std::fprintf(stderr,
                       "[ disttest ] cannot join the launched ranks: %s\n",
                       failure.c_str());
        } else {
          std::fprintf(
              stderr,
              "[ disttest ] rank %d of %d (launched by %s) cannot join the "
              "launched ranks: %s\n[ disttest ] if %s come from an enclosing "
              "job rather than from a launcher that started this binary, run "
              "it with %s=spawn\n",
              d.env.rank, d.env.world_size, d.env.launcher.c_str(),
              failure.c_str(), VariablesOf(d.env.launcher), env::kLauncher);
        }
        std::fflush(stderr);
      }
    }
    if (world == nullptr) throw Error(failure);
    return *world;
  }

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const LauncherEnv& env() const { return env_; }
  Store& store() { return *store_; }
  // Why the run cannot go on ("" while it can): this process's own
  // reason, or the abort key another rank set.
  std::string broken() {
    std::string reason = Broken();
    if (reason.empty()) {
      try {
        if (store_->check({kAbortKey})) reason = Value(kAbortKey);
      } catch (const std::exception& e) {
        reason =
            fmt::format("the store is gone (did rank 0 end?): {}", e.what());
      }
      if (!reason.empty()) SetBroken(reason);
    }
    return reason;
  }
  int NextSeq() { return seq_++; }

  // Waits until every key in `keys` is set, polling (with backoff) so that
  // it can notice an abort and ranks in `from` that stopped heartbeating.
  void Await(const std::vector<std::string>& keys, Clock::time_point deadline,
             const std::vector<int>& from, const std::string& what) {
    auto pause = std::chrono::microseconds(50);
    auto next_health = Clock::now() + std::chrono::seconds(1);
    for (;;) {
      if (store_->check(keys)) return;
      if (store_->check({kAbortKey})) throw Error(Value(kAbortKey));
      const auto now = Clock::now();
      if (now >= deadline) {
        std::vector<int> missing;
        for (std::size_t i = 0; i < keys.size(); ++i) {
          if (!store_->check({keys[i]})) missing.push_back(from[i]);
        }
        throw TimeoutError(fmt::format(
            "{}: rank{} {} did not arrive before the test's timeout", what,
            missing.size() == 1 ? "" : "s", fmt::join(missing, ", ")));
      }
      if (now >= next_health) {
        CheckHeartbeats(from, now);
        next_health = now + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, milliseconds(10));
    }
  }

  // A wait for results (rank 0's for the ranks', the others' for rank
  // 0's verdict): until all are in, the ranks still missing have stopped
  // heartbeating, or `deadline`. An abort does not end it: whoever can
  // still report does. Returns why each missing rank is missing.
  std::map<int, std::string> AwaitResults(const std::vector<std::string>& keys,
                                          const std::vector<int>& from,
                                          Clock::time_point deadline) {
    auto pause = std::chrono::microseconds(50);
    auto next_health = Clock::now() + std::chrono::seconds(1);
    std::map<int, std::string> dead;
    for (;;) {
      if (store_->check(keys)) return {};
      const auto now = Clock::now();
      const bool late = now >= deadline;
      const bool health = now >= next_health;
      if (late || health) {
        next_health = now + std::chrono::seconds(1);
        std::map<int, std::string> missing;
        for (std::size_t i = 0; i < keys.size(); ++i) {
          if (store_->check({keys[i]})) continue;
          const int r = from[i];
          if (store_->check({StuckKey(r)})) {
            dead[r] = kStuck;  // It says so itself, and has told the others.
          }
          std::string why = Dead(r, now, *store_);
          if (!why.empty() && dead.count(r) == 0) {
            dead[r] = why;
            Break(
                fmt::format("rank {} {}", r, why));  // The world is not whole.
          }
          auto it = dead.find(r);
          missing[r] = it != dead.end() ? it->second : "";
        }
        bool all_dead = true;
        for (auto& [r, why] : missing) {
          if (why.empty()) all_dead = false;
        }
        if (late || all_dead) {
          for (auto& [r, why] : missing) {
            if (why.empty()) why = kStuck;
          }
          return missing;
        }
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, milliseconds(10));
    }
  }

  // Fails the run on every rank: the reason goes to the store, where every
  // waiting rank sees it, and every later test here fails at once.
  void Break(const std::string& reason) {
    SetBroken(reason);
    try {
      std::lock_guard<std::mutex> lock(side_mu_);
      if (!side_store_->check({kAbortKey})) {
        side_store_->set(kAbortKey, fmt::format("rank {}: {}", rank(), reason));
      }
    } catch (const std::exception&) {
      // The store is gone (rank 0 ended): the others will notice too.
    }
  }

  // This process's communicator for the first `n` ranks (every rank below
  // `n` calls it at the same test); null when the test wants none.
  Communicator* CommFor(int n, const Options& options) {
    if (!options.init_distributed) return nullptr;
    // One per size, backend and timeout (a test may ask for others).
    const std::string key = fmt::format("{}/{}/{}", n, Name(options.backend),
                                        options.timeout.count());
    std::unique_ptr<Communicator>& comm = comms_[key];
    if (!comm) {
      GlooOptions gloo;
      gloo.hostname = BindHostFor(env_.master_addr);
      gloo.timeout = options.timeout;
      gloo.prefix = fmt::format("external/comm/{}/{}", generation_, key);
      // Connecting waits in the store for the peers' addresses, over a
      // connection of its own, which trouble elsewhere (a peer that died
      // before it published its address) can cut short.
      TcpStore connect_store(env_.master_addr, env_.master_port,
                             options.timeout);
      std::map<ino_t, int> before = TcpSockets();
      connect_store.check({kAbortKey});  // Connects.
      std::set<ino_t> own_store_socket;
      for (const auto& [inode, fd] : NewSince(before)) {
        if (Port(fd, /*peer=*/true) == env_.master_port) {
          own_store_socket.insert(inode);
        }
      }
      {
        std::lock_guard<std::mutex> lock(comm_sockets_mu_);
        comm_sockets_.insert(own_store_socket.begin(), own_store_socket.end());
      }
      before = TcpSockets();
      struct Forget {  // The connection closes with connect_store.
        ExternalWorld* world;
        const std::set<ino_t>* inodes;
        ~Forget() {
          std::lock_guard<std::mutex> lock(world->comm_sockets_mu_);
          for (ino_t inode : *inodes) world->comm_sockets_.erase(inode);
        }
      } forget{this, &own_store_socket};
      const int device =
          LaunchedDevice(options.backend, env_.local_rank, rank());
      comm = CreateCommunicator(options.backend, connect_store, rank(), n, gloo,
                                std::max(device, 0));
      // The new sockets, less the store's (rank 0 accepts connections
      // meanwhile, and a client may reconnect): Gloo's own.
      std::lock_guard<std::mutex> lock(comm_sockets_mu_);
      for (const auto& [inode, fd] : NewSince(before)) {
        if (Port(fd, false) != env_.master_port &&
            Port(fd, true) != env_.master_port) {
          comm_sockets_.insert(inode);
        }
      }
    }
    return comm.get();
  }

  // After a failed test: a communicator may hold messages a rank never
  // received; the next test gets fresh ones.
  void DropCommunicators() {
    std::lock_guard<std::mutex> lock(comm_sockets_mu_);
    comms_.clear();  // Under the lock: no shutdown() of a reused descriptor.
    ++generation_;
    comm_sockets_.clear();
  }

  // Watches a body: past `deadline` the process prints its stacks, tells
  // the others, and ends.
  void ArmWatchdog(Clock::time_point deadline, std::string what) {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_deadline_ = deadline;
    watch_what_ = std::move(what);
    watch_cv_.notify_all();
  }
  void DisarmWatchdog() {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_deadline_.reset();
    watch_cv_.notify_all();
  }

  // Puts a step's rank environment (RANK, WORLD_SIZE, ...) in the process
  // environment, remembering what was there; RestoreEnvironment() puts it
  // back. Under side_mu_, so that the side thread, which may resolve names
  // (getaddrinfo reads the environment), never sees it change.
  void SetRankEnvironment(const RankEnv& env) {
    std::lock_guard<std::mutex> lock(side_mu_);
    saved_env_.clear();
    std::vector<std::pair<std::string, std::string>> vars = env.Variables();
    if (std::getenv("LOCAL_WORLD_SIZE") != nullptr) {  // torchrun's name
      vars.emplace_back("LOCAL_WORLD_SIZE", std::to_string(env.local_size));
    }
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_env_.emplace_back(name, old != nullptr
                                        ? std::optional<std::string>(old)
                                        : std::nullopt);
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  void RestoreEnvironment() {
    std::lock_guard<std::mutex> lock(side_mu_);
    for (const auto& [name, old] : saved_env_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    saved_env_.clear();
  }

  // At the end of the run. Launchers such as mpirun end every process
  // once one exits with an error, so no rank may leave before rank 0 is
  // done: each says goodbye, rank 0 waits for every rank still alive, then
  // announces the end, which the others wait for (or for rank 0's store to
  // go).
  void Goodbye() {
    try {
      store_->set(fmt::format("external/bye/{}", rank()), "1");
    } catch (const std::exception&) {
      return;  // The store is gone: rank 0 has ended.
    }
    if (rank() == 0) {
      std::vector<std::string> keys;
      std::vector<int> from;
      std::vector<int> missing;
      for (int r = 0; r < size(); ++r) {
        keys.push_back(fmt::format("external/bye/{}", r));
        from.push_back(r);
        try {
          if (!store_->check({keys.back()})) missing.push_back(r);
        } catch (const std::exception&) {
        }
      }
      if (!missing.empty()) {
        // Not silent: a launcher such as mpirun ends every rank once one
        // exits, so rank 0 stays until the others have their verdicts.
        std::fprintf(stderr,
                     "[ disttest ] rank 0: the run is over here; waiting up "
                     "to %lld s for %s to finish before leaving\n",
                     static_cast<long long>(kGoodbyeWait.count() / 1000),
                     RanksText(missing).c_str());
        std::fflush(stderr);
      }
      try {
        AwaitResults(keys, from, Clock::now() + kGoodbyeWait);
        store_->set(kEndKey, "1");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[ disttest ] rank 0 at the end: %s\n", e.what());
      }
      return;
    }
    WaitForTheEnd(*store_);
  }

  // Until rank 0 announces the end of the run, or its store goes.
  static void WaitForTheEnd(TcpStore& store) {
    const auto deadline = Clock::now() + kGoodbyeWait;
    try {
      while (Clock::now() < deadline && !store.check({kEndKey})) {
        std::this_thread::sleep_for(milliseconds(10));
      }
    } catch (const std::exception&) {
      // Rank 0's store went with its process: the run is over.
    }
  }

 private:
  struct Beat {
    std::string value;
    Clock::time_point since;  // When `value` was first seen.
  };

  explicit ExternalWorld(LauncherEnv env) : env_(std::move(env)) {
    // Writing to a peer that died must fail the operation (Gloo writes
    // without MSG_NOSIGNAL), not kill this process with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    const milliseconds timeout =
        SecondsVariable(env::kTimeout).value_or(std::chrono::seconds(300));
    if (rank() == 0) {
      try {
        server_ = std::make_unique<StoreServerThread>(env_.master_addr,
                                                      env_.master_port);
      } catch (const std::exception& e) {
        throw StoreError(
            fmt::format("rank 0 cannot host the store on {}:{} (set "
                        "DISTTEST_MASTER_PORT to a free port): {}",
                        env_.master_addr, env_.master_port, e.what()));
      }
    }
    store_ =
        std::make_unique<TcpStore>(env_.master_addr, env_.master_port, timeout);
    side_store_ =
        std::make_unique<TcpStore>(env_.master_addr, env_.master_port, timeout);
    // The first requests connect, waiting for rank 0's store to come up.
    store_->check({kAbortKey});
    side_store_->check({kAbortKey});
    store_->set_timeout(kRequestTimeout);
    side_store_->set_timeout(kRequestTimeout);
    if (rank() == 0) {
      std::printf(
          "[ disttest ] launched by %s with %d ranks: each runs the test "
          "bodies itself; this is rank 0, which serves the store on %s:%d "
          "and reports for all\n",
          env_.launcher.c_str(), size(), env_.master_addr.c_str(),
          env_.master_port);
      std::fflush(stdout);
    }
    std::thread([this] { SideLoop(); }).detach();
  }

  // Ends every connection of the communicators, so that a body blocked in a
  // collective with a rank that is gone fails now (Gloo sees the closed
  // connection) rather than at the test's timeout. shutdown(), not close():
  // the descriptors stay Gloo's.
  void ShutDownCommunicators() {
    std::lock_guard<std::mutex> lock(comm_sockets_mu_);
    for (const auto& [inode, fd] : TcpSockets()) {
      if (comm_sockets_.count(inode) != 0) shutdown(fd, SHUT_RDWR);
    }
  }

  // The TCP sockets opened since `before` was taken.
  static std::map<ino_t, int> NewSince(const std::map<ino_t, int>& before) {
    std::map<ino_t, int> fresh;
    for (const auto& [inode, fd] : TcpSockets()) {
      if (before.count(inode) == 0) fresh.emplace(inode, fd);
    }
    return fresh;
  }

  // Socket `fd`'s local (or, with `peer`, remote) port; -1 when unknown.
  static int Port(int fd, bool peer) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                  : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    if (rc != 0) return -1;
    if (addr.ss_family == AF_INET) {
      return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    }
    if (addr.ss_family == AF_INET6) {
      return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    }
    return -1;
  }

  std::string Value(const char* key) {
    std::vector<char> v = store_->get(key);
    return std::string(v.begin(), v.end());
  }

  void CheckHeartbeats(const std::vector<int>& from, Clock::time_point now) {
    for (int r : from) {
      std::string why = Dead(r, now, *store_);
      if (!why.empty()) {
        std::string reason = fmt::format("rank {} {}", r, why);
        Break(reason);
        throw Error(reason);
      }
    }
  }

  // "stopped its heartbeat ... ago ..." when rank `r` seems dead, else "".
  // Both threads look (each through its own store connection) and share
  // what they saw, so that a death the side thread noticed during a body
  // counts at once afterwards.
  std::string Dead(int r, Clock::time_point now, TcpStore& store) {
    if (r == rank()) return "";
    const std::string key = fmt::format("external/alive/{}", r);
    // A rank that has not sent its first heartbeat yet is starting (slow
    // nodes, plain TEST()s before the first distributed one), not dead;
    // the wait's own deadline covers one that never comes.
    if (!store.check({key})) return "";
    std::vector<char> v = store.get(key);
    const std::string beat(v.begin(), v.end());
    std::lock_guard<std::mutex> lock(beats_mu_);
    auto [it, fresh] = beats_.try_emplace(r, Beat{beat, now});
    if (fresh || it->second.value != beat) {
      it->second = {beat, now};
      return "";
    }
    if (now - it->second.since <= kDeadAfter) return "";
    return fmt::format(
        "stopped its heartbeat {} ms ago: it died, or its machine stalls",
        std::chrono::duration_cast<milliseconds>(now - it->second.since)
            .count());
  }

  // The side thread, every kHeartbeatEvery: this rank's heartbeat; while a
  // body runs, the watchdog, and a look for trouble elsewhere (an abort, a
  // rank whose heartbeat stopped, the store gone), on which the body's
  // collectives are made to fail.
  void SideLoop() {
    long long beat = 0;
    int failures = 0;
    for (;;) {
      bool armed = false;
      std::string what;
      {
        std::unique_lock<std::mutex> lock(watch_mu_);
        watch_cv_.wait_for(lock, kHeartbeatEvery);
        armed = watch_deadline_.has_value();
        what = watch_what_;
        if (armed && Clock::now() >= *watch_deadline_) {
          lock.unlock();
          TimedOut(what);
        }
      }
      std::string trouble;
      try {
        std::lock_guard<std::mutex> side(side_mu_);
        side_store_->set(fmt::format("external/alive/{}", rank()),
                         std::to_string(++beat));
        if (armed) trouble = TroubleElsewhere();
        failures = 0;
      } catch (const std::exception& e) {
        // Gone for good (rank 0 ended) after a few failures in a row.
        if (!armed && ++failures >= 3) return;
        if (armed) {
          trouble =
              fmt::format("the store is gone (did rank 0 end?): {}", e.what());
        }
      }
      if (!trouble.empty() && !shut_down_) {
        shut_down_ = true;
        Break(trouble);
        ShutDownCommunicators();
      }
    }
  }

  // With side_mu_ held: why the running body cannot complete, or "".
  std::string TroubleElsewhere() {
    if (side_store_->check({kAbortKey})) {
      std::vector<char> v = side_store_->get(kAbortKey);
      return std::string(v.begin(), v.end());
    }
    const auto now = Clock::now();
    for (int r = 0; r < size(); ++r) {
      std::string why = Dead(r, now, *side_store_);
      if (!why.empty()) return fmt::format("rank {} {}", r, why);
    }
    return "";
  }

  // The body outlived the test's timeout. Every rank whose body still
  // runs gets here: the hung one, and those blocked in a collective with it.
  // Each prints its process's stacks (from a helper process, which may
  // attach to this one), tells the others, and makes its collectives fail;
  // a body that still does not return (stuck in its own code) ends the
  // process.
  void TimedOut(const std::string& what) {
    std::fprintf(stderr,
                 "[ disttest ] rank %d: %s is still in its body at the test's "
                 "timeout; the stacks of this process (pid %d):\n",
                 rank(), what.c_str(), getpid());
    std::fflush(stderr);
    const pid_t self = getpid();
    const int me = rank();
    pid_t helper = fork();
    if (helper == 0) {
      std::vector<std::string> stacks = DumpStacks({self}, milliseconds(10000));
      std::string text;
      std::size_t start = 0;
      while (start < stacks[0].size()) {
        std::size_t end = stacks[0].find('\n', start);
        if (end == std::string::npos) end = stacks[0].size();
        text += fmt::format("[rank {}] {}\n", me,
                            stacks[0].substr(start, end - start));
        start = end + 1;
      }
      (void)!write(STDERR_FILENO, text.data(), text.size());
      _exit(0);
    }
    if (helper > 0) {
      prctl(PR_SET_PTRACER, helper, 0, 0, 0);
      // Heartbeats go on meanwhile (this rank is alive, and says where it
      // hangs), and a helper that does not finish is ended.
      const auto give_up = Clock::now() + milliseconds(15000);
      long long beat = 0;
      while (waitpid(helper, nullptr, WNOHANG) == 0) {
        if (Clock::now() > give_up) {
          kill(helper, SIGKILL);
          waitpid(helper, nullptr, 0);
          break;
        }
        try {
          std::lock_guard<std::mutex> side(side_mu_);
          side_store_->set(fmt::format("external/alive/{}", rank()),
                           fmt::format("dumping {}", ++beat));
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(milliseconds(200));
      }
    }
    Break(fmt::format("{} timed out", what));
    shut_down_ = true;
    ShutDownCommunicators();
    std::unique_lock<std::mutex> lock(watch_mu_);
    if (!watch_cv_.wait_for(lock, kBodyReturnGrace,
                            [&] { return !watch_deadline_.has_value(); })) {
      // Stuck in its own code: nothing can stop it. This process ends
      // once rank 0 has reported (leaving earlier would make a launcher
      // such as mpirun end rank 0 too).
      std::fprintf(stderr,
                   "[ disttest ] rank %d: the body of %s does not return; "
                   "this process ends when rank 0 has reported\n",
                   rank(), what.c_str());
      std::fflush(nullptr);
      try {
        std::lock_guard<std::mutex> side(side_mu_);
        side_store_->set(StuckKey(rank()), "1");  // Rank 0 waits no longer.
        side_store_->set(fmt::format("external/bye/{}", rank()), "1");
        WaitForTheEnd(*side_store_);
      } catch (const std::exception&) {
      }
      std::fflush(nullptr);
      _exit(1);
    }
  }

  LauncherEnv env_;
  std::unique_ptr<StoreServerThread> server_;
  std::unique_ptr<TcpStore> store_;       // The main thread's.
  std::unique_ptr<TcpStore> side_store_;  // The side thread's, and Break's.
  std::mutex side_mu_;
  std::map<std::string, std::unique_ptr<Communicator>> comms_;
  std::mutex comm_sockets_mu_;
  std::set<ino_t> comm_sockets_;  // Inodes of the communicators' sockets.
  std::atomic<bool> shut_down_{false};
  int generation_ = 0;
  int seq_ = 0;
  std::string Broken() {
    std::lock_guard<std::mutex> lock(broken_mu_);
    return broken_;
  }
  void SetBroken(const std::string& reason) {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (broken_.empty()) broken_ = reason;
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_env_;
  std::mutex broken_mu_;
  std::string broken_;  // Why the run cannot go on; under broken_mu_.
  std::mutex beats_mu_;
  std::map<int, Beat> beats_;  // The last heartbeat seen of each rank.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::optional<Clock::time_point> watch_deadline_;
  std::string watch_what_;
};

// Says goodbye at the end of the run, so that rank 0 keeps serving the
// store until every rank has its last verdict.
class GoodbyeListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (used_) ExternalWorld::Get().Goodbye();
  }
  static void MarkUsed() { used_ = true; }

 private:
  static inline bool used_ = false;
};

const bool kGoodbyeInstalled = [] {
  if (!Detect().external) return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(new GoodbyeListener);
  return true;
}();

void Fatal(const TestSpec& spec, const std::string& message) {
  GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, message.c_str(),
                    ::testing::TestPartResult::kFatalFailure);
}

class ScopedRankEnvironment {
 public:
  ScopedRankEnvironment(ExternalWorld& world, const RankEnv& env)
      : world_(world) {
    world_.SetRankEnvironment(env);
  }
  ~ScopedRankEnvironment() { world_.RestoreEnvironment(); }
  ScopedRankEnvironment(const ScopedRankEnvironment&) = delete;
  ScopedRankEnvironment& operator=(const ScopedRankEnvironment&) = delete;

 private:
  ExternalWorld& world_;
};

// Every rank meets at the test; rank 0 checks that all run the same one.
void Meet(ExternalWorld& world, int seq, const std::string& name,
          Clock::time_point deadline) {
  const std::string base = fmt::format("external/{}/", seq);
  world.store().set(fmt::format("{}at/{}", base, world.rank()), name);
  if (world.rank() == 0) {
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int r = 0; r < world.size(); ++r) {
      keys.push_back(fmt::format("{}at/{}", base, r));
      from.push_back(r);
    }
    world.Await(keys, deadline, from, fmt::format("the start of {}", name));
    std::vector<std::string> elsewhere;
    for (int r = 1; r < world.size(); ++r) {
      std::vector<char> at =
          world.store().get(keys[static_cast<std::size_t>(r)]);
      std::string test(at.begin(), at.end());
      if (test != name)
        elsewhere.push_back(fmt::format("rank {} at {}", r, test));
    }
    world.store().set(
        base + "start",
        elsewhere.empty()
            ? std::string("ok")
            : fmt::format("the ranks are not at the same test: rank 0 at {}, "
                          "{}; every rank must run the same binary with the "
                          "same --gtest_filter, --gtest_repeat and "
                          "--gtest_random_seed",
                          name, fmt::join(elsewhere, ", ")));
  }
  world.Await({base + "start"}, deadline, {0},
              fmt::format("the start of {}", name));
  std::vector<char> start = world.store().get(base + "start");
  std::string verdict(start.begin(), start.end());
  if (verdict != "ok") throw Error(verdict);
}

RankReport Reported(ExternalWorld& world, const std::string& base, int r) {
  RankReport report;
  report.rank = r;
  std::vector<char> done = world.store().get(fmt::format("{}done/{}", base, r));
  std::string text(done.begin(), done.end());
  const std::size_t space = text.find(' ');
  const int count = std::atoi(text.substr(0, space).c_str());
  report.done = text.substr(space + 1);
  const int code = *report.done == kVerdictPassed    ? kExitPassed
                   : *report.done == kVerdictSkipped ? kExitSkipped
                                                     : kExitFailed;
  report.outcome = RankOutcome::FromWaitStatus(W_EXITCODE(code, 0));
  for (int i = 0; i < count; ++i) {
    std::vector<char> bytes =
        world.store().get(fmt::format("{}msg/{}/{}", base, r, i));
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

// One distributed step of a test (a fixture, or the test itself); true when
// the test goes on.
bool RunStep(ExternalWorld& world, DistributedTest& test, const TestSpec& spec,
             int seq, int step, DistributedFixture* fixture,
             Clock::time_point deadline) {
  const std::string base = fmt::format("external/{}/{}/", seq, step);
  const int n = spec.world_size;
  const int r = world.rank();
  if (r < n) {
    std::vector<RankMessage> mine;
    RankEnv env;
    env.rank = r;
    env.world_size = n;
    // The first n ranks: at most n of them on this node.
    env.local_size = std::min(world.env().local_size.value_or(world.size()), n);
    env.local_rank =
        std::min(world.env().local_rank.value_or(r), env.local_size - 1);
    env.master_addr = world.env().master_addr;
    env.master_port = world.env().master_port;
    // The body sees the rank environment a spawned rank would (RANK,
    // WORLD_SIZE, MASTER_ADDR, ...), for code that reads it; the
    // launcher's values come back after the step.
    ScopedRankEnvironment rank_environment(world, env);
    RankVerdict verdict = RankVerdict::kFailed;
    try {
      // Watched from here: connecting can hang on a dead peer too.
      world.ArmWatchdog(deadline, spec.name);
      Communicator* comm = world.CommFor(n, spec.options);
      PrefixStore step_store(base + "store", world.store());
      GtestRankProgram program(test, fixture);
      verdict = program.Run(env, comm, step_store,
                            [&](const RankMessage& m) { mine.push_back(m); });
      world.DisarmWatchdog();
    } catch (const std::exception& e) {
      // A peer that died while the communicator connected, say: this
      // rank still reports, so that rank 0 need not wait for it.
      world.DisarmWatchdog();
      mine.push_back(
          {RankMessage::Kind::kFatalFailure, spec.file, spec.line,
           fmt::format("disttest could not set up the rank: {}", e.what())});
      verdict = RankVerdict::kFailed;
    }
    for (std::size_t i = 0; i < mine.size(); ++i) {
      std::vector<char> bytes = EncodeRankMessage(mine[i], 1 << 20);
      world.store().set(fmt::format("{}msg/{}/{}", base, r, i), bytes);
    }
    const char* v = verdict == RankVerdict::kPassed    ? kVerdictPassed
                    : verdict == RankVerdict::kSkipped ? kVerdictSkipped
                                                       : kVerdictFailed;
    world.store().set(fmt::format("{}done/{}", base, r),
                      fmt::format("{} {}", mine.size(), v));
  }
  std::string verdict;
  if (r == 0) {
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int q = 0; q < n; ++q) {
      keys.push_back(fmt::format("{}done/{}", base, q));
      from.push_back(q);
    }
    // Collected even after an abort: the ranks that can still report say
    // how the others' failure looked from where they were.
    std::map<int, std::string> missing =
        world.AwaitResults(keys, from, deadline + kReportGrace);
    std::vector<RankReport> reports;
    for (int q = 0; q < n; ++q) {
      auto it = missing.find(q);
      if (it == missing.end()) {
        reports.push_back(Reported(world, base, q));
        continue;
      }
      RankReport lost;
      lost.rank = q;
      lost.done = kVerdictFailed;
      lost.outcome = RankOutcome::FromWaitStatus(W_EXITCODE(kExitFailed, 0));
      lost.results.push_back({RankMessage::Kind::kFatalFailure, spec.file,
                              spec.line,
                              "did not report its result: " + it->second});
      reports.push_back(std::move(lost));
    }
    Reraise(Judge(spec, reports));
    verdict = ::testing::Test::HasFailure()  ? kVerdictFailed
              : ::testing::Test::IsSkipped() ? kVerdictSkipped
                                             : kVerdictPassed;
    if (verdict == kVerdictFailed) {
      std::printf(
          "[ disttest ] rerun this test alone: the same launcher command "
          "with --gtest_filter=%s\n",
          spec.name.c_str());
      std::fflush(stdout);
    }
    world.store().set(base + "verdict", verdict);
  } else {
    // Not ended by an abort either: rank 0 reports the test all the same.
    std::map<int, std::string> missing = world.AwaitResults(
        {base + "verdict"}, {0}, deadline + 2 * kReportGrace);
    if (!missing.empty()) {
      throw Error(fmt::format("rank 0 gave no verdict for {}: {}", spec.name,
                              missing.begin()->second));
    }
    std::vector<char> v = world.store().get(base + "verdict");
    verdict.assign(v.begin(), v.end());
    if (verdict == kVerdictFailed) {
      Fatal(spec, "failed; rank 0 reports why");
    } else if (verdict == kVerdictSkipped) {
      GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, "skipped (see rank 0)",
                        ::testing::TestPartResult::kSkip);
    }
  }
  if (verdict == kVerdictFailed) world.DropCommunicators();
  return verdict == kVerdictPassed;
}

}  // namespace

bool ExternalLaunch() { return Detect().external; }

void RunExternal(DistributedTest& test) {
  TestSpec spec = SpecOf(test);
  ExternalWorld* world = nullptr;
  try {
    spec.options = EffectiveOptions(test);
    RecordProperties(spec);
    world = &ExternalWorld::Get();
    GoodbyeListener::MarkUsed();
  } catch (const std::exception& e) {
    Fatal(spec, Detect().error.empty()
                    ? fmt::format("disttest cannot join the launched ranks: {}",
                                  e.what())
                    : Detect().error);
    return;
  }
  ::testing::Test::RecordProperty("disttest_launcher", world->env().launcher);
  const int seq = world->NextSeq();
  if (std::string broken = world->broken(); !broken.empty()) {
    Fatal(spec, fmt::format("not run: the launched ranks stopped working "
                            "together in an earlier test ({})",
                            broken));
    return;
  }
  const int n = spec.world_size;
  if (n < 1 || n > kMaxWorldSize) {
    Fatal(spec, fmt::format("world size {} is invalid: it must be in [1, {}]",
                            n, kMaxWorldSize));
    return;
  }
  if (n > world->size()) {
    std::string why =
        fmt::format("needs {} ranks, launched with {}", n, world->size());
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                      ::testing::TestPartResult::kSkip);
    return;
  }
  if (std::string why = ParallelMisfit(spec); !why.empty()) {
    GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                      ::testing::TestPartResult::kSkip);
    return;
  }

  // Each step (each fixture, then the test) gets the whole timeout, as
  // in spawned mode.
  auto deadline = [&] { return Clock::now() + spec.options.timeout; };
  try {
    Meet(*world, seq, spec.name, deadline());
    // Fixtures: rank 0 makes their directories, and everyone uses those
    // (one machine, or a TMPDIR every node shares).
    auto& fixtures = FixtureAccess::fixtures(test);
    FixtureDirs dirs;
    const std::string dirs_key = fmt::format("external/{}/fixture-dirs", seq);
    if (!fixtures.empty()) {
      if (world->rank() == 0) {
        for (auto& f : fixtures)
          FixtureAccess::SetDir(*f, dirs.Create(f->name()));
        world->store().set(dirs_key, dirs.Joined());
      } else {
        world->Await({dirs_key}, deadline(), {0}, spec.name);
        std::vector<char> joined = world->store().get(dirs_key);
        AdoptFixtureDirs(test, std::string(joined.begin(), joined.end()));
      }
    }
    for (std::size_t i = 0; i < fixtures.size(); ++i) {
      TestSpec step = spec;
      step.world_size = fixtures[i]->world_size();
      step.fixture = fixtures[i]->name();
      if (step.world_size > world->size()) {
        std::string why = fmt::format(
            "fixture {} needs {} ranks, launched "
            "with {}",
            step.fixture, step.world_size, world->size());
        GTEST_MESSAGE_AT_(spec.file.c_str(), spec.line, why.c_str(),
                          ::testing::TestPartResult::kSkip);
        return;
      }
      if (!RunStep(*world, test, step, seq, static_cast<int>(i),
                   fixtures[i].get(), deadline())) {
        return;
      }
    }
    RunStep(*world, test, spec, seq, static_cast<int>(fixtures.size()), nullptr,
            deadline());
  } catch (const std::exception& e) {
    world->Break(e.what());
    world->DropCommunicators();
    Fatal(spec, e.what());
  }
}

}  // namespace disttest::internal
