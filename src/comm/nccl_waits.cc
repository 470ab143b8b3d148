// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What every operation goes through: Check() and Begin() start it on the
// stream, Enqueue() and Wait() poll NCCL and the stream until the deadline,
// Fail() and Break() say why it failed; and the device memory it stages
// host buffers through.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "comm/host_arena.h"
#include "comm/nccl_communicator_impl.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest {
namespace {

using std::chrono::microseconds;

}  // namespace

void NcclCommunicator::Impl::Fail(const std::string& what,
                                  const std::string& cause) {
  throw CommError(
      fmt::format("[rank {}/{}] {}: {}", rank_, size_, what, cause));
}

std::string NcclCommunicator::Impl::Abort(const std::string& what,
                                          const std::string& cause) {
  std::string message = cause;
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    message += "; the nccl communicator is aborted";
  }
  aborted_ = true;
  if (broken_.empty()) broken_ = what + ": " + cause;
  return message;
}

void NcclCommunicator::Impl::Break(const std::string& what,
                                   const std::string& cause) {
  Fail(what, Abort(what, cause));
}

void NcclCommunicator::Impl::BreakForPeer(const std::string& what,
                                          const std::string& cause) {
  throw internal::ErrorOfAPeer(fmt::format("[rank {}/{}] {}: {}", rank_, size_,
                                           what, Abort(what, cause)));
}

std::string NcclCommunicator::Impl::NcclCause(ncclResult_t result) {
  // NCCL keeps the last error's text per thread; the communicator is unused.
  const char* last = ncclGetLastError(nullptr);
  std::string cause = fmt::format("NCCL error {}: {}", static_cast<int>(result),
                                  ncclGetErrorString(result));
  if (last != nullptr && *last != '\0') cause += fmt::format(" ({})", last);
  return cause;
}

// "cudaSetDevice(0) failed: no CUDA-capable device is detected
// (cudaErrorNoDevice)"
std::string CudaCause(const std::string& call, cudaError_t error) {
  return fmt::format("{} failed: {} ({})", call, cudaGetErrorString(error),
                     cudaGetErrorName(error));
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
  std::optional<Clock::time_point> drained;  // When an ended peer's data is.
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
    // A peer that ended (the harness marks it in the arena) will not come:
    // NCCL would wait for it until the deadline. One that passed its test
    // first did its part (its end meeting could not be held: a peer ended
    // as the test expected): what it sent may still be arriving, for a
    // moment.
    if (const int ended = EndedPeer(); ended >= 0) {
      const bool passed = ends_->Passed(ended);
      if (passed && !drained) drained = Clock::now() + kEndedPeerDrain;
      if (!passed || Clock::now() >= *drained) {
        BreakForPeer(what,
                     fmt::format("rank {} {}ended while this rank "
                                 "waited for it in NCCL",
                                 ended, passed ? "passed its test and " : ""));
      }
    }
    if (Clock::now() >= deadline_) {
      Break(what, fmt::format("timed out after {} ms", timeout_.count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

int NcclCommunicator::Impl::EndedPeer() const {
  if (ends_ == nullptr) return -1;
  // The world's collective waits for every rank; a split communicator's
  // for its members alone (ranks outside it may end, as the test expects,
  // while its members go on); a send or receive for its peers. One that
  // failed or died is named before one that passed, whose data may still
  // be arriving.
  if (ends_->FirstEnded() < 0) return -1;  // None has: one load.
  int passed = -1;
  auto ended = [&](int r) {
    const int world = WorldRank(r);
    if (r == rank_ || !ends_->Ended(world)) return false;
    if (!ends_->Passed(world)) return true;
    if (passed < 0) passed = world;
    return false;
  };
  if (waits_for_.empty()) {
    for (int r = 0; r < size_; ++r) {
      if (ended(r)) return WorldRank(r);
    }
  } else {
    for (int peer : waits_for_) {
      if (ended(peer)) return WorldRank(peer);
    }
  }
  return passed;
}

void NcclCommunicator::Impl::Synchronize() {
  const std::string what = "synchronize failed";
  Check(what);
  Wait(what);
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

}  // namespace disttest
