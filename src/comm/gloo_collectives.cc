// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GlooCommunicator's collectives (gloo_communicator.cc creates it): the
// three that move data (allreduce, broadcast, allgather), through the host
// arena or Gloo, and the others made of them through scratch buffers.
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/gloo_communicator_impl.h"
#include "comm/host_arena.h"
#include "comm/peer_errors.h"
#include "comm/reduce_elements.h"
#include "comm/visit_type.h"
#include "disttest/error.h"

namespace disttest {
namespace {

// Allreduces of up to this many bytes use Gloo's bcube algorithm (recursive
// halving and doubling: 2 log2(W) steps) instead of its ring (2 (W - 1)
// steps). On loopback a step is mostly latency, so small buffers gain; the
// ring's pipelined segments win from about 1 MiB at 4 ranks
// (bench/per_test_cost, 4 and 8 ranks: 8 floats 1.0 -> 0.5 and 1.9 -> 1.1 ms,
// 256 KiB 1.4 -> 1.1 and 4.5 -> 2.7 ms, 1 MiB 2.6 -> 3.3 and 6.4 -> 5.8 ms).
constexpr std::size_t kBcubeMaxBytes = 256 * 1024;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn ReduceFunction(ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    // On the bytes (0 or 1): "or" is max, "and" min.
    return ReduceFunction<std::uint8_t>(internal::LogicalOp(op));
  } else {
    // disttest's own arithmetic, not gloo::sum and the like: the same
    // result as the host arena's (integers wrap without overflowing a
    // signed type; min and max keep a NaN wherever it is).
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:  // The division comes after (DivideBy).
        return &internal::ReduceBuffers<T, ReduceOp::kSum>;
      case ReduceOp::kProd:
        return &internal::ReduceBuffers<T, ReduceOp::kProd>;
      case ReduceOp::kMin:
        return &internal::ReduceBuffers<T, ReduceOp::kMin>;
      case ReduceOp::kMax:
        return &internal::ReduceBuffers<T, ReduceOp::kMax>;
    }
    return nullptr;
  }
}

}  // namespace

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
  throw CommError(fmt::format("[rank {}/{}] {}: invalid root rank {}{}", rank,
                              size, op, root,
                              internal::CompareBeforeRefusing([&] {
                                Guard(what, [&] { CheckCall(call); });
                              })));
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
    const std::string differ = internal::CompareBeforeRefusing(
        [&] { impl_->Guard(what, [&] { impl_->CheckCall(call); }); });
    throw CommError(fmt::format(
        "[rank {}/{}] allgatherv: {} counts given, one per rank is {}{}",
        impl_->rank, impl_->size, counts.size(), impl_->size, differ));
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
    const std::string differ = internal::CompareBeforeRefusing(
        [&] { impl_->Guard(what, [&] { impl_->CheckCall(call); }); });
    throw CommError(fmt::format(
        "[rank {}/{}] alltoallv: {} in_counts and {} out_counts given, one "
        "per rank is {}{}",
        impl_->rank, impl_->size, in_counts.size(), out_counts.size(), world,
        differ));
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

}  // namespace disttest
