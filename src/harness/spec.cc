// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/spec.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace disttest::internal {

std::string RankLabel(const TestSpec& spec, int rank) {
  if (spec.fixture.empty()) {
    return fmt::format("[rank {}/{}]", rank, spec.world_size);
  }
  return fmt::format("[{} rank {}/{}]", spec.fixture, rank, spec.world_size);
}

std::vector<std::string> ChangedOptions(const Options& before,
                                        const Options& after) {
  std::vector<std::string> changed;
  const auto note = [&](bool differs, const char* name) {
    if (differs) changed.push_back(name);
  };
  const auto parallel = [](const std::optional<ParallelConfig>& p) {
    return p ? std::optional(
                   std::tuple(p->tensor, p->pipeline, p->data, p->zero1))
             : std::nullopt;
  };
  note(before.backend != after.backend, "backend");
  note(before.launch != after.launch, "launch");
  note(before.timeout != after.timeout, "timeout");
  note(before.init_distributed != after.init_distributed, "init_distributed");
  note(before.skip_policy != after.skip_policy, "skip_policy");
  note(before.failure_grace != after.failure_grace, "failure_grace");
  note(before.master_addr != after.master_addr, "master_addr");
  note(parallel(before.parallel) != parallel(after.parallel), "parallel");
  note(before.seed != after.seed, "seed");
  note(before.gpus_per_rank != after.gpus_per_rank, "gpus_per_rank");
  note(before.gpu_visibility != after.gpu_visibility, "gpu_visibility");
  note(before.share_gpus != after.share_gpus, "share_gpus");
  note(before.reuse_workers != after.reuse_workers, "reuse_workers");
  note(before.compare_calls != after.compare_calls, "compare_calls");
  note(before.process_only != after.process_only, "process_only");
  return changed;
}

}  // namespace disttest::internal
