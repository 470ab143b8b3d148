// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// launch_from_env() under a real launcher: start this program with
//
//   mpirun -np 4 --oversubscribe -x MASTER_PORT=29517 ./launch_from_env
//   srun -n 4 ./launch_from_env
//   torchrun --nproc-per-node 4 --no-python ./launch_from_env
//
// Each process finds its rank from the launcher's variables, joins the
// others (rank 0 hosts the store on MASTER_ADDR:MASTER_PORT), builds the
// tensor 2 x pipeline 2 groups (data = world / 4), and checks that an
// allreduce in each group sums exactly that group's members. A JSON config
// file given as the first argument replaces the built-in one. Exit status:
// 0 when every check passed on this rank, 1 when one failed, 2 when the
// launch itself failed (the message says why).
#include <disttest/launch/launch.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  using disttest::ParallelMode;
  try {
    const disttest::Config config =
        argc > 1 ? disttest::Config::FromFile(argv[1])
                 : disttest::Config::FromJson(
                       R"({"parallel": {"tensor": 2, "pipeline": 2}})");
    disttest::Context ctx =
        disttest::launch_from_env(config, disttest::Backend::kGloo);
    int failures = 0;
    for (ParallelMode mode : disttest::kAllParallelModes) {
      const std::vector<int> members = ctx.layout().group_of(mode, ctx.rank());
      int want = 0;
      for (int m : members) want += m + 1;
      int got = ctx.rank() + 1;
      ctx.group(mode).allreduce(&got, 1, disttest::ReduceOp::kSum);
      const bool ok = got == want;
      failures += ok ? 0 : 1;
      fmt::print("rank {}: {} group {} (rank {} of {}): sum {} {}\n",
                 ctx.rank(), disttest::Name(mode), members, ctx.rank_in(mode),
                 ctx.size(mode), got,
                 ok ? "ok" : fmt::format("WRONG, want {}", want));
    }
    fmt::print("rank {}: local rank {} of {} on this node, tensor seed {}\n",
               ctx.rank(), ctx.local_rank(), ctx.local_size(),
               ctx.seed(ParallelMode::kTensor));
    std::fflush(stdout);
    // Rank 0 hosts the store: everyone leaves together.
    ctx.group(ParallelMode::kGlobal).barrier();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_from_env: %s\n", e.what());
    return 2;
  }
}
