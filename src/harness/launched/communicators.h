// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The communicators of a launched process: one per world size, backend and
// timeout, created at the first test that asks and kept until a test fails
// (it may hold messages a rank never received), and the inodes of their
// sockets, so that the side thread can cut a body blocked in a collective
// with a rank that is gone (ShutDown) without touching any other socket.
//
//   Communicator* comm = job.communicators().For(4, options, timeout);
//   job.communicators().Drop();      // after a failed test
//   job.communicators().ShutDown(why);  // the side thread, on trouble
#ifndef DISTTEST_SRC_HARNESS_LAUNCHED_COMMUNICATORS_H_
#define DISTTEST_SRC_HARNESS_LAUNCHED_COMMUNICATORS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "disttest/comm/communicator.h"
#include "disttest/harness/options.h"
#include "disttest/launch/launcher_env.h"
#include "disttest/rendezvous/tcp_store.h"

namespace disttest::internal::launched {

class Communicators {
 public:
  // Communicators the bodies make note their sockets from here on.
  explicit Communicators(const LauncherEnv& env);

  // This process's communicator for the first `n` ranks (every rank below
  // `n` calls it at the same test), whose operations give up after
  // `timeout`. Throws when it cannot connect.
  Communicator* For(int n, const Options& options,
                    std::chrono::milliseconds timeout);
  // Every communicator goes; the next test gets fresh ones.
  void Drop();
  // Ends every connection of the communicators, these and those the
  // bodies made (CreateCommunicator: comm/communicator_sockets.h), so that
  // a body blocked in a collective with a rank that is gone, or in one that
  // cannot complete, fails now (Gloo sees the closed connection) rather
  // than at the test's timeout. No other connection of the process (the
  // store's, a launcher's, MPI's) is touched. shutdown(), not close(): the
  // descriptors stay their owners'. A communicator without sockets (MPI's)
  // ends its waits, saying `why`. From any thread.
  void ShutDown(const std::string& why);

 private:
  const LauncherEnv& env_;
  // A communicator and the store connection it was made on, which lives as
  // long (split() meets its peers there).
  struct Made {
    std::unique_ptr<TcpStore> store;
    std::unique_ptr<Communicator> comm;
  };
  std::map<std::string, Made> comms_;
  int generation_ = 0;  // Drop()s so far: part of each rendezvous prefix.
  std::mutex sockets_mu_;
  std::set<ino_t> sockets_;  // Inodes of the communicators' sockets.
};

}  // namespace disttest::internal::launched

#endif  // DISTTEST_SRC_HARNESS_LAUNCHED_COMMUNICATORS_H_
