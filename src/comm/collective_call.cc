// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// CollectiveCall (collective_call.h): the hash of a call's counts and the
// text a report shows for a call.
#include "disttest/comm/collective_call.h"

#include <fmt/format.h>

#include <string>

#include "comm/ledger.h"

namespace disttest {

std::uint64_t CollectiveCall::CountsHash(const std::size_t* counts,
                                         std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ n;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= counts[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string CollectiveCall::str() const {
  switch (op) {
    case Op::kBarrier:
      return "barrier()";
    case Op::kAllReduce:
      return fmt::format("allreduce({} x {}, {})", count, Name(type),
                         Name(reduce));
    case Op::kBroadcast:
      return fmt::format("broadcast({} x {}, root {})", count, Name(type),
                         root);
    case Op::kAllGather:
      return fmt::format("allgather({} x {})", count, Name(type));
    case Op::kReduce:
      return fmt::format("reduce({} x {}, {}, root {})", count, Name(type),
                         Name(reduce), root);
    case Op::kReduceScatter:
      return fmt::format("reduce_scatter({} x {}, {})", count, Name(type),
                         Name(reduce));
    case Op::kGather:
      return fmt::format("gather({} x {}, root {})", count, Name(type), root);
    case Op::kScatter:
      return fmt::format("scatter({} x {}, root {})", count, Name(type), root);
    case Op::kAllToAll:
      return fmt::format("alltoall({} x {})", count, Name(type));
    case Op::kAllGatherV:
      return fmt::format("allgatherv({} x {}, counts {})", count, Name(type),
                         internal::CountsText(first_counts.data(), ranks,
                                              static_cast<std::uint32_t>(
                                                  shape ^ (shape >> 32))));
    case Op::kAllToAllV:
      return fmt::format("alltoallv({})", Name(type));
    case Op::kSplit:
      return "split()";
    case Op::kEndOfTest:
      return "no collective (its body has returned)";
  }
  return fmt::format("unknown collective {}", static_cast<int>(op));
}

}  // namespace disttest
