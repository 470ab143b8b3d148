// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's life (nccl_communicator_impl.h): creation (rank 0's
// ncclUniqueId through the store), split, abort and the clean end; and the
// public class, which hands every operation to its Impl.
#include "disttest/comm/nccl_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "comm/host_arena.h"
#include "comm/ledger.h"
#include "comm/nccl_communicator_impl.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/knobs.h"

namespace disttest {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// The key under the communicator's prefix that holds rank 0's ncclUniqueId.
constexpr char kUniqueIdKey[] = "unique_id";

}  // namespace

NcclCommunicator::Impl::Impl(int rank, int size, const NcclOptions& options)
    : rank_(rank),
      size_(size),
      device_(options.device),
      prefix_(options.prefix),
      timeout_(std::min(options.timeout, kLongestTimeout)),
      arena_(options.arena),
      ends_(options.arena) {}

std::unique_ptr<NcclCommunicator> NcclCommunicator::Create(
    Store& store, int rank, int size, const NcclOptions& options,
    CallSite where) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw CommError(fmt::format(
        "[rank {}/{}] cannot create the nccl communicator: invalid rank or "
        "size",
        rank, size));
  }
  if (options.arena != nullptr && options.arena->world() != size) {
    throw CommError(
        fmt::format("[rank {}/{}] the host arena is for {} ranks, not {}", rank,
                    size, options.arena->world(), size));
  }
  // Owned from the start: a failed Init() leaves nothing behind.
  auto impl = std::make_unique<Impl>(rank, size, options);
  impl->scope_ = store.scope();
  {
    const internal::MakingCommunicator making(store.scope(), options.prefix,
                                              options.name, rank, size,
                                              options.timeout, where);
    impl->Init(store);
  }
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(std::move(impl)));
  comm->SetName(options.name, options.prefix, store.scope());
  comm->InitTimeout(options.timeout);
  return comm;
}

void NcclCommunicator::Impl::Init(Store& store) {
  const std::string what =
      fmt::format("cannot create the nccl communicator on device {}", device_);
  deadline_ = Clock::now() + timeout_;

  cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess) {
    cudaGetLastError();  // Leaves no error behind for the caller's CUDA.
    std::string cause =
        CudaCause(fmt::format("cudaSetDevice({})", device_), error);
    if (error == cudaErrorInitializationError) {
      // The classic cause in a forked rank.
      cause +=
          "; if the test's parent process (a fixture's constructor or "
          "SetUp()) used CUDA before the ranks were forked, they cannot use "
          "it: keep CUDA in the ranks (SetUpRank()), or use "
          "LaunchMode::kExec";
    }
    Fail(what, cause);
  }
  InitStream(what);

  // Rank 0's id reaches the others through the store, within the deadline.
  ncclUniqueId id{};
  try {
    PrefixStore prefixed(prefix_, store);
    prefixed.set_timeout(std::max(
        milliseconds(1),
        std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now())));
    if (rank_ == 0) {
      ncclResult_t result = ncclGetUniqueId(&id);
      if (result != ncclSuccess) {
        Fail(what, "ncclGetUniqueId failed: " + NcclCause(result));
      }
      prefixed.set(kUniqueIdKey,
                   std::vector<char>(id.internal, id.internal + sizeof id));
    } else {
      std::vector<char> value = prefixed.get(kUniqueIdKey);
      if (value.size() != sizeof id) {
        Fail(what, fmt::format("rank 0's ncclUniqueId has {} bytes, not {}",
                               value.size(), sizeof id));
      }
      std::memcpy(id.internal, value.data(), sizeof id);
    }
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    Fail(what, fmt::format("no ncclUniqueId from rank 0: {}", e.what()));
  }

  // Non-blocking, so that a rank whose peers never come can abort.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = comm;
  }
  if (result != ncclSuccess && result != ncclInProgress) {
    Break(what, "ncclCommInitRankConfig failed: " + NcclCause(result));
  }
  if (comm == nullptr) {
    Fail(what, "ncclCommInitRankConfig returned no communicator");
  }
  Poll(what, /*stream=*/false);
}

void NcclCommunicator::Impl::InitStream(const std::string& what) {
  cudaError_t error =
      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (error != cudaSuccess) {
    stream_ = nullptr;
    Fail(what, CudaCause("cudaStreamCreateWithFlags", error));
  }
  error = cudaEventCreateWithFlags(&legacy_done_, cudaEventDisableTiming);
  if (error != cudaSuccess) {
    legacy_done_ = nullptr;
    Fail(what, CudaCause("cudaEventCreateWithFlags", error));
  }
}

std::unique_ptr<NcclCommunicator::Impl> NcclCommunicator::Impl::split(
    int color, int key, const std::string& prefix) {
  const std::string what =
      fmt::format("split (color {}, key {}) failed", color, key);
  Begin(what);
  CheckCall(what, CollectiveCall::Split());
  NcclOptions options;
  options.device = device_;
  options.timeout = timeout_;
  options.prefix = prefix;
  const std::vector<std::int32_t> colors = ends_ != nullptr
                                               ? GatherColors(what, color, key)
                                               : std::vector<std::int32_t>{};
  // The new communicator's members, in NCCL's order: by key, then by rank
  // here (every rank's color and key came with GatherColors).
  std::vector<std::pair<std::int32_t, int>> members;  // Key, rank here.
  for (std::size_t r = 0; 2 * r < colors.size(); ++r) {
    if (colors[2 * r] == color) {
      members.emplace_back(colors[2 * r + 1], static_cast<int>(r));
    }
  }
  std::stable_sort(
      members.begin(), members.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  {
    // Every rank gave its color before (GatherColors): from here on only
    // the members' ends stop the wait, and a rank outside the new
    // communicator may end (as a test expects) while they finish. (This
    // rank alone, for a communicator of one: no peer to wait for.)
    std::optional<WaitsFor> members_only;
    if (!members.empty() && color != kNoColor) {
      std::vector<int> peers;
      for (const auto& m : members) {
        if (m.second != rank_) peers.push_back(m.second);
      }
      if (peers.empty()) peers.push_back(rank_);
      members_only.emplace(*this, std::move(peers));
    }
    Enqueue(what, [&](ncclComm_t parent) {
      return ncclCommSplit(parent,
                           color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key,
                           &comm, &config);
    });
  }
  if (color == kNoColor) return nullptr;
  // NCCL hands the new communicator back once made (this one was in
  // progress until then, and Enqueue waited for that).
  if (comm == nullptr) {
    Break(what, fmt::format("NCCL made no communicator for color {}", color));
  }
  // Rank and size are NCCL's to decide.
  int rank = 0, size = 0;
  ncclResult_t result = ncclCommUserRank(comm, &rank);
  if (result == ncclSuccess) result = ncclCommCount(comm, &size);
  if (result != ncclSuccess) {
    const std::string cause = NcclCause(result);
    ncclCommAbort(comm);
    Break(what, "the split communicator has no rank or size: " + cause);
  }
  auto impl = std::make_unique<Impl>(rank, size, options);
  impl->scope_ = scope_;
  impl->comm_ = comm;
  // Its members' world ranks: a member's end then stops its waits, as on
  // the world communicator. Where NCCL ordered them otherwise (never so
  // far), it goes without: its waits end at its deadline.
  if (static_cast<int>(members.size()) == size &&
      members[static_cast<std::size_t>(rank)].second == rank_) {
    impl->ends_ = ends_;
    for (const auto& m : members) {
      impl->world_ranks_.push_back(WorldRank(m.second));
    }
  }
  impl->deadline_ = Clock::now() + timeout_;
  impl->InitStream(what);
  impl->Poll(what, /*stream=*/false);
  return impl;
}

std::vector<std::int32_t> NcclCommunicator::Impl::GatherColors(
    const std::string& what, int color, int key) {
  const std::size_t n = static_cast<std::size_t>(size_);
  const std::int32_t mine[2] = {color, key};
  auto* device = static_cast<std::int32_t*>(
      Scratch(what, sizeof(std::int32_t) * 2 * (n + 1)));
  Copy(what, device, mine, sizeof mine, cudaMemcpyHostToDevice);
  Enqueue(what, [&](ncclComm_t comm) {
    return ncclAllGather(device, device + 2, 2, ncclInt32, comm, stream_);
  });
  // Waited for first, as every operation's result: a copy into pageable
  // memory blocks until the stream's work before it is done, with no
  // deadline, and a peer that died in the gather would hang it.
  Wait(what);
  std::vector<std::int32_t> all(2 * n);
  Copy(what, all.data(), device + 2, sizeof(std::int32_t) * 2 * n,
       cudaMemcpyDeviceToHost);
  Wait(what);
  return all;
}

NcclCommunicator::Impl::~Impl() {
  // Nothing here may throw; errors only decide between destroy and abort.
  cudaSetDevice(device_);
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) comm = comm_;
    comm_ = nullptr;
  }
  if (comm != nullptr) {
    // A clean end: ncclCommFinalize synchronizes this rank's work in
    // flight (NCCL's own streams; no rank waits for another there) and
    // leaves ncclInProgress when it is done; then ncclCommDestroy frees the
    // rest. Work that does not finish within the timeout makes this an
    // abort.
    bool clean = false;
    ncclResult_t state = ncclCommFinalize(comm);
    if (state == ncclSuccess || state == ncclInProgress) {
      const Clock::time_point deadline = Clock::now() + timeout_;
      microseconds pause = kFirstPause;
      for (;;) {
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
        if (state != ncclInProgress) break;
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, kLongestPause);
      }
      clean = state == ncclSuccess;
    }
    if (clean) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  for (const auto& p : pending_) {
    if (p->device != nullptr && p->device != p->data) cudaFree(p->device);
  }
  if (legacy_done_ != nullptr) cudaEventDestroy(legacy_done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  cudaGetLastError();  // Leaves no error behind for the caller's CUDA.
}

bool NcclCommunicator::Impl::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_ || !broken_.empty();
}

void NcclCommunicator::Impl::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  aborted_ = true;
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { return impl_->rank_; }
int NcclCommunicator::size() const { return impl_->size_; }
bool NcclCommunicator::failed() const { return impl_->failed(); }
ncclComm_t NcclCommunicator::nccl_comm() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->comm_;
}
cudaStream_t NcclCommunicator::stream() const { return impl_->stream_; }
int NcclCommunicator::device() const { return impl_->device_; }
void NcclCommunicator::Synchronize() { impl_->Synchronize(); }
void NcclCommunicator::Abort() { impl_->Abort(); }
void NcclCommunicator::DoBarrier() { impl_->barrier(); }
void NcclCommunicator::DoAllReduce(void* data, std::size_t count, DataType type,
                                   ReduceOp op) {
  impl_->allreduce(data, count, type, op);
}
void NcclCommunicator::DoBroadcast(void* data, std::size_t count, DataType type,
                                   int root) {
  impl_->broadcast(data, count, type, root);
}
void NcclCommunicator::DoAllGather(const void* in, void* out, std::size_t count,
                                   DataType type) {
  impl_->allgather(in, out, count, type);
}
void NcclCommunicator::DoSend(const void* data, std::size_t count,
                              DataType type, int peer, std::uint32_t tag) {
  impl_->send(data, count, type, peer, tag);
}
void NcclCommunicator::DoRecv(void* data, std::size_t count, DataType type,
                              int peer, std::uint32_t tag) {
  impl_->recv(data, count, type, peer, tag);
}
void NcclCommunicator::DoAllReduceOutOfPlace(const void* in, void* out,
                                             std::size_t count, DataType type,
                                             ReduceOp op) {
  impl_->allreduce(in, out, count, type, op);
}
void NcclCommunicator::DoBroadcastOutOfPlace(const void* in, void* out,
                                             std::size_t count, DataType type,
                                             int root) {
  impl_->broadcast(in, out, count, type, root);
}
void NcclCommunicator::DoReduce(const void* in, void* out, std::size_t count,
                                DataType type, ReduceOp op, int root) {
  impl_->reduce(in, out, count, type, op, root);
}
void NcclCommunicator::DoReduceScatter(const void* in, void* out,
                                       std::size_t count, DataType type,
                                       ReduceOp op) {
  impl_->reduce_scatter(in, out, count, type, op);
}
void NcclCommunicator::DoGather(const void* in, void* out, std::size_t count,
                                DataType type, int root) {
  impl_->gather(in, out, count, type, root);
}
void NcclCommunicator::DoScatter(const void* in, void* out, std::size_t count,
                                 DataType type, int root) {
  impl_->scatter(in, out, count, type, root);
}
void NcclCommunicator::DoAllToAll(const void* in, void* out, std::size_t count,
                                  DataType type) {
  impl_->alltoall(in, out, count, type);
}
void NcclCommunicator::DoAllGatherV(const void* in, void* out,
                                    std::span<const std::size_t> counts,
                                    DataType type) {
  impl_->allgatherv(in, out, counts, type);
}
void NcclCommunicator::DoAllToAllV(const void* in,
                                   std::span<const std::size_t> in_counts,
                                   void* out,
                                   std::span<const std::size_t> out_counts,
                                   DataType type) {
  impl_->alltoallv(in, in_counts, out, out_counts, type);
}
std::unique_ptr<Communicator> NcclCommunicator::DoSplit(int color, int key) {
  // Every rank counts every split it makes, kNoColor's too: the members
  // name the new communicator alike, and the ledger compares its calls.
  const int round = impl_->splits_++;
  const std::string prefix =
      fmt::format("{}/split{}/color{}", impl_->prefix_, round, color);
  std::unique_ptr<Impl> impl = impl_->split(color, key, prefix);
  if (impl == nullptr) return nullptr;
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(std::move(impl)));
  comm->SetName(fmt::format("{} split {} (color {})", name(), round, color),
                prefix, impl_->scope_);
  comm->InitTimeout(timeout());
  return comm;
}
void NcclCommunicator::DoSetTimeout(std::chrono::milliseconds timeout) {
  impl_->set_timeout(timeout);
}

}  // namespace disttest
