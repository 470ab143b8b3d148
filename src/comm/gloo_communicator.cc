// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator's creation: Gloo's device and its event-loop thread, the
// full mesh connected through the store, split() and the timeout. The
// operations are in gloo_collectives.cc and gloo_point_to_point.cc.
#include "disttest/comm/gloo_communicator.h"

#include <fmt/format.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <sched.h>

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/sockets.h"
#include "comm/communicator_sockets.h"
#include "comm/gloo_communicator_impl.h"
#include "comm/gloo_store.h"
#include "comm/ledger.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/knobs.h"
#include "env/text.h"

namespace disttest {
namespace {

// "rank 2", "ranks 1-3": the ranks of `size` that have put nothing in
// `store`, "" if all have or it cannot tell. Gloo's connectFullMesh puts a
// rank's host name under "rank_<rank>" first, then waits for each lower
// rank's, then puts its addresses under "<rank>": a rank that came may
// still wait for another, with only the first.
std::string RanksThatNeverCame(Store& store, int rank, int size) {
  std::vector<int> never;
  try {
    for (int k = 0; k < size; ++k) {
      if (k != rank && !store.check({fmt::format("rank_{}", k)}) &&
          !store.check({std::to_string(k)})) {
        never.push_back(k);
      }
    }
  } catch (const std::exception&) {
    return "";  // The store is gone: its own error says why.
  }
  return never.empty() ? "" : internal::RanksText(never);
}

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

}  // namespace

std::unique_ptr<GlooCommunicator> GlooCommunicator::Create(
    Store& store, int rank, int size, const GlooOptions& given,
    CallSite where) {
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
        const internal::MakingCommunicator making(store.scope(), options.prefix,
                                                  options.name, rank, size,
                                                  options.timeout, where);
        const std::map<ino_t, int> before =
            internal::WatchingCommunicatorSockets() ? internal::TcpSockets()
                                                    : std::map<ino_t, int>{};
        try {
          impl->context->connectFullMesh(adapter, impl->device);
        } catch (const std::exception& e) {
          // Gloo's words for a peer whose address list is for another
          // number of ranks: "sizeof(impl_) == bytes.size(). 136 vs 272".
          const std::string_view what = e.what();
          if (what.find("bytes.size()") == std::string_view::npos) {
            // Each rank puts its addresses under its number: a store that
            // timed out waiting for them names the ranks that never came.
            // Not one that could not be reached: asking it again would wait
            // as long once more (trial 11: twice the timeout).
            const bool waited_for_a_key =
                (what.find("store wait for") != std::string_view::npos ||
                 what.find("store get of") != std::string_view::npos) &&
                what.find("timed out") != std::string_view::npos;
            if (!waited_for_a_key) throw;
            const std::string never = RanksThatNeverCame(prefixed, rank, size);
            if (never.empty()) throw;
            throw CommError(fmt::format(
                "{} of {} never came to connect (no addresses of theirs in "
                "the store): every rank of a communicator must create it, "
                "with the same store prefix and size ({})",
                never, size, e.what()));
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

}  // namespace disttest
