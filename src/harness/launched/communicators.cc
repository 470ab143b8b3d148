// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/launched/communicators.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>

#include "base/sockets.h"
#include "comm/communicator_sockets.h"
#include "disttest/comm/create.h"
#include "disttest/error.h"
#include "disttest/rendezvous/tcp_store.h"
#include "harness/launched/keys.h"
#include "launch/launch_internal.h"

namespace disttest::internal::launched {

Communicators::Communicators(const LauncherEnv& env) : env_(env) {
  WatchCommunicatorSockets();
}

Communicator* Communicators::For(int n, const Options& options,
                                 std::chrono::milliseconds timeout) {
  // One per size, backend and timeout (a test may ask for others).
  const std::string key =
      fmt::format("{}/{}/{}", n, Name(options.backend), timeout.count());
  Made& made = comms_[key];
  std::unique_ptr<Communicator>& comm = made.comm;
  if (comm) {
    // A test starts with the timeout it asked for, not the one an earlier
    // test set (set_timeout()), as a pooled rank's does.
    comm->restore_timeout();
    return comm.get();
  }
  GlooOptions gloo;
  gloo.hostname = BindHostFor(env_.master_addr);
  gloo.name = "world";
  gloo.timeout = timeout;
  gloo.prefix = CommunicatorPrefix(generation_, key);
  // Connecting waits in the store for the peers' addresses, over a
  // connection of its own, which trouble elsewhere (a peer that died
  // before it published its address) can cut short.
  // It stays the communicator's (split() meets its peers there), and
  // ShutDown() cuts it with the communicator's own sockets.
  made.store = std::make_unique<TcpStore>(env_.master_addr, env_.master_port,
                                          options.timeout, env_.store_token);
  TcpStore& connect_store = *made.store;
  std::map<ino_t, int> before = TcpSockets();
  connect_store.check({kAbortKey});  // Connects.
  {
    std::lock_guard<std::mutex> lock(sockets_mu_);
    for (const auto& [inode, fd] : NewSince(before)) {
      if (PortOf(fd, /*peer=*/true) == env_.master_port) {
        sockets_.insert(inode);
      }
    }
  }
  before = TcpSockets();
  // Said before NCCL is asked (trial 11: "cudaSetDevice(0) failed: CUDA
  // driver version is insufficient" on a node without a GPU). A failure,
  // not a skip: every rank would have to skip alike, and nodes differ.
  if (options.backend == Backend::kNccl && CudaDeviceCount() < 1) {
    throw CommError(fmt::format(
        "[rank {}/{}] backend nccl needs a GPU a rank, and this process sees "
        "none on {}: run the launched NCCL tests where every rank has a GPU",
        env_.rank, n, Hostname()));
  }
  const int device =
      LaunchedDevice(options.backend, env_.local_rank, env_.rank);
  comm = CreateCommunicator(options.backend, connect_store, env_.rank, n, gloo,
                            std::max(device, 0));
  // The new sockets, less the store's (rank 0 accepts connections
  // meanwhile, and a client may reconnect): Gloo's own.
  std::lock_guard<std::mutex> lock(sockets_mu_);
  for (const auto& [inode, fd] : NewSince(before)) {
    if (PortOf(fd, false) != env_.master_port &&
        PortOf(fd, true) != env_.master_port) {
      sockets_.insert(inode);
    }
  }
  return comm.get();
}

void Communicators::Drop() {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  comms_.clear();  // Under the lock: no shutdown() of a reused descriptor.
  ++generation_;
  sockets_.clear();
}

void Communicators::ShutDown(const std::string& why) {
  CutCommunicators(why);
  const std::set<ino_t> bodies = CommunicatorSockets();
  std::lock_guard<std::mutex> lock(sockets_mu_);
  for (const auto& [inode, fd] : TcpSockets()) {
    // A body's communicator connected over the store's connection too
    // (when the store reconnected meanwhile): never the store's.
    const bool body_made = bodies.count(inode) != 0 &&
                           PortOf(fd, false) != env_.master_port &&
                           PortOf(fd, true) != env_.master_port;
    if (sockets_.count(inode) != 0 || body_made) shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace disttest::internal::launched
