// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The Communicator's front: each public operation runs its backend's Do*()
// recorded in the ledger (communicator_recorded.h), and the defaults of the
// Do*() a backend may leave out.
#include "disttest/comm/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/threads.h"
#include "comm/buffer_overlap.h"
#include "comm/communicator_recorded.h"
#include "comm/ledger.h"
#include "comm/rank_thread_check.h"
#include "comm/self_messages.h"
#include "disttest/comm/collective_call.h"
#include "disttest/error.h"
#include "env/knobs.h"

namespace disttest {

const char* Name(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
    case Backend::kAuto:
      return "auto";
    case Backend::kMpi:
      return "mpi";
  }
  return "unknown";
}

using internal::LedgerOp;

namespace {
// kAvg divides: only the floating-point types have it, on every backend.
void CheckReduceOp(const Communicator& comm, const char* op, DataType type,
                   ReduceOp reduce) {
  if (reduce != ReduceOp::kAvg || IsFloatingPoint(type)) return;
  throw CommError(fmt::format(
      "[rank {}/{}] {} of {}: avg is for the floating-point types (float16, "
      "bfloat16, float32, float64), not {}",
      comm.rank(), comm.size(), op, Name(type), Name(type)));
}
// `in`, or a copy of it where it overlaps `out` (as `in == out` too,
// where `same` is no in-place form): a backend that reads host memory then
// reads the input as it was at the call, however the buffers overlap
// (Gloo's allgather copies its input into the output first, which an
// overlap would garble; MPI forbids one). NCCL's buffers may be device
// memory: it copies its own (nccl_collectives.cc).
const void* Unaliased(const Communicator& comm, const void* in,
                      std::size_t in_bytes, const void* out,
                      std::size_t out_bytes, std::vector<unsigned char>& copy,
                      bool same = false) {
  if (in == nullptr || out == nullptr || (same && in == out) ||
      !internal::OverlapsOtherThanInPlace(in, in_bytes, out, out_bytes, 0) ||
      std::string_view(comm.backend_name()) == "nccl") {
    return in;
  }
  const auto* bytes = static_cast<const unsigned char*>(in);
  copy.assign(bytes, bytes + in_bytes);
  return copy.data();
}

// The elements of `counts`, summed.
std::size_t Sum(std::span<const std::size_t> counts) {
  std::size_t sum = 0;
  for (std::size_t c : counts) sum += c;
  return sum;
}

}  // namespace

namespace internal {

void RefuseOutsideARankThread(int rank, int size, const std::string& what) {
  if (!RanksAreThreads() || ThreadsRank() >= 0) return;
  // Which rank's it is, and so its calls' comparison across the ranks,
  // would be unknown: refused, never run unchecked.
  throw CommError(fmt::format(
      "[rank {}/{}] {}: made in a thread that no rank runs (one a rank "
      "thread started); the ranks are threads of one process "
      "(LaunchMode::kThreads): make communicators in the rank's own thread "
      "(SetUpRank(), the body), or run the test as processes "
      "(options().process_only)",
      rank, size, what));
}

}  // namespace internal

void Communicator::SetName(const std::string& name, const std::string& prefix,
                           const std::string& store_scope) {
  name_ = internal::CommunicatorName(name, prefix);
  // The keys its rendezvous uses (a PrefixStore(prefix, store)'s), its
  // size, and its number among those of the rank (one made again is
  // another; numbered per test from past those still alive, as on every
  // rank: ledger.h's TakeCommunicatorNumber). The size keeps a rank's
  // private group on a store of its own with the same keys (a 1-rank
  // "local" group) from taking the number its world group has on the other
  // ranks. Not its name: a name is a label for reports, and ranks that name
  // one communicator differently still have their calls compared.
  internal::RefuseOutsideARankThread(rank(), size(), name_);
  const std::string identity =
      internal::CommunicatorIdentity(store_scope, prefix, size());
  if (!numbered_as_.empty()) {
    internal::GiveCommunicatorNumberBack(numbered_as_, number_);
  }
  number_ = internal::TakeCommunicatorNumber(identity, &numbered_as_);
  key_ = internal::LedgerKey(fmt::format("{}\n{}", identity, number_));
  internal::Ledger* ledger = internal::Ledger::Current();
  // In the ledger from now on, before its first operation: a reader then
  // knows this rank's rank in it even if it never calls it (its peers' sends
  // to this rank wait for ever).
  if (ledger != nullptr) {
    ledger_id_ = ledger->AddCommunicator(name_, key_, rank(), size());
    ledger_ = ledger;
  }
}

internal::SelfMessages& Communicator::Self() {
  std::call_once(self_once_, [&] {
    self_ = std::make_shared<internal::SelfMessages>(
        rank(), size(), ledger_ != nullptr ? ledger_->slot() : -1);
  });
  return *self_;
}

Communicator::~Communicator() {
  *alive_ = false;
  if (!numbered_as_.empty()) {
    internal::GiveCommunicatorNumberBack(numbered_as_, number_);
  }
  // Its id can go to another communicator from the next test on.
  if (ledger_ != nullptr) ledger_->Release(ledger_id_);
}

void Communicator::barrier(Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, -1, 0},
             where);
  r.Run([&] { DoBarrier(); });
}

void Communicator::allreduce(void* data, std::size_t count, DataType type,
                             ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kAllReduce, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "allreduce", type, op);
    DoAllReduce(data, count, type, op);
  });
}

void Communicator::allreduce(const void* in, void* out, std::size_t count,
                             DataType type, ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kAllReduce, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "allreduce", type, op);
    if (in == out) {
      DoAllReduce(out, count, type, op);
    } else {
      const std::size_t bytes = count * SizeOf(type);
      std::vector<unsigned char> copy;
      DoAllReduceOutOfPlace(Unaliased(*this, in, bytes, out, bytes, copy), out,
                            count, type, op);
    }
  });
}

void Communicator::broadcast(void* data, std::size_t count, DataType type,
                             int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBroadcast, type, ReduceOp::kSum, count, root, 0},
             where);
  r.Run([&] { DoBroadcast(data, count, type, root); });
}

void Communicator::broadcast(const void* in, void* out, std::size_t count,
                             DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kBroadcast, type, ReduceOp::kSum, count, root, 0},
             where);
  r.Run([&] {
    if (in == out) {
      DoBroadcast(out, count, type, root);
    } else {
      const std::size_t bytes = count * SizeOf(type);
      std::vector<unsigned char> copy;
      DoBroadcastOutOfPlace(
          rank() == root ? Unaliased(*this, in, bytes, out, bytes, copy) : in,
          out, count, type, root);
    }
  });
}

void Communicator::allgather(const void* in, void* out, std::size_t count,
                             DataType type, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kAllGather, type, ReduceOp::kSum, count, -1, 0}, where);
  r.Run([&] {
    const std::size_t bytes = count * SizeOf(type);
    std::vector<unsigned char> copy;
    DoAllGather(Unaliased(*this, in, bytes, out, bytes * size(), copy), out,
                count, type);
  });
}

void Communicator::send(const void* data, std::size_t count, DataType type,
                        int peer, std::uint32_t tag, Where where) {
  Recorded r(*this, false,
             {LedgerOp::kSend, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { DoSend(data, count, type, peer, tag); });
}

void Communicator::recv(void* data, std::size_t count, DataType type, int peer,
                        std::uint32_t tag, Where where) {
  Recorded r(*this, false,
             {LedgerOp::kRecv, type, ReduceOp::kSum, count, peer, tag}, where);
  r.Run([&] { DoRecv(data, count, type, peer, tag); });
}

void Communicator::reduce(const void* in, void* out, std::size_t count,
                          DataType type, ReduceOp op, int root, Where where) {
  Recorded r(*this, true, {LedgerOp::kReduce, type, op, count, root, 0}, where);
  r.Run([&] {
    CheckReduceOp(*this, "reduce", type, op);
    const std::size_t bytes = count * SizeOf(type);
    std::vector<unsigned char> copy;
    DoReduce(rank() == root
                 ? Unaliased(*this, in, bytes, out, bytes, copy, /*same=*/true)
                 : in,
             out, count, type, op, root);
  });
}

void Communicator::reduce_scatter(const void* in, void* out, std::size_t count,
                                  DataType type, ReduceOp op, Where where) {
  Recorded r(*this, true, {LedgerOp::kReduceScatter, type, op, count, -1, 0},
             where);
  r.Run([&] {
    CheckReduceOp(*this, "reduce_scatter", type, op);
    const std::size_t bytes = count * SizeOf(type);
    std::vector<unsigned char> copy;
    DoReduceScatter(Unaliased(*this, in, bytes * size(), out, bytes, copy), out,
                    count, type, op);
  });
}

void Communicator::gather(const void* in, void* out, std::size_t count,
                          DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kGather, type, ReduceOp::kSum, count, root, 0}, where);
  r.Run([&] {
    const std::size_t bytes = count * SizeOf(type);
    std::vector<unsigned char> copy;
    DoGather(rank() == root
                 ? Unaliased(*this, in, bytes, out, bytes * size(), copy)
                 : in,
             out, count, type, root);
  });
}

void Communicator::scatter(const void* in, void* out, std::size_t count,
                           DataType type, int root, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kScatter, type, ReduceOp::kSum, count, root, 0}, where);
  r.Run([&] {
    const std::size_t bytes = count * SizeOf(type);
    std::vector<unsigned char> copy;
    DoScatter(rank() == root
                  ? Unaliased(*this, in, bytes * size(), out, bytes, copy)
                  : in,
              out, count, type, root);
  });
}

void Communicator::alltoall(const void* in, void* out, std::size_t count,
                            DataType type, Where where) {
  Recorded r(*this, true,
             {LedgerOp::kAllToAll, type, ReduceOp::kSum, count, -1, 0}, where);
  r.Run([&] {
    const std::size_t bytes = count * SizeOf(type) * size();
    std::vector<unsigned char> copy;
    DoAllToAll(Unaliased(*this, in, bytes, out, bytes, copy), out, count, type);
  });
}

void Communicator::allgatherv(const void* in, void* out,
                              std::span<const std::size_t> counts,
                              DataType type, Where where) {
  std::uint64_t total = 0;
  for (std::size_t c : counts) total += c;
  const std::uint64_t hash =
      CollectiveCall::CountsHash(counts.data(), counts.size());
  Recorded r(*this, true,
             {LedgerOp::kAllGatherV, type, ReduceOp::kSum, total, -1,
              static_cast<std::uint32_t>(hash ^ (hash >> 32)), counts.data(),
              counts.size()},
             where);
  r.Run([&] {
    const std::size_t mine =
        counts.size() == static_cast<std::size_t>(size())
            ? counts[static_cast<std::size_t>(rank())] * SizeOf(type)
            : 0;
    std::vector<unsigned char> copy;
    DoAllGatherV(
        Unaliased(*this, in, mine, out, Sum(counts) * SizeOf(type), copy), out,
        counts, type);
  });
}

void Communicator::alltoallv(const void* in,
                             std::span<const std::size_t> in_counts, void* out,
                             std::span<const std::size_t> out_counts,
                             DataType type, Where where) {
  std::uint64_t sent = 0;
  for (std::size_t c : in_counts) sent += c;
  Recorded r(*this, true,
             {LedgerOp::kAllToAllV, type, ReduceOp::kSum, sent, -1, 0}, where);
  r.Run([&] {
    std::vector<unsigned char> copy;
    DoAllToAllV(Unaliased(*this, in, Sum(in_counts) * SizeOf(type), out,
                          Sum(out_counts) * SizeOf(type), copy),
                in_counts, out, out_counts, type);
  });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key,
                                                  Where where) {
  // Before any rank connects: a peer's refusal must not close a mesh that
  // another rank is still connecting.
  internal::RefuseOutsideARankThread(rank(), size(), "split of " + name_);
  Recorded r(*this, true,
             {LedgerOp::kSplit, DataType::kUint8, ReduceOp::kSum, 0, color,
              static_cast<std::uint32_t>(key)},
             where);
  std::unique_ptr<Communicator> made;
  r.Run([&] {
    if (color < 0 && color != kNoColor) {
      throw CommError(fmt::format(
          "[rank {}/{}] split: color {} is negative (kNoColor, -1, is the "
          "only one: this rank then joins no communicator)",
          rank(), size(), color));
    }
    made = DoSplit(color, key);
  });
  return made;
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout <= std::chrono::milliseconds::zero()) {
    throw CommError(fmt::format(
        "[rank {}/{}] set_timeout({} ms): a timeout must be positive", rank(),
        size(), timeout.count()));
  }
  timeout_ = std::min(timeout, kLongestTimeout);
  DoSetTimeout(timeout_);
}

void Communicator::restore_timeout() {
  timeout_ = made_timeout_;
  DoSetTimeout(timeout_);
}

void Communicator::InitTimeout(std::chrono::milliseconds timeout) {
  timeout_ = std::min(timeout, kLongestTimeout);
  made_timeout_ = timeout_;
}

namespace {
[[noreturn]] void NotInBackend(const Communicator& comm, const char* op) {
  throw CommError(
      fmt::format("[rank {}/{}] {} is not supported by the {} "
                  "backend",
                  comm.rank(), comm.size(), op, comm.backend_name()));
}
}  // namespace

void Communicator::DoReduce(const void*, void*, std::size_t, DataType, ReduceOp,
                            int) {
  NotInBackend(*this, "reduce");
}
void Communicator::DoReduceScatter(const void*, void*, std::size_t, DataType,
                                   ReduceOp) {
  NotInBackend(*this, "reduce_scatter");
}
void Communicator::DoGather(const void*, void*, std::size_t, DataType, int) {
  NotInBackend(*this, "gather");
}
void Communicator::DoScatter(const void*, void*, std::size_t, DataType, int) {
  NotInBackend(*this, "scatter");
}
void Communicator::DoAllToAll(const void*, void*, std::size_t, DataType) {
  NotInBackend(*this, "alltoall");
}
void Communicator::DoAllGatherV(const void*, void*,
                                std::span<const std::size_t>, DataType) {
  NotInBackend(*this, "allgatherv");
}
void Communicator::DoAllToAllV(const void*, std::span<const std::size_t>, void*,
                               std::span<const std::size_t>, DataType) {
  NotInBackend(*this, "alltoallv");
}
std::unique_ptr<Communicator> Communicator::DoSplit(int, int) {
  NotInBackend(*this, "split");
}
std::unique_ptr<RequestState> Communicator::DoISend(const void*, std::size_t,
                                                    DataType, int,
                                                    std::uint32_t) {
  NotInBackend(*this, "isend");
}
std::unique_ptr<RequestState> Communicator::DoIRecv(void*, std::size_t,
                                                    DataType, int,
                                                    std::uint32_t) {
  NotInBackend(*this, "irecv");
}
void Communicator::DoAllReduceOutOfPlace(const void* in, void* out,
                                         std::size_t count, DataType type,
                                         ReduceOp op) {
  if (count > 0) std::memmove(out, in, count * SizeOf(type));
  DoAllReduce(out, count, type, op);
}
void Communicator::DoBroadcastOutOfPlace(const void* in, void* out,
                                         std::size_t count, DataType type,
                                         int root) {
  if (rank() == root && count > 0) {
    std::memmove(out, in, count * SizeOf(type));
  }
  DoBroadcast(out, count, type, root);
}

}  // namespace disttest
