// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Slurm's compressed lists, as DetectLauncherEnv (launcher_env.h) reads
// them:
//
//   ExpandSlurmNodelist("node[1-2]");   // node1, node2
//   SlurmTasksOnNode("2(x3),1", 3);     // 1
#ifndef DISTTEST_SRC_LAUNCH_SLURM_H_
#define DISTTEST_SRC_LAUNCH_SLURM_H_

#include <string>
#include <string_view>
#include <vector>

namespace disttest {

// Expands a Slurm hostlist: "node[007-009,12],gpu1" -> node007, node008,
// node009, node12, gpu1; several bracket groups in one name multiply out.
// Throws ConfigError on malformed lists and above 65536 names.
std::vector<std::string> ExpandSlurmNodelist(std::string_view list);

// The task count of node `node` in a Slurm tasks-per-node list such as
// "2(x3),1"; throws ConfigError when malformed or out of range.
int SlurmTasksOnNode(std::string_view tasks_per_node, int node);

}  // namespace disttest

#endif  // DISTTEST_SRC_LAUNCH_SLURM_H_
