// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Launcher detection: which launcher wins when several are nested, what each
// one's variables give, Slurm hostlists and task counts, and the errors for
// missing or malformed variables.
#include "disttest/launch/launcher_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "disttest/error.h"
#include "launch/slurm.h"

namespace disttest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Vars = std::map<std::string, std::string>;

LauncherEnv Detect(const Vars& vars) {
  return DetectLauncherEnv([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string ErrorOf(const Vars& vars) {
  try {
    Detect(vars);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LauncherEnvTest, Torchrun) {
  LauncherEnv e = Detect({{"RANK", "5"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "4"},
                          {"MASTER_ADDR", "10.1.2.3"},
                          {"MASTER_PORT", "29400"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 29400);
}

TEST(LauncherEnvTest, OpenMpiOnOneNodeNeedsNoMasterAddress) {
  LauncherEnv e = Detect({{"OMPI_COMM_WORLD_RANK", "2"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(LauncherEnvTest, MpiAcrossNodesAsksForMasterAddress) {
  EXPECT_EQ(
      ErrorOf({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "2"}}),
      "launcher mpich: MASTER_ADDR is not set, and the ranks are not "
      "all on this node; set MASTER_ADDR to the host of rank 0");
  LauncherEnv e = Detect({{"PMI_RANK", "3"},
                          {"PMI_SIZE", "4"},
                          {"MASTER_ADDR", "node1"},
                          {"MASTER_PORT", "1234"}});
  EXPECT_EQ(e.launcher, "mpich");
  EXPECT_FALSE(e.local_rank.has_value());
  EXPECT_EQ(e.master_addr, "node1");
}

TEST(LauncherEnvTest, Mvapich2) {
  LauncherEnv e = Detect({{"MV2_COMM_WORLD_RANK", "1"},
                          {"MV2_COMM_WORLD_SIZE", "2"},
                          {"MV2_COMM_WORLD_LOCAL_RANK", "1"},
                          {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(e.launcher, "mvapich2");
  EXPECT_EQ(e.local_rank, 1);
}

TEST(LauncherEnvTest, SlurmTakesTheFirstHostAndAPortFromTheJob) {
  LauncherEnv e = Detect({{"SLURM_PROCID", "5"},
                          {"SLURM_STEP_NUM_TASKS", "8"},
                          {"SLURM_NTASKS_PER_NODE", "8"},  // the job's
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_NODEID", "2"},
                          {"SLURM_STEP_TASKS_PER_NODE", "2(x3),2"},
                          {"SLURM_JOB_NODELIST", "gpu[01-04]"},
                          {"SLURM_STEP_NODELIST", "gpu[02-04,07]"},
                          {"SLURM_JOB_ID", "1234567"}});
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.master_addr, "gpu02");  // The step's nodelist wins.
  EXPECT_EQ(e.master_port, 15000 + 4567);
}

TEST(LauncherEnvTest, SlurmFallsBackThroughItsAliases) {
  LauncherEnv e = Detect({{"SLURM_PROCID", "0"},
                          {"SLURM_STEP_ID", "0"},
                          {"SLURM_NPROCS", "2"},
                          {"SLURM_NODELIST", "n7"},
                          {"MASTER_PORT", "2000"}});
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.master_addr, "n7");
  EXPECT_EQ(e.master_port, 2000);  // MASTER_PORT wins over the job id.
}

// One rank is on this node: no MASTER_ADDR needed (torchrun --nproc 1 sets
// it anyway; a hand-set RANK=0 WORLD_SIZE=1 may not).
TEST(LauncherEnvTest, OneRankNeedsNoMasterAddress) {
  EXPECT_EQ(Detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).master_addr,
            "127.0.0.1");
}

TEST(LauncherEnvTest, SlurmBatchScriptIsNoRank) {
  // sbatch's own shell: SLURM_PROCID=0 and the job's task count, no step.
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "4"},
                       {"SLURM_JOB_ID", "77"}}),
              HasSubstr("no launcher found"));
}

// torchrun's ranks in an salloc or sbatch shell inherit the allocation's
// SLURM_JOB_* variables, but are in no step: those must not choose the
// store's host and port (trial 11: gpu007, a node of the allocation, for
// ranks that all ran here).
TEST(LauncherEnvTest, AnAllocationsVariablesOutsideAStepChooseNothing) {
  LauncherEnv e = Detect({{"RANK", "1"},
                          {"WORLD_SIZE", "2"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"SLURM_JOB_ID", "123456"},
                          {"SLURM_JOB_NODELIST", "gpu[007-010,12]"},
                          {"SLURM_NODELIST", "gpu[007-010,12]"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

// A node's task count comes from a list, not a number: out of the world's
// range it says so (trial 11: "local 0 of 0", and 999999 in a world of 1).
TEST(LauncherEnvTest, SlurmTasksPerNodeOutOfRangeIsAnError) {
  for (const char* tasks : {"0", "999999"}) {
    EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"},
                         {"SLURM_STEP_NUM_TASKS", "1"},
                         {"SLURM_STEP_ID", "0"},
                         {"SLURM_NODEID", "0"},
                         {"SLURM_STEP_TASKS_PER_NODE", tasks},
                         {"MASTER_ADDR", "127.0.0.1"}}),
                HasSubstr(std::string("SLURM_STEP_TASKS_PER_NODE='") + tasks +
                          "' gives this node " + tasks +
                          " tasks, out of range [1, 1]"));
  }
}

TEST(LauncherEnvTest, ConcurrentSlurmStepsGetTheirOwnPorts) {
  Vars step0 = {{"SLURM_PROCID", "0"},
                {"SLURM_STEP_ID", "0"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_NODELIST", "n1"},
                {"SLURM_JOB_ID", "1234567"}};
  Vars step1 = step0;
  step1["SLURM_STEP_ID"] = "1";
  EXPECT_EQ(Detect(step0).master_port, 15000 + 4567);
  EXPECT_EQ(Detect(step1).master_port, 15000 + 4568);
}

TEST(LauncherEnvTest, TorchrunsAgentKeepsMasterPortSoTheStoreTakesTheNext) {
  Vars torchrun = {{"RANK", "0"},
                   {"WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "29500"},
                   {"TORCHELASTIC_RUN_ID", "none"}};
  EXPECT_EQ(Detect(torchrun).master_port, 29501);
  torchrun["DISTTEST_MASTER_PORT"] = "31000";
  EXPECT_EQ(Detect(torchrun).master_port, 31000);
}

TEST(LauncherEnvTest, TorchrunUnderSrunIsTorchrun) {
  // srun starts one torchrun agent per node: SLURM_PROCID is the agent's
  // index, RANK the worker's.
  LauncherEnv e = Detect({{"SLURM_PROCID", "1"},
                          {"SLURM_NTASKS", "2"},
                          {"RANK", "7"},
                          {"WORLD_SIZE", "8"},
                          {"MASTER_ADDR", "a"},
                          {"MASTER_PORT", "1"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.world_size, 8);
}

TEST(LauncherEnvTest, OpenMpiWinsOverSlurm) {
  LauncherEnv e = Detect({{"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "4"},
                          {"OMPI_COMM_WORLD_RANK", "3"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"SLURM_NODELIST", "x1"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.master_port, 29500);
}

TEST(LauncherEnvTest, ErrorsNameTheLauncherAndTheVariable) {
  EXPECT_THAT(ErrorOf({}), HasSubstr("no launcher found in the environment: "
                                     "set RANK and WORLD_SIZE (torchrun)"));
  EXPECT_EQ(ErrorOf({{"OMPI_COMM_WORLD_RANK", "0"}}),
            "launcher openmpi: OMPI_COMM_WORLD_RANK is set, but "
            "OMPI_COMM_WORLD_SIZE is not");
  EXPECT_THAT(ErrorOf({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
              HasSubstr("launcher torchrun: environment variable RANK=4 is "
                        "out of range [0, 3]"));
  EXPECT_THAT(ErrorOf({{"RANK", "x"}, {"WORLD_SIZE", "4"}}),
              HasSubstr("RANK='x' is not an integer"));
  EXPECT_THAT(ErrorOf({{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "h"},
                       {"MASTER_PORT", "70000"}}),
              HasSubstr("MASTER_PORT=70000 is out of range [1, 65535]"));
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"},
                       {"SLURM_STEP_ID", "0"},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_NODELIST", "gpu[3-1]"}}),
              HasSubstr("launcher slurm: Slurm nodelist 'gpu[3-1]': range "
                        "3-1 runs backwards"));
}

// The store's token: DISTTEST_STORE_TOKEN as given; else derived from
// Open MPI's job secret (the same for every rank of the job, another for
// another job, and never the secret itself); else none.
TEST(LauncherEnvTest, StoreTokenComesFromTheUserOrOpenMpisJobSecret) {
  const Vars mpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"MASTER_ADDR", "node1"}};
  EXPECT_EQ(Detect(mpi).store_token, "");
  Vars job = mpi;
  job["OMPI_MCA_orte_precondition_transports"] = "d1587a7a752c80ab-1a20";
  const std::string token = Detect(job).store_token;
  EXPECT_EQ(token.size(), 5u + 32u) << token;
  EXPECT_THAT(token, ::testing::StartsWith("ompi-"));
  EXPECT_THAT(token, ::testing::Not(HasSubstr("d1587a7a")));
  Vars rank0 = job;
  rank0["OMPI_COMM_WORLD_RANK"] = "0";
  EXPECT_EQ(Detect(rank0).store_token, token);
  Vars other = job;
  other["OMPI_MCA_orte_precondition_transports"] = "d1587a7a752c80ab-1a21";
  EXPECT_NE(Detect(other).store_token, token);
  Vars given = job;
  given["DISTTEST_STORE_TOKEN"] = "our secret";
  EXPECT_EQ(Detect(given).store_token, "our secret");
  Vars torchrun = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node1"}};
  EXPECT_EQ(Detect(torchrun).store_token, "");
  torchrun["DISTTEST_STORE_TOKEN"] = std::string(1025, 'x');
  EXPECT_EQ(ErrorOf(torchrun),
            "launcher torchrun: DISTTEST_STORE_TOKEN is longer than 1024 "
            "bytes");
}

// Two mpirun jobs at once both took 29500 (neither sets MASTER_PORT): the
// port comes from Open MPI's job secret, the same on every rank of a job.
TEST(LauncherEnvTest, OpenMpiJobsWithoutMasterPortGetAPortOfTheirOwn) {
  Vars job = {
      {"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "node1"},
      {"OMPI_MCA_orte_precondition_transports", "d1587a7a752c80ab-1a20"}};
  const int port = Detect(job).master_port;
  EXPECT_GE(port, 20000);
  EXPECT_LT(port, 30000);
  Vars rank0 = job;
  rank0["OMPI_COMM_WORLD_RANK"] = "0";
  EXPECT_EQ(Detect(rank0).master_port, port);
  Vars other = job;
  other["OMPI_MCA_orte_precondition_transports"] = "77c0ffee00000000-1a21";
  EXPECT_NE(Detect(other).master_port, port);
  Vars given = job;
  given["MASTER_PORT"] = "29400";
  EXPECT_EQ(Detect(given).master_port, 29400);
  job.erase("OMPI_MCA_orte_precondition_transports");
  EXPECT_EQ(Detect(job).master_port, 29500);
}

TEST(SlurmNodelistTest, Expands) {
  EXPECT_THAT(ExpandSlurmNodelist("node1"), ElementsAre("node1"));
  EXPECT_THAT(ExpandSlurmNodelist("gnode[10,20,25,37]"),
              ElementsAre("gnode10", "gnode20", "gnode25", "gnode37"));
  EXPECT_THAT(
      ExpandSlurmNodelist("node[007-010,12]"),
      ElementsAre("node007", "node008", "node009", "node010", "node12"));
  EXPECT_THAT(ExpandSlurmNodelist("node[8-10]"),
              ElementsAre("node8", "node9", "node10"));
  EXPECT_THAT(ExpandSlurmNodelist("gpu[1-2],cpu3"),
              ElementsAre("gpu1", "gpu2", "cpu3"));
  EXPECT_THAT(ExpandSlurmNodelist("a[1,3]-b[2-3]"),
              ElementsAre("a1-b2", "a1-b3", "a3-b2", "a3-b3"));
  EXPECT_THAT(ExpandSlurmNodelist("rack[0-1]n[00-01].example.org"),
              ElementsAre("rack0n00.example.org", "rack0n01.example.org",
                          "rack1n00.example.org", "rack1n01.example.org"));
}

TEST(SlurmNodelistTest, RejectsMalformedLists) {
  for (const char* bad : {"node[1-2", "node1-2]", "node[a-b]", "node[]",
                          "node[[1]]", "", "a,,b", "node[5-2]"}) {
    EXPECT_THROW(ExpandSlurmNodelist(bad), ConfigError) << bad;
  }
  EXPECT_THROW(ExpandSlurmNodelist("n[0-99999]"), ConfigError);
  EXPECT_THROW(ExpandSlurmNodelist("a[0-999]b[0-999]"), ConfigError);
}

TEST(SlurmTasksTest, ReadsRepeatCounts) {
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 3), 1);
  EXPECT_EQ(SlurmTasksOnNode("4", 0), 4);
  EXPECT_THROW(SlurmTasksOnNode("2(x3),1", 4), ConfigError);
  EXPECT_THROW(SlurmTasksOnNode("2(x3,1", 0), ConfigError);
  EXPECT_THROW(SlurmTasksOnNode("two", 0), ConfigError);
}

}  // namespace
}  // namespace disttest
