// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// TestSpec: what the parent knows about the distributed test it runs (its
// name, place, world size, options, fixture, GPUs), and the label its
// ranks' messages carry.
#ifndef DISTTEST_SRC_HARNESS_SPEC_H_
#define DISTTEST_SRC_HARNESS_SPEC_H_

#include <string>
#include <utility>
#include <vector>

#include "disttest/harness/options.h"

namespace disttest::internal {

// What the parent knows about the test it runs.
struct TestSpec {
  std::string name;   // "Suite.Name/2ranks"
  std::string suite;  // gtest's test suite: "Suite"
  std::string file;   // Where DIST_TEST_F stands.
  int line = 0;
  int world_size = 0;
  Options options;
  // Set when the ranks run a DistributedFixture before the test: its name,
  // which labels messages ("[SavedShards rank 1/2]"), output and logs.
  std::string fixture;
  // Added to each rank's environment (kExec ranks read their set-up there).
  std::vector<std::pair<std::string, std::string>> child_env;
  // Per rank: its CUDA_VISIBLE_DEVICES; empty: the ranks inherit it.
  std::vector<std::string> visible_devices;
  // When the ranks own GPUs: who owns which ("rank 0: 3, rank 1: 5 (CTest
  // resource groups)"), and the DISTTEST_GPUS value ("3,5") that gives a
  // rerun the same ones.
  std::string gpus;
  std::string gpus_rerun;
  // Per rank, when set: more of its environment (NCCL's way to share a GPU,
  // its debug log's file).
  std::vector<std::vector<std::pair<std::string, std::string>>> rank_env;
};

// "[rank 1/4]", or "[SavedShards rank 1/2]" for a fixture's rank.
std::string RankLabel(const TestSpec& spec, int rank);

// The fields of `after` that differ from `before` ("timeout",
// "skip_policy"), in declaration order.
std::vector<std::string> ChangedOptions(const Options& before,
                                        const Options& after);

}  // namespace disttest::internal

#endif  // DISTTEST_SRC_HARNESS_SPEC_H_
