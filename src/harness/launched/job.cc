// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "comm/ledger.h"
#include "disttest/env/names.h"
#include "disttest/env/rank_env.h"
#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "env/knobs.h"
#include "env/text.h"
#include "harness/launched/keys.h"
#include "harness/launched/token_file.h"
#include "harness/process/interrupt.h"
#include "harness/process/process_hygiene.h"
#include "harness/process/stack_dump.h"
#include "harness/report/trace.h"
#include "launch/launch_internal.h"

namespace disttest::internal::launched {
namespace {

using std::chrono::milliseconds;

// The store's timeout once every rank is connected: every request of the
// run's own is short (waits poll), so a store that is gone (rank 0 ended)
// is noticed within this, not after the test's whole timeout.
constexpr milliseconds kRequestTimeout{5000};
// How long a rank reads the token's file again once the store is up: a
// shared home's client may cache the directory's "no such file" that long.
constexpr milliseconds kTokenFileLag{5000};

}  // namespace

namespace {

// The job of this process (never destroyed: its side thread runs until the
// process ends), and the process it is of: a child the test forks and
// that calls exit() is not the rank.
LaunchedJob* the_job = nullptr;
pid_t the_jobs_process = 0;

void OnExit(const char* how) {
  if (the_job != nullptr && getpid() == the_jobs_process) {
    the_job->watchdog().ProcessEnds(how);
  }
}

}  // namespace

LaunchedJob& LaunchedJob::Join(const LauncherEnv& env) {
  static LaunchedJob* job = [&env] {
    the_job = new LaunchedJob(env);
    the_jobs_process = getpid();
    std::atexit([] { OnExit("exit()"); });
    at_quick_exit([] { OnExit("quick_exit()"); });
    return the_job;
  }();
  return *job;
}

// Rank 0 serves the store; throws StoreError naming the address.
std::unique_ptr<StoreServerThread> ServeStore(const LauncherEnv& env) {
  if (env.rank != 0) return nullptr;
  try {
    return std::make_unique<StoreServerThread>(env.master_addr, env.master_port,
                                               env.store_token);
  } catch (const std::exception& e) {
    throw StoreError(
        fmt::format("rank 0 cannot host the store on {}:{} (set "
                    "DISTTEST_MASTER_PORT to a free port): {}",
                    env.master_addr, env.master_port, e.what()));
  }
}

// Where the launcher gives no secret and the ranks span hosts (loopback is
// this host's, where the store serves only its own user): the file where
// rank 0 keeps a token of its making for the others (token_file.h); ""
// where none is needed.
std::string ShareToken(LauncherEnv& env) {
  if (!env.store_token.empty() || IsLoopback(env.master_addr)) return "";
  const std::string path = TokenFilePath(env);
  if (env.rank == 0) {
    env.store_token = GenerateStoreToken();
    WriteTokenFile(path, env.store_token);
  }
  return path;
}

// A connection to the store, made now (waiting for rank 0's store to come
// up), with short requests from then on. A rank other than 0 that reads the
// token from `token_file` reads it again while the store refuses it (the
// file of an earlier run, not yet replaced), until the connect deadline;
// where it cannot read the file, it first reaches the store without a token
// (a store that cannot be reached says so as it always did), and then,
// since rank 0 writes the file before it serves, fails at once.
std::unique_ptr<TcpStore> ConnectStore(LauncherEnv& env,
                                       const std::string& token_file) {
  const milliseconds timeout =
      SecondsVariable(env::kTimeout).value_or(std::chrono::seconds(300));
  const Clock::time_point deadline = Clock::now() + timeout;
  const bool reads_token = !token_file.empty() && env.rank != 0;
  bool first = true;
  const auto connect = [&](const std::string& token) {
    // The whole timeout for the first attempt, as its message says.
    const auto left = first ? timeout
                            : std::max(milliseconds(1),
                                       std::chrono::duration_cast<milliseconds>(
                                           deadline - Clock::now()));
    first = false;
    auto store = std::make_unique<TcpStore>(env.master_addr, env.master_port,
                                            left, token);
    store->check({kAbortKey});  // Connects.
    store->set_timeout(kRequestTimeout);
    return store;
  };
  if (!reads_token) return connect(env.store_token);
  bool probed = false;
  Clock::time_point reread_until{};
  for (;;) {
    std::string why;
    const std::string token = ReadTokenFile(token_file, &why);
    if (!token.empty()) {
      try {
        auto store = connect(token);
        env.store_token = token;
        return store;
      } catch (const StoreError& e) {
        why = e.what();  // Refused: an earlier run's token, not yet replaced?
      }
      if (Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(200));
        continue;
      }
    } else if (!probed) {
      probed = true;
      try {
        return connect("");  // Throws as ever if the store cannot be reached.
      } catch (const StoreError&) {
        // It is up, and takes only clients with its token: rank 0 wrote the
        // file before it began to serve. A shared home (NFS) may still say
        // "no such file" for a while (its cache of the directory): read
        // again for a few seconds, then say why not.
        reread_until = std::min(deadline, Clock::now() + kTokenFileLag);
      }
      continue;
    } else if (Clock::now() < reread_until) {
      // Listing the directory makes an NFS client look again.
      std::error_code ec;
      std::filesystem::directory_iterator(
          std::filesystem::path(token_file).parent_path(), ec);
      std::this_thread::sleep_for(milliseconds(200));
      continue;
    }
    throw ConfigError(fmt::format(
        "the store at {}:{} takes only clients with its token, and {} passes "
        "no secret: rank 0 keeps one in {}, which this rank could not use "
        "({}); share that directory between the nodes (or set {} to a file "
        "every rank can read), or set {} to one secret on every rank",
        env.master_addr, env.master_port, env.launcher, token_file, why,
        env::kTokenFile, env::kStoreToken));
  }
}

LaunchedJob::LaunchedJob(LauncherEnv env)
    : env_(std::move(env)),
      liveness_(env_.rank, env_.world_size, store_, side_),
      communicators_(env_),
      watchdog_(env_.rank, liveness_, communicators_, side_) {
  // Writing to a peer that died must fail the operation (Gloo writes
  // without MSG_NOSIGNAL), not kill this process with SIGPIPE; a launcher
  // that blocked SIGTERM would keep the report from being written.
  ClaimStandardDescriptors();
  const std::vector<std::string> notes = PrepareSignals();
  SetInterruptLauncher(env_.launcher);
  std::signal(SIGPIPE, SIG_IGN);
  // Without a stack tool, a hung body's stack comes from SIGUSR2 (unless
  // the program handles SIGUSR2 itself).
  InstallStackFallback();
  // This process's collective ledger: the watchdog reads it at a timeout.
  ledger_ =
      LedgerMemory::Create(1, TraceWanted() ? kTraceRing : LedgerMemory::kRing);
  Ledger::Install(ledger_, 0);
  token_file_ = ShareToken(env_);
  try {
    server_ = ServeStore(env_);
    store_ = ConnectStore(env_, token_file_);
    // With the token this rank now holds, whatever its source.
    side_.store = ConnectStore(env_, "");
    ClaimRank();
    store_->set(JoinedKey(rank()), Hostname());
  } catch (...) {
    // Rank 0's token file goes with the run that never was (trial 11: a
    // store that could not be hosted left it in /tmp).
    if (rank() == 0 && !token_file_.empty()) RemoveTokenFile(token_file_);
    throw;
  }
  if (rank() == 0) {
    std::printf(
        "[ disttest ] launched by %s with %d ranks: each runs the test "
        "bodies itself; this is rank 0, which serves the store on %s:%d "
        "and reports for all\n",
        env_.launcher.c_str(), size(), env_.master_addr.c_str(),
        env_.master_port);
    for (const std::string& note : notes) {
      std::printf("[ disttest ] %s\n", note.c_str());
    }
    if (!token_file_.empty()) {
      std::printf(
          "[ disttest ] %s passes no secret: the store takes only clients "
          "with the token rank 0 keeps in %s (readable by this user alone), "
          "which every rank reads; set %s to one secret on every rank "
          "instead where the nodes do not share that directory\n",
          env_.launcher.c_str(), token_file_.c_str(), env::kStoreToken);
    }
    std::fflush(stdout);
  }
  watchdog_.Start();
}

void LaunchedJob::ClaimRank() {
  if (store_->add(ClaimKey(rank()), 1) == 1) return;
  // A job that has ended, whose rank 0 still serves its store a moment (the
  // next program of a script under one launcher, on the same port): this
  // process alone fails; that run's results stand.
  if (store_->check({kEndKey})) {
    throw ConfigError(fmt::format(
        "rank {} of {} reached the store at {}:{} of a job that has ended "
        "(its rank 0 is leaving): start again, or give each program its "
        "own port",
        rank(), size(), env_.master_addr, env_.master_port));
  }
  // The one that came first has its host in the store, or soon will.
  std::string first;
  if (store_->check({JoinedKey(rank())})) {
    const std::vector<char> host = store_->get(JoinedKey(rank()));
    first = fmt::format(" (on {})", std::string(host.begin(), host.end()));
  }
  const std::string why = fmt::format(
      "two processes joined the job as rank {} of {}: the one that came "
      "second, process {} on {}, ends here; the other{} answers for rank {}, "
      "so this run's results are not those of the ranks {} meant: give each "
      "process its own RANK (or each job its own {}:{}: another job's rank "
      "{} may have joined this one)",
      rank(), size(), getpid(), Hostname(), first, rank(), env_.launcher,
      env_.master_addr, env_.master_port, rank());
  try {
    if (!store_->check({kDuplicateKey})) store_->set(kDuplicateKey, why);
  } catch (const std::exception&) {
  }
  liveness_.Break(why);
  throw ConfigError(why);
}

std::string LaunchedJob::Duplicate() {
  try {
    if (!store_->check({kDuplicateKey})) return "";
    const std::vector<char> v = store_->get(kDuplicateKey);
    return std::string(v.begin(), v.end());
  } catch (const std::exception&) {
    return "";
  }
}

void LaunchedJob::AllJoined() {
  if (rank() == 0 && !token_file_.empty()) RemoveTokenFile(token_file_);
}

void LaunchedJob::Goodbye() {
  try {
    store_->set(ByeKey(rank()), "1");
  } catch (const std::exception&) {
    return;  // The store is gone: rank 0 has ended.
  }
  if (rank() != 0) return WaitForTheEnd(*store_);
  std::vector<std::string> keys;
  std::vector<int> from;
  std::vector<int> missing, never;
  for (int r = 0; r < size(); ++r) {
    try {
      // A test's start waited for every rank: one that never reached the
      // store by then never will (that test failed naming it). Before any
      // start (every test skipped), a slow rank is still waited for.
      if (start_waited_ && !store_->check({JoinedKey(r)})) {
        never.push_back(r);
        continue;
      }
    } catch (const std::exception&) {
    }
    keys.push_back(ByeKey(r));
    from.push_back(r);
    try {
      if (!store_->check({keys.back()})) missing.push_back(r);
    } catch (const std::exception&) {
      missing.push_back(r);
    }
  }
  if (!never.empty()) {
    std::fprintf(stderr,
                 "[ disttest ] rank 0: %s never reached the store at %s:%d; "
                 "not waiting for %s\n",
                 RanksText(never).c_str(), env_.master_addr.c_str(),
                 env_.master_port, never.size() == 1 ? "it" : "them");
  }
  if (!missing.empty()) {
    // Not silent: a launcher such as mpirun ends every rank once one
    // exits, so rank 0 stays until the others have their verdicts.
    const long long ms =
        PendingInterrupt() != 0
            ? std::min(WaitAfterInterrupt(), ScaledUp(kGoodbyeWait)).count()
            : ScaledUp(kGoodbyeWait).count();
    const std::string wait = ms % 1000 == 0 ? fmt::format("{} s", ms / 1000)
                                            : fmt::format("{} ms", ms);
    std::fprintf(stderr,
                 "[ disttest ] rank 0: the run is over here; waiting up "
                 "to %s for %s to finish before leaving\n",
                 wait.c_str(), RanksText(missing).c_str());
    std::fflush(stderr);
  }
  try {
    liveness_.AwaitResults(keys, from, Clock::now() + ScaledUp(kGoodbyeWait),
                           /*cut_on_interrupt=*/true);
    store_->set(kEndKey, "1");
    if (!token_file_.empty()) RemoveTokenFile(token_file_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[ disttest ] rank 0 at the end: %s\n", e.what());
  }
}

}  // namespace disttest::internal::launched
