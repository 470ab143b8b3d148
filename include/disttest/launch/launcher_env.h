// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// LauncherEnv: who this process is, as the launcher that started it says.
//
//   disttest::LauncherEnv me = disttest::DetectLauncherEnv();
//   // me.launcher == "slurm", me.rank, me.world_size, me.master_addr, ...
//
// Launchers, in precedence order (the first whose rank variable is set
// wins, and every field then comes from that launcher; nesting is normal:
// torchrun under srun sets both, and torchrun's variables are the ranks).
// Each as rank; world size; local rank; local size:
//   torchrun (and disttest's own ranks): RANK; WORLD_SIZE; LOCAL_RANK;
//     LOCAL_WORLD_SIZE or LOCAL_SIZE.
//   openmpi: OMPI_COMM_WORLD_RANK; OMPI_COMM_WORLD_SIZE;
//     OMPI_COMM_WORLD_LOCAL_RANK; OMPI_COMM_WORLD_LOCAL_SIZE.
//   mpich (Hydra, Intel MPI): PMI_RANK; PMI_SIZE; MPI_LOCALRANKID;
//     MPI_LOCALNRANKS.
//   mvapich2: MV2_COMM_WORLD_RANK; MV2_COMM_WORLD_SIZE;
//     MV2_COMM_WORLD_LOCAL_RANK; MV2_COMM_WORLD_LOCAL_SIZE.
//   slurm (srun): SLURM_PROCID; SLURM_STEP_NUM_TASKS, SLURM_NTASKS or
//     SLURM_NPROCS; SLURM_LOCALID; SLURM_STEP_TASKS_PER_NODE at
//     SLURM_NODEID, SLURM_NTASKS_PER_NODE, or SLURM_TASKS_PER_NODE at
//     SLURM_NODEID. Slurm counts only in a task srun started (SLURM_STEP_ID,
//     SLURM_STEPID or SLURM_STEP_NUM_TASKS set): a batch script's own shell
//     is not a rank.
//
// The store's address: MASTER_ADDR, else (in a Slurm step, whichever
// launcher) the first host of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or
// SLURM_NODELIST, else 127.0.0.1 when every rank is on this node (local size
// == world size). Its port: DISTTEST_MASTER_PORT; else MASTER_PORT (plus
// one under torchrun, whose agent serves its own store on MASTER_PORT);
// else (in a Slurm job) 15000 + the last four digits of SLURM_JOB_ID, plus
// the step id; else 29500 (torchrun's default).
//
// The store's token, which every client of the job's store presents and
// a client from outside the job cannot: DISTTEST_STORE_TOKEN (the same
// secret on every rank, at most 1024 bytes), else one derived from the
// secret Open MPI's mpirun gives each process of the job
// (OMPI_MCA_orte_precondition_transports), else none: torchrun and srun
// pass no secret, and their job's store takes any client.
//
// A missing or malformed variable is a ConfigError naming the launcher and
// the variables: "launcher openmpi: OMPI_COMM_WORLD_SIZE is not set".
#ifndef DISTTEST_LAUNCH_LAUNCHER_ENV_H_
#define DISTTEST_LAUNCH_LAUNCHER_ENV_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/env/rank_env.h"

namespace disttest {

struct LauncherEnv {
  std::string launcher;  // "torchrun", "openmpi", "mpich", "mvapich2", "slurm"
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;  // Unknown: launch() counts hostnames.
  std::optional<int> local_size;
  std::string master_addr;
  int master_port = 0;
  std::string store_token;  // Empty: the store takes any client.
};

// Throws ConfigError when no launcher is found, listing what was looked
// for, or when the found launcher's variables are missing or malformed.
LauncherEnv DetectLauncherEnv(const EnvLookup& lookup = {});

}  // namespace disttest

#endif  // DISTTEST_LAUNCH_LAUNCHER_ENV_H_
