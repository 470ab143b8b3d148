// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/comm/nccl_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "comm/host_arena.h"
#include "comm/nccl_communicator_impl.h"
#include "comm/visit_type.h"
#include "disttest/error.h"
#include "disttest/rendezvous/prefix_store.h"
#include "env/knobs.h"

namespace disttest {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// The key under the communicator's prefix that holds rank 0's ncclUniqueId.
constexpr char kUniqueIdKey[] = "unique_id";

// Polls start at 100 us and grow to 1 ms: a short collective returns within
// a fraction of a millisecond, a long wait costs the CPU little.
constexpr microseconds kFirstPause{100};
constexpr microseconds kLongestPause{1000};

}  // namespace

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kBool:
      return ncclUint8;  // Reduced by NcclOp(kBool, op) as logic.
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBfloat16:
      return ncclBfloat16;
    case DataType::kInt16:
    case DataType::kUint16:
      break;  // NCCL has none: CheckType() says so.
  }
  return ncclInt8;
}

ncclRedOp_t NcclOp(DataType type, ReduceOp op) {
  return NcclOp(type == DataType::kBool ? internal::LogicalOp(op) : op);
}

void NcclCommunicator::Impl::CheckType(const std::string& what, DataType type) {
  if (type == DataType::kInt16 || type == DataType::kUint16) {
    Fail(what, fmt::format("NCCL has no {} type (use int32 or the gloo "
                           "backend)",
                           Name(type)));
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

// "cudaSetDevice(0) failed: no CUDA-capable device is detected
// (cudaErrorNoDevice)"
std::string CudaCause(const std::string& call, cudaError_t error) {
  return fmt::format("{} failed: {} ({})", call, cudaGetErrorString(error),
                     cudaGetErrorName(error));
}

std::string DescribeNcclOp(const char* op, std::size_t count, DataType type) {
  return fmt::format("{} of {} {}", op, count, Name(type));
}

NcclCommunicator::Impl::Impl(int rank, int size, const NcclOptions& options)
    : rank_(rank),
      size_(size),
      device_(options.device),
      prefix_(options.prefix),
      timeout_(std::min(options.timeout, kLongestTimeout)),
      arena_(options.arena) {}

std::unique_ptr<NcclCommunicator> NcclCommunicator::Create(
    Store& store, int rank, int size, const NcclOptions& options) {
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
  impl->Init(store);
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

std::unique_ptr<NcclCommunicator::Impl> NcclCommunicator::Impl::split(int color,
                                                                      int key) {
  const std::string what =
      fmt::format("split (color {}, key {}) failed", color, key);
  Begin(what);
  CheckCall(what, CollectiveCall::Split());
  NcclOptions options;
  options.device = device_;
  options.timeout = timeout_;
  // Rank and size are NCCL's to decide; the new Impl learns them below.
  auto made = std::make_unique<Impl>(0, 1, options);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  Enqueue(what, [&](ncclComm_t parent) {
    return ncclCommSplit(parent, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color,
                         key, &comm, &config);
  });
  if (color == kNoColor || comm == nullptr) return nullptr;
  int rank = 0, size = 0;
  if (ncclCommUserRank(comm, &rank) != ncclSuccess ||
      ncclCommCount(comm, &size) != ncclSuccess) {
    ncclCommAbort(comm);
    Break(what, "the split communicator has no rank or size");
  }
  auto impl = std::make_unique<Impl>(rank, size, options);
  impl->comm_ = comm;
  impl->deadline_ = Clock::now() + timeout_;
  impl->InitStream(what);
  impl->Poll(what, /*stream=*/false);
  return impl;
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
    // A clean end: ncclCommFinalize flushes what is in flight and leaves
    // ncclInProgress once every rank has finalised; then ncclCommDestroy
    // frees the rest without blocking. A peer that never finalises makes
    // this an abort when the timeout has passed.
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

void NcclCommunicator::Impl::Fail(const std::string& what,
                                  const std::string& cause) {
  throw CommError(
      fmt::format("[rank {}/{}] {}: {}", rank_, size_, what, cause));
}

void NcclCommunicator::Impl::Break(const std::string& what,
                                   const std::string& cause) {
  std::string message = cause;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      message += "; the nccl communicator is aborted";
    }
    aborted_ = true;
    if (broken_.empty()) broken_ = what + ": " + cause;
  }
  Fail(what, message);
}

std::string NcclCommunicator::Impl::NcclCause(ncclResult_t result) {
  // NCCL keeps the last error's text per thread; the communicator is unused.
  const char* last = ncclGetLastError(nullptr);
  std::string cause = fmt::format("NCCL error {}: {}", static_cast<int>(result),
                                  ncclGetErrorString(result));
  if (last != nullptr && *last != '\0') cause += fmt::format(" ({})", last);
  return cause;
}

void NcclCommunicator::Impl::Check(const std::string& what) {
  std::string broken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_ || comm_ == nullptr) {
      broken = broken_.empty() ? std::string("Abort() was called") : broken_;
    }
  }
  if (!broken.empty()) {
    Fail(what,
         fmt::format("the nccl communicator is aborted (earlier: {})", broken));
  }
  deadline_ = Clock::now() + timeout_;
  cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess) {
    Break(what, CudaCause(fmt::format("cudaSetDevice({})", device_), error));
  }
  Poll(what, /*stream=*/false);
}

void NcclCommunicator::Impl::Begin(const std::string& what) {
  Check(what);
  // Sends and receives made before go first, as their order says.
  Launch(what);
  // stream_ does not wait for stream 0 by itself (cudaStreamNonBlocking):
  // without this, a buffer filled by cudaMemset or cudaMemcpy just before
  // could be read before it is filled.
  cudaError_t error = cudaEventRecord(legacy_done_, cudaStreamLegacy);
  if (error != cudaSuccess) Break(what, CudaCause("cudaEventRecord", error));
  error = cudaStreamWaitEvent(stream_, legacy_done_, 0);
  if (error != cudaSuccess) {
    Break(what, CudaCause("cudaStreamWaitEvent", error));
  }
}

void NcclCommunicator::Impl::Enqueue(
    const std::string& what,
    const std::function<ncclResult_t(ncclComm_t)>& call) {
  ncclResult_t result = ncclSuccess;
  bool aborted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ == nullptr) {
      aborted = true;
    } else {
      result = call(comm_);
    }
  }
  if (aborted) Fail(what, "the nccl communicator was aborted");
  if (result != ncclSuccess && result != ncclInProgress) {
    Break(what, NcclCause(result));
  }
  Poll(what, /*stream=*/false);
}

void NcclCommunicator::Impl::Wait(const std::string& what) {
  Poll(what, /*stream=*/true);
}

void NcclCommunicator::Impl::Poll(const std::string& what, bool stream) {
  microseconds pause = kFirstPause;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (comm_ == nullptr) {
        aborted = true;
      } else {
        ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
        if (result != ncclSuccess) state = result;
      }
    }
    if (aborted) Fail(what, "the nccl communicator was aborted");
    if (state != ncclSuccess && state != ncclInProgress) {
      Break(what, NcclCause(state));
    }
    // Before NCCL leaves ncclInProgress, its work may not be on the stream
    // yet: an idle stream means nothing then.
    if (state == ncclSuccess) {
      if (!stream) return;
      cudaError_t error = cudaStreamQuery(stream_);
      if (error == cudaSuccess) return;
      if (error != cudaErrorNotReady) {
        Break(what, CudaCause("cudaStreamQuery", error));
      }
    }
    if (Clock::now() >= deadline_) {
      Break(what, fmt::format("timed out after {} ms", timeout_.count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

void* NcclCommunicator::Impl::Scratch(const std::string& what,
                                      std::size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  const std::size_t grown = std::max(bytes, 2 * scratch_bytes_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  cudaError_t error = cudaMalloc(&scratch_, grown);
  if (error != cudaSuccess) {
    scratch_ = nullptr;
    Break(what, CudaCause(fmt::format("cudaMalloc of {} bytes", grown), error));
  }
  scratch_bytes_ = grown;
  return scratch_;
}

void NcclCommunicator::Impl::Copy(const std::string& what, void* to,
                                  const void* from, std::size_t bytes,
                                  cudaMemcpyKind kind) {
  cudaError_t error = cudaMemcpyAsync(to, from, bytes, kind, stream_);
  if (error != cudaSuccess) Break(what, CudaCause("cudaMemcpyAsync", error));
}

bool NcclCommunicator::Impl::OnDevice(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // Not CUDA's memory: plain host memory.
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice ||
         attributes.type == cudaMemoryTypeManaged;
}

void NcclCommunicator::Impl::CheckPeer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw CommError(fmt::format("[rank {}/{}] {}: invalid peer rank {}", rank_,
                                size_, op, peer));
  }
}

void NcclCommunicator::Impl::CheckTag(const char* op, std::uint32_t tag) const {
  if (tag != 0) {
    throw CommError(fmt::format(
        "[rank {}/{}] backend nccl does not support tagged {} (tag {}): NCCL "
        "pairs sends and receives in call order; use tag 0",
        rank_, size_, op, tag));
  }
}

void NcclCommunicator::Impl::Synchronize() {
  const std::string what = "synchronize failed";
  Check(what);
  Wait(what);
}

void NcclCommunicator::Impl::CheckCall(const std::string& what,
                                       const CollectiveCall& call) {
  if (arena_ == nullptr) return;
  try {
    arena_->Check(rank_, call, timeout_);
  } catch (const CommError& e) {
    Break(what, e.what());
  }
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
  std::unique_ptr<Impl> impl = impl_->split(color, key);
  if (impl == nullptr) return nullptr;
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(std::move(impl)));
  comm->InitTimeout(timeout());
  return comm;
}
void NcclCommunicator::DoSetTimeout(std::chrono::milliseconds timeout) {
  impl_->set_timeout(timeout);
}

namespace {
// An isend or irecv, launched with the others at the first wait.
class NcclRequest : public RequestState {
 public:
  explicit NcclRequest(std::function<void(std::chrono::milliseconds)> wait)
      : wait_(std::move(wait)) {}
  void Wait(std::chrono::milliseconds timeout) override { wait_(timeout); }

 private:
  std::function<void(std::chrono::milliseconds)> wait_;
};
}  // namespace

std::unique_ptr<RequestState> NcclCommunicator::DoISend(const void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  auto pending =
      impl_->Post(true, const_cast<void*>(data), count, type, peer, tag);
  Impl* impl = impl_.get();
  return std::make_unique<NcclRequest>(
      [impl, pending](std::chrono::milliseconds t) {
        impl->Finish(*pending, t);
      });
}
std::unique_ptr<RequestState> NcclCommunicator::DoIRecv(void* data,
                                                        std::size_t count,
                                                        DataType type, int peer,
                                                        std::uint32_t tag) {
  auto pending = impl_->Post(false, data, count, type, peer, tag);
  Impl* impl = impl_.get();
  return std::make_unique<NcclRequest>(
      [impl, pending](std::chrono::milliseconds t) {
        impl->Finish(*pending, t);
      });
}

}  // namespace disttest
