// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/gloo_communicator.h"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/sockets.h"
#include "base/threads.h"
#include "comm/communicator_sockets.h"
#include "comm/gloo_store.h"
#include "comm/host_arena.h"
#include "comm/visit_type.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/knobs.h"

namespace disttest {
namespace {

constexpr const char* kConnectMesh = "cannot connect the gloo mesh";

// Allreduces of up to this many bytes use Gloo's bcube algorithm (recursive
// halving and doubling: 2 log2(W) steps) instead of its ring (2 (W - 1)
// steps). On loopback a step is mostly latency, so small buffers gain; the
// ring's pipelined segments win from about 1 MiB at 4 ranks
// (bench/per_test_cost, 4 and 8 ranks: 8 floats 1.0 -> 0.5 and 1.9 -> 1.1 ms,
// 256 KiB 1.4 -> 1.1 and 4.5 -> 2.7 ms, 1 MiB 2.6 -> 3.3 and 6.4 -> 5.8 ms).
constexpr std::size_t kBcubeMaxBytes = 256 * 1024;

// Gloo's built-in collectives use slot prefixes 0x01..0x08; point-to-point
// messages get their own so that a user tag never matches a collective.
constexpr uint8_t kPointToPointSlotPrefix = 0x40;

// The slot of a message through Gloo: its tag (bits 0-31), and 24 bits of a
// hash of what it carries, its element type and count (bits 32-55), under
// the prefix. A receive that expects another type or count never pairs with
// it: Gloo would deliver 8 floats into a receive of 16 (the last 8 never
// written) or floats into ints, and both ranks would pass. Such a pair now
// waits, each side's timeout naming what it waited for. (The host arena
// compares the calls themselves and fails both at once.)
std::uint64_t PointToPointSlot(std::uint32_t tag, std::size_t count,
                               DataType type) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint64_t v :
       {static_cast<std::uint64_t>(count), static_cast<std::uint64_t>(type)}) {
    for (int byte = 0; byte < 8; ++byte) {
      h = (h ^ ((v >> (8 * byte)) & 0xff)) * 0x100000001b3ULL;
    }
  }
  const std::uint64_t shape = (h ^ (h >> 24) ^ (h >> 48)) & 0xffffffULL;
  return (std::uint64_t{kPointToPointSlotPrefix} << 56) | (shape << 32) | tag;
}

// What a message through Gloo that never paired says after Gloo's timeout:
// what its peer must have called for it to pair.
std::string Unpaired(bool send, int rank, std::size_t count, DataType type,
                     int peer, std::uint32_t tag) {
  return fmt::format(
      " (a message pairs only with a receive of the same tag, element type "
      "and count: did rank {} {} {} x {} {} rank {} with tag {}?)",
      peer, send ? "receive" : "send", count, Name(type), send ? "from" : "to",
      rank, tag);
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn ReduceFunction(ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    // On the bytes (0 or 1): "or" is max, "and" min.
    return ReduceFunction<std::uint8_t>(internal::LogicalOp(op));
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:  // The division comes after (DivideBy).
        return static_cast<ReduceFn>(&gloo::sum<T>);
      case ReduceOp::kProd:
        return static_cast<ReduceFn>(&gloo::product<T>);
      case ReduceOp::kMin:
        return static_cast<ReduceFn>(&gloo::min<T>);
      case ReduceOp::kMax:
        return static_cast<ReduceFn>(&gloo::max<T>);
    }
    return nullptr;
  }
}

}  // namespace

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

// While alive, threads started by the calling thread are SCHED_BATCH: they
// get their fair share of the CPU, but waking up does not preempt a running
// thread.
//
// Gloo's loop thread handles a socket's events only if it can take the
// pair's lock, and otherwise returns to epoll_wait, which (level-triggered)
// returns at once. Woken by an incoming message, it would preempt the rank's
// own main thread while that holds the lock in send() or recv(), then spin
// until the scheduler tick takes the CPU back (4 ms here). As SCHED_BATCH it
// waits instead until the main thread blocks. SCHED_IDLE would do the same, but
// starves the loop under CPU load; SCHED_BATCH does not. The calling thread's
// own policy is restored at once; one that is not SCHED_OTHER is left alone.
class BatchPolicyForNewThreads {
 public:
  BatchPolicyForNewThreads() {
    if (sched_getscheduler(0) != SCHED_OTHER) return;
    sched_param none{};
    batch_ = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
  }
  ~BatchPolicyForNewThreads() {
    if (!batch_) return;
    sched_param none{};
    sched_setscheduler(0, SCHED_OTHER, &none);
  }
  BatchPolicyForNewThreads(const BatchPolicyForNewThreads&) = delete;
  BatchPolicyForNewThreads& operator=(const BatchPolicyForNewThreads&) = delete;

 private:
  bool batch_ = false;
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
      throw CommError(fmt::format(
          "[rank {}/{}] {}: the peer is this rank itself; a rank's send "
          "completes only when its receive has taken the message, which the "
          "same rank could not post while it waits, so disttest refuses it "
          "(copy the data instead)",
          rank, size, op));
    }
    if (peer < 0 || peer >= size) {
      throw CommError(fmt::format(
          "[rank {}/{}] {}: invalid peer rank {} (the ranks are 0 to {})", rank,
          size, op, peer, size - 1));
    }
  }
};

std::unique_ptr<GlooCommunicator> GlooCommunicator::Create(
    Store& store, int rank, int size, const GlooOptions& given) {
  // A timeout beyond the longest deadline (milliseconds::max() for none)
  // is that deadline: now + it must not overflow in the arena, the store or
  // Gloo.
  GlooOptions options = given;
  options.timeout = std::min(options.timeout, kLongestTimeout);
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->size = size;
  impl->timeout = options.timeout;
  impl->store = &store;
  impl->options = options;
  if (options.arena != nullptr && options.arena->world() != size) {
    throw CommError(
        fmt::format("[rank {}/{}] the host arena is for {} ranks, not {}", rank,
                    size, options.arena->world(), size));
  }
  impl->arena = options.arena;
  // Every operation goes through the arena: nothing to connect, and no
  // event-loop thread in the rank.
  if (impl->InArena()) {
    std::unique_ptr<GlooCommunicator> comm(
        new GlooCommunicator(std::move(impl)));
    comm->SetName(options.name, options.prefix, store.scope());
    comm->InitTimeout(options.timeout);
    return comm;
  }
  impl->Guard(
      kConnectMesh,
      [&] {
        gloo::transport::tcp::attr attr;
        attr.hostname = options.hostname;
        {
          // The device starts the loop thread.
          BatchPolicyForNewThreads batch;
          impl->device = gloo::transport::tcp::CreateDevice(attr);
        }
        impl->ticker.Attach(*impl->device);
        PrefixStore prefixed(options.prefix, store);
        prefixed.set_timeout(options.timeout);
        internal::GlooStore adapter(prefixed);
        impl->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        impl->context->setTimeout(options.timeout);
        impl->ticker.Arm(true);
        const std::map<ino_t, int> before =
            internal::WatchingCommunicatorSockets() ? internal::TcpSockets()
                                                    : std::map<ino_t, int>{};
        try {
          impl->context->connectFullMesh(adapter, impl->device);
        } catch (const std::exception& e) {
          // Gloo's words for a peer whose address list is for another
          // number of ranks: "sizeof(impl_) == bytes.size(). 136 vs 272".
          if (std::string_view(e.what()).find("bytes.size()") ==
              std::string_view::npos) {
            throw;
          }
          throw CommError(fmt::format(
              "the ranks passed different world sizes (this rank passed {}): "
              "every rank of a communicator must pass the same size ({})",
              size, e.what()));
        }
        if (internal::WatchingCommunicatorSockets()) {
          internal::NoteCommunicatorSockets(before);
        }
        impl->ticker.Arm(false);
      },
      /*failed_suffix=*/false);
  std::unique_ptr<GlooCommunicator> comm(new GlooCommunicator(std::move(impl)));
  comm->SetName(options.name, options.prefix, store.scope());
  comm->InitTimeout(options.timeout);
  return comm;
}

GlooCommunicator::GlooCommunicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

void GlooCommunicator::PauseEventLoop() { impl_->ticker.Pause(); }
void GlooCommunicator::ResumeEventLoop() { impl_->ticker.Resume(); }
bool GlooCommunicator::uses_host_arena() const { return impl_->InArena(); }
bool GlooCommunicator::event_loop_paused() const {
  return impl_->ticker.paused();
}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return impl_->rank; }
bool GlooCommunicator::failed() const { return impl_->failed; }
int GlooCommunicator::size() const { return impl_->size; }

void GlooCommunicator::DoBarrier() {
  impl_->Guard("barrier", [&] {
    if (impl_->arena != nullptr) {
      impl_->arena->Barrier(impl_->rank, impl_->timeout);
      if (impl_->InArena()) return;
    }
    gloo::BarrierOptions opts(impl_->context);
    opts.setTimeout(impl_->timeout);
    gloo::barrier(opts);
  });
}

// The three collectives the others are made of. Each meets the other ranks
// as `call` (the arena compares it), then moves the data through the arena
// or Gloo. Run inside Guard().
void GlooCommunicator::Impl::RunAllReduce(const CollectiveCall& call,
                                          void* data, std::size_t count,
                                          DataType type, ReduceOp op) {
  // An average is a sum, divided after; the ranks compare it as an average.
  const ReduceOp reduce = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  if (InArena()) {
    arena->AllReduce(rank, data, count, type, reduce, timeout, &call);
  } else {
    CheckCall(call);
    if (count == 0) return;
    internal::VisitType(type, [&]<typename T>(T*) {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(static_cast<T*>(data), count);
      opts.setReduceFunction(ReduceFunction<T>(reduce));
      opts.setTimeout(timeout);
      if (count * sizeof(T) <= kBcubeMaxBytes) {
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      }
      gloo::allreduce(opts);
    });
  }
  if (op == ReduceOp::kAvg) internal::DivideBy(data, count, type, size);
}

void GlooCommunicator::Impl::RunBroadcast(const CollectiveCall& call,
                                          void* data, std::size_t count,
                                          DataType type, int root) {
  if (InArena()) {
    arena->Broadcast(rank, data, count, type, root, timeout, &call);
    return;
  }
  CheckCall(call);
  if (count == 0) return;
  gloo::BroadcastOptions opts(context);
  opts.setOutput(static_cast<uint8_t*>(data), count * SizeOf(type));
  opts.setRoot(root);
  opts.setTimeout(timeout);
  gloo::broadcast(opts);
}

void GlooCommunicator::Impl::RunAllGather(const CollectiveCall& call,
                                          const void* in, void* out,
                                          std::size_t count, DataType type) {
  if (InArena()) {
    arena->AllGather(rank, in, out, count, type, timeout, &call);
    return;
  }
  CheckCall(call);
  if (count == 0) return;
  const std::size_t bytes = count * SizeOf(type);
  gloo::AllgatherOptions opts(context);
  // Gloo takes a non-const input pointer but only reads it.
  opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes);
  opts.setOutput(static_cast<uint8_t*>(out), bytes * size);
  opts.setTimeout(timeout);
  gloo::allgather(opts);
}

void GlooCommunicator::Impl::CheckRoot(const char* op, const std::string& what,
                                       const CollectiveCall& call, int root) {
  if (root >= 0 && root < size) return;
  // Peers that passed a valid root would otherwise wait for this rank: the
  // comparison fails them too, naming every rank's root. This rank's own
  // error says what is wrong with its call.
  try {
    Guard(what, [&] { CheckCall(call); });
  } catch (const CommError&) {
  }
  throw CommError(fmt::format("[rank {}/{}] {}: invalid root rank {}", rank,
                              size, op, root));
}

void GlooCommunicator::DoAllReduce(void* data, std::size_t count, DataType type,
                                   ReduceOp op) {
  // Empty collectives are checked too: an empty one against a full one is
  // a mismatch, not a hang.
  if (count == 0 && impl_->arena == nullptr) return;
  std::string what = fmt::format(
      "{} ({})", impl_->Describe("allreduce", count, type), Name(op));
  impl_->Guard(what, [&] {
    impl_->RunAllReduce(CollectiveCall::AllReduce(count, type, op), data, count,
                        type, op);
  });
}

void GlooCommunicator::DoBroadcast(void* data, std::size_t count, DataType type,
                                   int root) {
  const CollectiveCall call = CollectiveCall::Broadcast(count, type, root);
  const std::string what = impl_->Describe("broadcast", count, type);
  impl_->CheckRoot("broadcast", what, call, root);
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(what,
               [&] { impl_->RunBroadcast(call, data, count, type, root); });
}

void GlooCommunicator::DoAllGather(const void* in, void* out, std::size_t count,
                                   DataType type) {
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(impl_->Describe("allgather", count, type), [&] {
    impl_->RunAllGather(CollectiveCall::AllGather(count, type), in, out, count,
                        type);
  });
}

namespace {
// A byte buffer: scratch space for the collectives made of others.
using Bytes = std::vector<unsigned char>;
const unsigned char* AsBytes(const void* p) {
  return static_cast<const unsigned char*>(p);
}
}  // namespace

void GlooCommunicator::DoReduce(const void* in, void* out, std::size_t count,
                                DataType type, ReduceOp op, int root) {
  const CollectiveCall call = CollectiveCall::Reduce(count, type, op, root);
  const std::string what =
      fmt::format("{} ({}, root {})", impl_->Describe("reduce", count, type),
                  Name(op), root);
  impl_->CheckRoot("reduce", what, call, root);
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(what, [&] {
    const std::size_t bytes = count * SizeOf(type);
    // The root reduces into out; the others into a copy of in.
    Bytes copy;
    void* data = out;
    if (impl_->rank != root) {
      copy.assign(AsBytes(in), AsBytes(in) + bytes);
      data = copy.data();
    } else if (bytes > 0 && in != out) {
      std::memmove(out, in, bytes);
    }
    impl_->RunAllReduce(call, data, count, type, op);
  });
}

void GlooCommunicator::DoReduceScatter(const void* in, void* out,
                                       std::size_t count, DataType type,
                                       ReduceOp op) {
  if (count == 0 && impl_->arena == nullptr) return;
  const std::string what = fmt::format(
      "{} ({})", impl_->Describe("reduce_scatter", count, type), Name(op));
  impl_->Guard(what, [&] {
    const std::size_t bytes = count * SizeOf(type);
    const std::size_t world = static_cast<std::size_t>(impl_->size);
    Bytes all(AsBytes(in), AsBytes(in) + world * bytes);
    impl_->RunAllReduce(CollectiveCall::ReduceScatter(count, type, op),
                        all.data(), count * world, type, op);
    if (bytes > 0) {
      std::memcpy(out,
                  all.data() + static_cast<std::size_t>(impl_->rank) * bytes,
                  bytes);
    }
  });
}

void GlooCommunicator::DoGather(const void* in, void* out, std::size_t count,
                                DataType type, int root) {
  const CollectiveCall call = CollectiveCall::Gather(count, type, root);
  const std::string what =
      fmt::format("{} (root {})", impl_->Describe("gather", count, type), root);
  impl_->CheckRoot("gather", what, call, root);
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(what, [&] {
    const std::size_t bytes = count * SizeOf(type);
    const std::size_t world = static_cast<std::size_t>(impl_->size);
    // Gathered into out on the root, elsewhere into scratch; from a copy of
    // in where the two are one buffer.
    Bytes all, mine;
    void* into = out;
    if (impl_->rank != root) {
      all.resize(world * bytes);
      into = all.data();
    }
    const void* from = in;
    if (impl_->rank == root && bytes > 0) {
      mine.assign(AsBytes(in), AsBytes(in) + bytes);
      from = mine.data();
    }
    impl_->RunAllGather(call, from, into, count, type);
  });
}

void GlooCommunicator::DoScatter(const void* in, void* out, std::size_t count,
                                 DataType type, int root) {
  const CollectiveCall call = CollectiveCall::Scatter(count, type, root);
  const std::string what = fmt::format(
      "{} (root {})", impl_->Describe("scatter", count, type), root);
  impl_->CheckRoot("scatter", what, call, root);
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(what, [&] {
    const std::size_t bytes = count * SizeOf(type);
    const std::size_t world = static_cast<std::size_t>(impl_->size);
    Bytes all(world * bytes);
    if (impl_->rank == root && bytes > 0) {
      std::memcpy(all.data(), in, world * bytes);
    }
    impl_->RunBroadcast(call, all.data(), count * world, type, root);
    if (bytes > 0) {
      std::memcpy(out,
                  all.data() + static_cast<std::size_t>(impl_->rank) * bytes,
                  bytes);
    }
  });
}

void GlooCommunicator::DoAllToAll(const void* in, void* out, std::size_t count,
                                  DataType type) {
  if (count == 0 && impl_->arena == nullptr) return;
  impl_->Guard(impl_->Describe("alltoall", count, type), [&] {
    const std::size_t bytes = count * SizeOf(type);
    const std::size_t world = static_cast<std::size_t>(impl_->size);
    const std::size_t me = static_cast<std::size_t>(impl_->rank);
    // Every rank's whole input, then this rank's part of each.
    Bytes all(world * world * bytes);
    impl_->RunAllGather(CollectiveCall::AllToAll(count, type), in, all.data(),
                        count * world, type);
    for (std::size_t q = 0; q < world && bytes > 0; ++q) {
      std::memcpy(static_cast<unsigned char*>(out) + q * bytes,
                  all.data() + (q * world + me) * bytes, bytes);
    }
  });
}

void GlooCommunicator::DoAllGatherV(const void* in, void* out,
                                    std::span<const std::size_t> counts,
                                    DataType type) {
  std::size_t total = 0, most = 0;
  for (std::size_t c : counts) {
    total += c;
    most = std::max(most, c);
  }
  const CollectiveCall call =
      CollectiveCall::AllGatherV(type, counts.data(), counts.size());
  const std::string what = impl_->Describe("allgatherv", total, type);
  if (counts.size() != static_cast<std::size_t>(impl_->size)) {
    // The peers' counts differ from these (they have size() of them): the
    // comparison fails them too.
    try {
      impl_->Guard(what, [&] { impl_->CheckCall(call); });
    } catch (const CommError&) {
    }
    throw CommError(fmt::format(
        "[rank {}/{}] allgatherv: {} counts given, one per rank is {}",
        impl_->rank, impl_->size, counts.size(), impl_->size));
  }
  if (total == 0 && impl_->arena == nullptr) return;
  impl_->Guard(what, [&] {
    const std::size_t size = SizeOf(type);
    const std::size_t world = counts.size();
    // Every rank's part padded to the longest, gathered, then packed.
    Bytes mine(most * size);
    const std::size_t own = counts[static_cast<std::size_t>(impl_->rank)];
    if (own > 0) std::memcpy(mine.data(), in, own * size);
    Bytes all(world * most * size);
    impl_->RunAllGather(call, mine.data(), all.data(), most, type);
    auto* packed = static_cast<unsigned char*>(out);
    for (std::size_t q = 0; q < world; ++q) {
      if (counts[q] == 0) continue;
      std::memcpy(packed, all.data() + q * most * size, counts[q] * size);
      packed += counts[q] * size;
    }
  });
}

void GlooCommunicator::DoAllToAllV(const void* in,
                                   std::span<const std::size_t> in_counts,
                                   void* out,
                                   std::span<const std::size_t> out_counts,
                                   DataType type) {
  const std::size_t world = static_cast<std::size_t>(impl_->size);
  const std::size_t me = static_cast<std::size_t>(impl_->rank);
  const CollectiveCall call = CollectiveCall::AllToAllV(type);
  std::uint64_t sent = 0;
  for (std::size_t c : in_counts) sent += c;
  const std::string what =
      fmt::format("alltoallv of {} {} sent", sent, Name(type));
  if (in_counts.size() != world || out_counts.size() != world) {
    // The peers wait in the counts' allgather: fail them there too.
    try {
      impl_->Guard(what, [&] { impl_->CheckCall(call); });
    } catch (const CommError&) {
    }
    throw CommError(fmt::format(
        "[rank {}/{}] alltoallv: {} in_counts and {} out_counts given, one "
        "per rank is {}",
        impl_->rank, impl_->size, in_counts.size(), out_counts.size(), world));
  }
  impl_->Guard(what, [&] {
    // Every rank's counts, both ways, so that every rank checks every pair
    // and all fail alike.
    std::vector<std::uint64_t> mine(2 * world);
    for (std::size_t q = 0; q < world; ++q) {
      mine[q] = in_counts[q];
      mine[world + q] = out_counts[q];
    }
    std::vector<std::uint64_t> all(2 * world * world);
    impl_->RunAllGather(call, mine.data(), all.data(), 2 * world,
                        DataType::kUint64);
    const auto sends = [&](std::size_t from, std::size_t to) {
      return all[from * 2 * world + to];
    };
    const auto expects = [&](std::size_t at, std::size_t from) {
      return all[at * 2 * world + world + from];
    };
    std::uint64_t most = 0;
    for (std::size_t a = 0; a < world; ++a) {
      std::uint64_t total = 0;
      for (std::size_t b = 0; b < world; ++b) {
        total += sends(a, b);
        if (sends(a, b) != expects(b, a)) {
          throw CommError(
              fmt::format("rank {} sends {} x {} to rank {}, which expects {}",
                          a, sends(a, b), Name(type), b, expects(b, a)));
        }
      }
      most = std::max(most, total);
    }
    // Every rank's input padded to the longest, gathered; this rank's
    // parts picked out.
    const std::size_t size = SizeOf(type);
    Bytes padded(most * size);
    if (sent > 0) std::memcpy(padded.data(), in, sent * size);
    Bytes gathered(world * most * size);
    impl_->RunAllGather(call, padded.data(), gathered.data(), most, type);
    auto* to = static_cast<unsigned char*>(out);
    for (std::size_t q = 0; q < world; ++q) {
      std::uint64_t before = 0;  // What rank q sends ranks before this one.
      for (std::size_t b = 0; b < me; ++b) before += sends(q, b);
      const std::size_t n = sends(q, me) * size;
      if (n == 0) continue;
      std::memcpy(to, gathered.data() + (q * most + before) * size, n);
      to += n;
    }
  });
}

std::unique_ptr<Communicator> GlooCommunicator::DoSplit(int color, int key) {
  const std::size_t world = static_cast<std::size_t>(impl_->size);
  std::vector<std::int64_t> all(2 * world);
  const std::int64_t mine[2] = {color, key};
  impl_->Guard(fmt::format("split (color {}, key {})", color, key), [&] {
    impl_->RunAllGather(CollectiveCall::Split(), mine, all.data(), 2,
                        DataType::kInt64);
  });
  const int round = impl_->splits++;
  if (color == kNoColor) return nullptr;
  // Its members, by key, then by rank here.
  std::vector<std::pair<std::int64_t, int>> members;
  for (std::size_t q = 0; q < world; ++q) {
    if (all[2 * q] == color) {
      members.push_back({all[2 * q + 1], static_cast<int>(q)});
    }
  }
  std::sort(members.begin(), members.end());
  const auto at = std::find_if(members.begin(), members.end(), [&](auto& m) {
    return m.second == impl_->rank;
  });
  GlooOptions sub = impl_->options;
  sub.prefix =
      fmt::format("{}/split{}/color{}", impl_->options.prefix, round, color);
  sub.name = fmt::format("{} split {} (color {})", name(), round, color);
  sub.timeout = impl_->timeout;
  sub.arena = nullptr;
  std::unique_ptr<GlooCommunicator> made = GlooCommunicator::Create(
      *impl_->store, static_cast<int>(at - members.begin()),
      static_cast<int>(members.size()), sub);
  // Every member has finished connecting before any uses it: one that
  // returned from its mesh and dropped the communicator at once would
  // otherwise close its side under a member still connecting. (Not in the
  // ledger: the test did not call it.)
  made->DoBarrier();
  return made;
}

void GlooCommunicator::DoSetTimeout(std::chrono::milliseconds timeout) {
  impl_->timeout = timeout;
  if (impl_->context) impl_->context->setTimeout(timeout);
}

namespace {

// A send or receive through Gloo's sockets: its unbound buffer, waited for
// once.
// Waits for a message through Gloo; its timeout says what would pair it.
void WaitForMessage(gloo::transport::UnboundBuffer& buffer, bool send,
                    std::chrono::milliseconds timeout,
                    const std::string& unpaired) {
  bool done = false;
  try {
    done = send ? buffer.waitSend(nullptr, timeout)
                : buffer.waitRecv(nullptr, timeout);
  } catch (const ::gloo::IoException& e) {
    const std::string what = e.what();
    if (what.find("Timed out") == std::string::npos) throw;
    throw CommError(what + unpaired);
  }
  if (!done) throw CommError("aborted");
}

class GlooRequest : public RequestState {
 public:
  GlooRequest(std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool send,
              std::function<void(const std::function<void()>&)> guard,
              std::string unpaired)
      : buffer_(std::move(buffer)),
        send_(send),
        guard_(std::move(guard)),
        unpaired_(std::move(unpaired)) {}
  void Wait(std::chrono::milliseconds timeout) override {
    guard_([&] { WaitForMessage(*buffer_, send_, timeout, unpaired_); });
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  bool send_;
  std::function<void(const std::function<void()>&)> guard_;
  std::string unpaired_;
};

// One in the arena's mailbox.
class ArenaRequest : public RequestState {
 public:
  ArenaRequest(HostArena& arena, int rank, std::uint64_t id,
               std::function<void(const std::function<void()>&)> guard)
      : arena_(arena), rank_(rank), id_(id), guard_(std::move(guard)) {}
  void Wait(std::chrono::milliseconds timeout) override {
    guard_([&] { arena_.WaitFor(rank_, id_, timeout); });
  }

 private:
  HostArena& arena_;
  int rank_;
  std::uint64_t id_;
  std::function<void(const std::function<void()>&)> guard_;
};

}  // namespace

std::unique_ptr<RequestState> GlooCommunicator::DoISend(const void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  impl_->CheckPeer("isend", peer);
  const std::string what =
      fmt::format("{} to rank {} (tag {})",
                  impl_->Describe("isend", count, type), peer, tag);
  Impl* impl = impl_.get();
  auto guard = [impl, what](const std::function<void()>& op) {
    impl->Guard(what, op);
  };
  std::unique_ptr<RequestState> request;
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      request = std::make_unique<ArenaRequest>(
          *impl_->arena, impl_->rank,
          impl_->arena->PostSend(impl_->rank, data, count, type, peer, tag),
          guard);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(const_cast<void*>(data),
                                                   count * SizeOf(type));
    buf->send(peer, PointToPointSlot(tag, count, type));
    request = std::make_unique<GlooRequest>(
        std::move(buf), true, guard,
        Unpaired(true, impl_->rank, count, type, peer, tag));
  });
  return request;
}

std::unique_ptr<RequestState> GlooCommunicator::DoIRecv(void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  impl_->CheckPeer("irecv", peer);
  const std::string what =
      fmt::format("{} from rank {} (tag {})",
                  impl_->Describe("irecv", count, type), peer, tag);
  Impl* impl = impl_.get();
  auto guard = [impl, what](const std::function<void()>& op) {
    impl->Guard(what, op);
  };
  std::unique_ptr<RequestState> request;
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      request = std::make_unique<ArenaRequest>(
          *impl_->arena, impl_->rank,
          impl_->arena->PostRecv(impl_->rank, data, count, type, peer, tag),
          guard);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(data, count * SizeOf(type));
    buf->recv(peer, PointToPointSlot(tag, count, type));
    request = std::make_unique<GlooRequest>(
        std::move(buf), false, guard,
        Unpaired(false, impl_->rank, count, type, peer, tag));
  });
  return request;
}

void GlooCommunicator::DoSend(const void* data, std::size_t count,
                              DataType type, int peer, std::uint32_t tag) {
  impl_->CheckPeer("send", peer);
  std::string what =
      fmt::format("{} to rank {} (tag {})",
                  impl_->Describe("send", count, type), peer, tag);
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      impl_->arena->Send(impl_->rank, data, count, type, peer, tag,
                         impl_->timeout);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(const_cast<void*>(data),
                                                   count * SizeOf(type));
    buf->send(peer, PointToPointSlot(tag, count, type));
    WaitForMessage(*buf, true, impl_->timeout,
                   Unpaired(true, impl_->rank, count, type, peer, tag));
  });
}

void GlooCommunicator::DoRecv(void* data, std::size_t count, DataType type,
                              int peer, std::uint32_t tag) {
  impl_->CheckPeer("recv", peer);
  std::string what =
      fmt::format("{} from rank {} (tag {})",
                  impl_->Describe("recv", count, type), peer, tag);
  impl_->Guard(what, [&] {
    if (impl_->InArena()) {
      impl_->arena->Recv(impl_->rank, data, count, type, peer, tag,
                         impl_->timeout);
      return;
    }
    auto buf = impl_->context->createUnboundBuffer(data, count * SizeOf(type));
    buf->recv(peer, PointToPointSlot(tag, count, type));
    WaitForMessage(*buf, false, impl_->timeout,
                   Unpaired(false, impl_->rank, count, type, peer, tag));
  });
}

}  // namespace disttest
