// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GPU assignment: which GPUs each rank of a test owns, and the
// CUDA_VISIBLE_DEVICES each rank gets.
//
//   // nullopt outside ctest:
//   auto groups = disttest::ReadCtestResourceGroups();
//   disttest::GpuAssignment a = disttest::AssignGpus(
//       disttest::Gpus(), groups, {.world_size = 2, .gpus_per_rank = 1});
//   if (!a.too_few.empty()) { /* skip: "needs 2 GPUs, found 1 (...)" */ }
//   // a.visible[1] == "1": rank 1's CUDA_VISIBLE_DEVICES
//
// Where a rank's GPUs come from:
//   - CTest resource groups, when ctest ran the test with a resource spec
//     file (CTEST_RESOURCE_GROUP_COUNT and friends are set). Group i is rank
//     i's (register the test with RESOURCE_GROUPS "N,gpus:1", or
//     "N,gpus:1,gpus:1" for two GPUs a rank; disttest_discover_tests() does),
//     or a single group holding every rank's GPUs is split in rank order.
//     Every id of a group is kept. An id is the position of a GPU in this
//     process's inventory (so under an inherited CUDA_VISIBLE_DEVICES=4,5,
//     id 1 is GPU 5), as disttest_resource_spec writes them.
//   - Else the inventory in order: rank r owns devices [r*g, r*g + g).
// Policies (NCCL's IPC between ranks needs the peers' GPUs visible; older
// NCCL versions cannot use CUDA IPC when each process sees only its own GPU
// and fall back to slower shared-memory or network transports):
//   kOwnOnly (default): the rank sees only its own GPUs; it uses device 0.
//   kAllRotated: the rank sees every GPU of the inventory, its own first and
//     the others in rotated order after them; it still uses device 0.
#ifndef DISTTEST_GPU_ASSIGNMENT_H_
#define DISTTEST_GPU_ASSIGNMENT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/env/rank_env.h"
#include "disttest/gpu/inventory.h"

namespace disttest {

enum class GpuVisibility { kOwnOnly, kAllRotated };

// "own-only", "all-rotated".
const char* Name(GpuVisibility visibility);

// CTest's resource groups of `type` ("gpus"), as ctest gave them to this
// process: groups[i] holds the ids of group i's `type` entries, in order.
// nullopt when ctest gave none (CTEST_RESOURCE_GROUP_COUNT unset, or no
// group lists `type`). Strict: a malformed variable is a ConfigError that
// names it ("CTEST_RESOURCE_GROUP_0_GPUS='0': each entry must be
// id:<id>,slots:<n>").
std::optional<std::vector<std::vector<std::string>>> ReadCtestResourceGroups(
    const EnvLookup& lookup = {}, std::string_view type = "gpus");

struct GpuRequest {
  int world_size = 1;
  int gpus_per_rank = 1;
  GpuVisibility visibility = GpuVisibility::kOwnOnly;
  // More ranks than GPUs: from the inventory, rank r owns the g GPUs from
  // r*g on, round-robin (it needs g GPUs there; CTest's groups are taken
  // as they are).
  bool share = false;
};

struct GpuAssignment {
  // Set when the machine has too few GPUs for the request (and the rest is
  // empty): "needs 8 GPUs (4 ranks x 2), found 2: 0,1 (NVML)",
  // "needs 2 GPUs, found 0 (no NVIDIA driver)".
  std::string too_few;
  // Per rank: the inventory entries it owns.
  std::vector<std::vector<std::string>> own;
  // Per rank: its CUDA_VISIBLE_DEVICES.
  std::vector<std::string> visible;
  // "CTest resource groups" or the inventory's source.
  std::string source;
  // The most ranks that own one GPU: 1 unless GPUs are shared.
  int ranks_per_gpu = 1;

  // "rank 0: 0, rank 1: 1 (CTest resource groups)"; "rank 0: 0, rank 1: 0
  // (NVML; 2 ranks share a GPU)".
  std::string str() const;
};

// Throws ConfigError when CTest's groups do not fit the request (a wrong
// number of groups or of GPUs in a group, an id that is not a visible GPU,
// one GPU given to two ranks).
GpuAssignment AssignGpus(
    const GpuInventory& inventory,
    const std::optional<std::vector<std::vector<std::string>>>& groups,
    const GpuRequest& request);

}  // namespace disttest

#endif  // DISTTEST_GPU_ASSIGNMENT_H_
