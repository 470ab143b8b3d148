// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The rank that the calling code runs as, for code under test that has no
// fixture at hand and today reads RANK or WORLD_SIZE from the environment:
//
//   void Shard::Load() {
//     const disttest::RankInfo& me = disttest::CurrentRank();
//     Read(me.rank, me.world_size);
//     if (me.comm != nullptr) me.comm->barrier();
//   }
//
// It is set in a rank's SetUpRank(), body and TearDownRank() (and a
// DistributedFixture's Run()), in every launch mode: forked, re-executed and
// pooled ranks, and ranks that a launcher started (torchrun, srun, mpirun),
// and from every thread of the rank. Outside, CurrentRank() throws
// disttest::Error saying where it may be called; CurrentRankOrNull() asks.
#ifndef DISTTEST_CURRENT_RANK_H_
#define DISTTEST_CURRENT_RANK_H_

namespace disttest {

class Communicator;

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // Among the ranks of this host.
  int local_size = 1;
  // The test's communicator; null where options().init_distributed is false.
  Communicator* comm = nullptr;
};

// The calling code's rank; throws disttest::Error outside a rank's test.
const RankInfo& CurrentRank();

// The same, or null outside a rank's test.
const RankInfo* CurrentRankOrNull();

}  // namespace disttest

#endif  // DISTTEST_CURRENT_RANK_H_
