// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator's state (disttest/comm/gloo_communicator.h): the rank,
// the timeout, Gloo's device and context, the host arena, and the ticker
// that wakes Gloo's event loop. gloo_communicator.cc (creation, split),
// gloo_collectives.cc and gloo_point_to_point.cc define the operations.
#ifndef DISTTEST_SRC_COMM_GLOO_COMMUNICATOR_IMPL_H_
#define DISTTEST_SRC_COMM_GLOO_COMMUNICATOR_IMPL_H_

#include <fmt/format.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "base/threads.h"
#include "comm/host_arena.h"
#include "comm/self_messages.h"
#include "disttest/comm/collective_call.h"
#include "disttest/comm/gloo_communicator.h"
#include "disttest/error.h"

namespace disttest {

// What Create() says when the mesh does not connect; Guard() adds the
// address-space hint to it.
constexpr const char* kConnectMesh = "cannot connect the gloo mesh";

// Wakes Gloo's event loop every 200 us while it is armed.
//
// Gloo's loop thread sleeps in epoll_wait with a 10 ms timeout, and removing a
// socket from the loop (which every connect and every pair destructor does)
// waits for the loop's next pass: each connect or teardown costs up to 10 ms,
// one after another. A timerfd registered in the loop makes the next pass
// come at once. Armed only while the mesh is built and torn down, so an idle
// rank does not spin.
class LoopTicker : public gloo::transport::tcp::Handler {
 public:
  LoopTicker()
      : fd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {}
  ~LoopTicker() override {
    if (fd_ >= 0) close(fd_);
  }
  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

  // Registers with the device's loop; without a timerfd, Gloo just runs at
  // its own pace.
  void Attach(gloo::transport::Device& device) {
    if (fd_ < 0) return;
    static_cast<gloo::transport::tcp::Device&>(device).registerDescriptor(
        fd_, EPOLLIN, this);
  }
  void Arm(bool on) { Set(on ? 200'000 : 0, on); }

  // Pause(): the loop thread's next pass blocks here until Resume(), instead
  // of waking every 10 ms while nothing is expected. Only while the
  // communicator is idle: Gloo cannot make progress, and a thread that waits
  // for a loop pass (connecting, destroying a pair) would wait for Resume().
  void Pause() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      paused_ = true;
    }
    Set(1, /*periodic=*/false);  // A pass now.
  }
  void Resume() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!paused_) return;
      paused_ = false;
    }
    resumed_.notify_all();
  }
  bool paused() {
    std::lock_guard<std::mutex> lock(mutex_);
    return paused_;
  }

  void handleEvents(int) override {
    uint64_t expirations;
    (void)!read(fd_, &expirations, sizeof expirations);
    std::unique_lock<std::mutex> lock(mutex_);
    resumed_.wait(lock, [this] { return !paused_; });
  }

 private:
  // Fires after `ns`, and every `ns` if periodic; 0 disarms.
  void Set(long ns, bool periodic) {
    if (fd_ < 0) return;
    itimerspec t{};
    t.it_value.tv_nsec = ns;
    if (periodic) t.it_interval.tv_nsec = ns;
    timerfd_settime(fd_, 0, &t, nullptr);
  }

  int fd_;
  std::mutex mutex_;
  std::condition_variable resumed_;
  bool paused_ = false;
};

struct GlooCommunicator::Impl {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{};
  // What split() makes its communicators with: the store (the caller's, which
  // outlives them) and these options.
  Store* store = nullptr;
  GlooOptions options;
  int splits = 0;       // split() calls so far: each one's keys are its own.
  bool failed = false;  // An operation threw.
  // Declared before the device: the loop may call it until the device is
  // gone.
  LoopTicker ticker;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  // The ranks' shared memory, when they share one (GlooOptions::arena).
  std::shared_ptr<HostArena> arena;

  // Whether every operation goes through the arena: then Gloo has no device
  // and no connection at all.
  bool InArena() const { return arena != nullptr && arena->carries_data(); }

  // Before a collective whose data goes through Gloo: every rank on this
  // host must have made the same call (the arena compares them).
  void CheckCall(const CollectiveCall& call) {
    if (arena != nullptr) arena->Check(rank, call, timeout);
  }

  ~Impl() {
    // Pairs and the loop wait for loop passes as they go: keep them coming.
    ticker.Resume();
    ticker.Arm(true);
    context.reset();
    device.reset();
  }

  // Runs `op`, turning any exception into a CommError that names the rank and
  // the operation: "[rank 1/2] <what> failed: <cause>", or with `failed`
  // false (`what` says it already), "[rank 1/2] <what>: <cause>".
  template <typename Op>
  void Guard(const std::string& what, Op&& op, bool failed_suffix = true) {
    ticker.Resume();
    try {
      op();
    } catch (const std::exception& e) {
      failed = true;
      // Only connecting starts threads and maps buffers up front; a later
      // EAGAIN is a socket's.
      const bool connecting = what == kConnectMesh;
      throw CommError(
          fmt::format("[rank {}/{}] {}{}: {}{}", rank, size, what,
                      failed_suffix ? " failed" : "", e.what(),
                      connecting ? internal::AddressSpaceHint(e.what()) : ""));
    }
  }

  std::string Describe(const char* op, std::size_t count, DataType type) const {
    return fmt::format("{} of {} {}", op, count, Name(type));
  }

  void RunAllReduce(const CollectiveCall& call, void* data, std::size_t count,
                    DataType type, ReduceOp op);
  void RunBroadcast(const CollectiveCall& call, void* data, std::size_t count,
                    DataType type, int root);
  void RunAllGather(const CollectiveCall& call, const void* in, void* out,
                    std::size_t count, DataType type);
  // Throws CommError for a root out of range, after failing the peers'
  // comparison with this rank's call.
  void CheckRoot(const char* op, const std::string& what,
                 const CollectiveCall& call, int root);

  void CheckPeer(const char* op, int peer) const {
    if (peer == rank) {
      throw CommError(fmt::format("[rank {}/{}] {}: {}", rank, size, op,
                                  internal::kBlockingToItself));
    }
    if (peer < 0 || peer >= size) {
      throw CommError(fmt::format(
          "[rank {}/{}] {}: invalid peer rank {} (the ranks are 0 to {})", rank,
          size, op, peer, size - 1));
    }
  }
};

}  // namespace disttest

#endif  // DISTTEST_SRC_COMM_GLOO_COMMUNICATOR_IMPL_H_
