// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GPU placement of a spawned test, decided in the parent before any rank
// starts (and without initialising CUDA there):
//
//   int gpus = ResolveBackend(spec.options, spec.world_size);  // kAuto -> ...
//   if (std::string why = PlaceOnGpus(spec, gpus); !why.empty()) {
//     // skip, or fail under DISTTEST_REQUIRE_GPUS=1: "needs 4 GPUs, found 2"
//   }
//   // spec.visible_devices[r]: rank r's CUDA_VISIBLE_DEVICES
#ifndef DISTTEST_SRC_HARNESS_PLAN_GPU_PLACEMENT_H_
#define DISTTEST_SRC_HARNESS_PLAN_GPU_PLACEMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "disttest/harness/options.h"
#include "harness/spec.h"

namespace disttest::internal {

// Settles options.backend to kGloo or kNccl and returns the GPUs each rank
// owns: options.gpus_per_rank, else 1 on NCCL and 0 on Gloo. kAuto is NCCL
// when disttest was built with it and the machine has gpus_per_rank
// (default 1) GPUs for each of `world_size` ranks, else Gloo without GPUs.
// Throws ConfigError for a negative count, or NCCL without GPUs.
int ResolveBackend(Options& options, int world_size);

// Gives each rank of `spec` its GPUs (CTest's resource groups, else the
// inventory in order): fills spec.visible_devices, gpus and gpus_rerun, and
// tells the ranks the backend. Returns why the machine cannot run it ("needs 4
// GPUs, found 2
// (...)"), else "". Throws ConfigError when CTest's groups do not fit.
std::string PlaceOnGpus(TestSpec& spec, int gpus_per_rank);

// DISTTEST_REQUIRE_GPUS=1: too few GPUs is a failure, not a skip.
bool GpusRequired();

// options().share_gpus, or DISTTEST_SHARE_GPUS=1 (a ConfigError naming it
// for any value but 0 and 1).
bool SharesGpus(const Options& options);

// What rank `rank` of a test whose ranks share GPUs (ranks_per_gpu > 1)
// tells NCCL: NCCL_MULTI_RANK_GPU_ENABLE=1 where the NCCL linked in has it
// (2.30 and later), else a NCCL_HOSTID of the rank's own (`test_id` makes
// it the test's). Empty for an NCCL without either, and without NCCL.
std::vector<std::pair<std::string, std::string>> NcclSharedGpuEnv(
    int rank, const std::string& test_id);

// Whether NCCL, as linked in, has its multi-rank-GPU mode (2.30+).
bool NcclHasMultiRankGpu();

// DISTTEST_LIST_RESOURCES: appends "<name> <ranks> <gpus per rank>" to the
// file it names and returns true; false when it is unset. The GPUs are those
// a rank asks for wherever it runs (kAuto: one when disttest has NCCL).
bool ListResources(const std::string& name, int ranks, const Options& options);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_PLAN_GPU_PLACEMENT_H_
