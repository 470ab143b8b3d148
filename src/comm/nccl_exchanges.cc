// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// NcclCommunicator's collectives that NCCL has no call for (gather,
// scatter, alltoall, allgatherv, alltoallv): each is one group of sends
// and receives, run as the others are (Run(): checked, staged, waited).
#include <fmt/format.h>

#include <span>
#include <string>
#include <vector>

#include "comm/nccl_communicator_impl.h"
#include "comm/nccl_group.h"
#include "comm/peer_errors.h"
#include "disttest/error.h"

namespace disttest {

void NcclCommunicator::Impl::gather(const void* in, void* out,
                                    std::size_t count, DataType type,
                                    int root) {
  const CollectiveCall call = CollectiveCall::Gather(count, type, root);
  const std::string what = fmt::format(
      "{} (root {}) failed", DescribeNcclOp("gather", count, type), root);
  CheckRootFor(what, "gather", call, root);
  const std::size_t bytes = count * SizeOf(type);
  const bool is_root = rank_ == root;
  Run(what, type, call, in, bytes, is_root ? out : nullptr,
      is_root ? bytes * static_cast<std::size_t>(size_) : 0,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; is_root && q < size_ && !Failed(r); ++q) {
            r = ncclRecv(dout + static_cast<std::size_t>(q) * bytes, count,
                         NcclType(type), q, comm, stream_);
          }
          if (!Failed(r)) {
            r = ncclSend(din, count, NcclType(type), root, comm, stream_);
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::scatter(const void* in, void* out,
                                     std::size_t count, DataType type,
                                     int root) {
  const CollectiveCall call = CollectiveCall::Scatter(count, type, root);
  const std::string what = fmt::format(
      "{} (root {}) failed", DescribeNcclOp("scatter", count, type), root);
  CheckRootFor(what, "scatter", call, root);
  const std::size_t bytes = count * SizeOf(type);
  const bool is_root = rank_ == root;
  Run(what, type, call, is_root ? in : nullptr,
      is_root ? bytes * static_cast<std::size_t>(size_) : 0, out, bytes,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; is_root && q < size_ && !Failed(r); ++q) {
            r = ncclSend(din + static_cast<std::size_t>(q) * bytes, count,
                         NcclType(type), q, comm, stream_);
          }
          if (!Failed(r)) {
            r = ncclRecv(dout, count, NcclType(type), root, comm, stream_);
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::alltoall(const void* in, void* out,
                                      std::size_t count, DataType type) {
  const std::size_t bytes = count * SizeOf(type);
  const std::size_t all = bytes * static_cast<std::size_t>(size_);
  const std::string what =
      fmt::format("{} failed", DescribeNcclOp("alltoall", count, type));
  Run(what, type, CollectiveCall::AllToAll(count, type), in, all, out, all,
      [&](ncclComm_t comm, const char* din, char* dout) {
        if (count == 0) return ncclSuccess;
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          for (int q = 0; q < size_ && !Failed(r); ++q) {
            const std::size_t at = static_cast<std::size_t>(q) * bytes;
            r = ncclSend(din + at, count, NcclType(type), q, comm, stream_);
            if (!Failed(r)) {
              r = ncclRecv(dout + at, count, NcclType(type), q, comm, stream_);
            }
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::allgatherv(const void* in, void* out,
                                        std::span<const std::size_t> counts,
                                        DataType type) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  const CollectiveCall call =
      CollectiveCall::AllGatherV(type, counts.data(), counts.size());
  const std::string what =
      fmt::format("{} failed", DescribeNcclOp("allgatherv", total, type));
  if (counts.size() != static_cast<std::size_t>(size_)) {
    const std::string differ =
        arena_ != nullptr
            ? internal::CompareBeforeRefusing([&] { CheckCall(what, call); })
            : std::string();
    throw CommError(fmt::format(
        "[rank {}/{}] allgatherv: {} counts given, one per rank is {}{}", rank_,
        size_, counts.size(), size_, differ));
  }
  const std::size_t size = SizeOf(type);
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  Run(what, type, call, in, mine * size, out, total * size,
      [&](ncclComm_t comm, const char* din, char* dout) {
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          std::size_t at = 0;
          for (int q = 0; q < size_ && !Failed(r); ++q) {
            const std::size_t theirs = counts[static_cast<std::size_t>(q)];
            if (mine > 0) {
              r = ncclSend(din, mine, NcclType(type), q, comm, stream_);
            }
            if (!Failed(r) && theirs > 0) {
              r = ncclRecv(dout + at * size, theirs, NcclType(type), q, comm,
                           stream_);
            }
            at += theirs;
          }
          return r;
        });
      });
}

void NcclCommunicator::Impl::alltoallv(const void* in,
                                       std::span<const std::size_t> in_counts,
                                       void* out,
                                       std::span<const std::size_t> out_counts,
                                       DataType type) {
  const std::size_t world = static_cast<std::size_t>(size_);
  const CollectiveCall call = CollectiveCall::AllToAllV(type);
  std::size_t sent = 0, received = 0;
  for (std::size_t c : in_counts) sent += c;
  for (std::size_t c : out_counts) received += c;
  const std::string what =
      fmt::format("alltoallv of {} {} sent failed", sent, Name(type));
  if (in_counts.size() != world || out_counts.size() != world) {
    const std::string differ =
        arena_ != nullptr
            ? internal::CompareBeforeRefusing([&] { CheckCall(what, call); })
            : std::string();
    throw CommError(fmt::format(
        "[rank {}/{}] alltoallv: {} in_counts and {} out_counts given, one "
        "per rank is {}{}",
        rank_, size_, in_counts.size(), out_counts.size(), world, differ));
  }
  // Every rank's counts, both ways: every rank checks every pair, and all
  // fail alike.
  std::vector<std::uint64_t> mine(2 * world);
  for (std::size_t q = 0; q < world; ++q) {
    mine[q] = in_counts[q];
    mine[world + q] = out_counts[q];
  }
  std::vector<std::uint64_t> all(2 * world * world);
  Run(what, DataType::kUint64, call, mine.data(), mine.size() * 8, all.data(),
      all.size() * 8, [&](ncclComm_t comm, const char* din, char* dout) {
        return ncclAllGather(din, dout, 2 * world, ncclUint64, comm, stream_);
      });
  for (std::size_t a = 0; a < world; ++a) {
    for (std::size_t b = 0; b < world; ++b) {
      const std::uint64_t sends = all[a * 2 * world + b];
      const std::uint64_t expects = all[b * 2 * world + world + a];
      if (sends != expects) {
        Fail(what, fmt::format("rank {} sends {} x {} to rank {}, which "
                               "expects {}",
                               a, sends, Name(type), b, expects));
      }
    }
  }
  const std::size_t size = SizeOf(type);
  Run(what, type, call, in, sent * size, out, received * size,
      [&](ncclComm_t comm, const char* din, char* dout) {
        return Group([&] {
          ncclResult_t r = ncclSuccess;
          std::size_t from = 0, to = 0;
          for (std::size_t q = 0; q < world && !Failed(r); ++q) {
            const int peer = static_cast<int>(q);
            if (in_counts[q] > 0) {
              r = ncclSend(din + from * size, in_counts[q], NcclType(type),
                           peer, comm, stream_);
            }
            if (!Failed(r) && out_counts[q] > 0) {
              r = ncclRecv(dout + to * size, out_counts[q], NcclType(type),
                           peer, comm, stream_);
            }
            from += in_counts[q];
            to += out_counts[q];
          }
          return r;
        });
      });
}

}  // namespace disttest
