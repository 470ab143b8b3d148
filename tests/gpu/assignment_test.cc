// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/gpu/assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "disttest/error.h"

namespace disttest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Groups = std::vector<std::vector<std::string>>;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

GpuInventory Inventory(std::vector<std::string> devices,
                       std::string source = "NVML") {
  return GpuInventory{std::move(devices), std::move(source)};
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// --- CTest's variables ---

TEST(CtestResourceGroups, AbsentWithoutTheCount) {
  EXPECT_EQ(ReadCtestResourceGroups(Env({})), std::nullopt);
  // What ctest sets, under a spec file, for a test without RESOURCE_GROUPS.
  EXPECT_EQ(ReadCtestResourceGroups(Env({{"CTEST_RESOURCE_GROUP_COUNT", "0"}})),
            std::nullopt);
}

TEST(CtestResourceGroups, OneGroupPerRank) {
  auto groups = ReadCtestResourceGroups(Env({
      {"CTEST_RESOURCE_GROUP_COUNT", "2"},
      {"CTEST_RESOURCE_GROUP_0", "gpus"},
      {"CTEST_RESOURCE_GROUP_0_GPUS", "id:1,slots:1"},
      {"CTEST_RESOURCE_GROUP_1", "crypto_chips,gpus"},
      {"CTEST_RESOURCE_GROUP_1_GPUS", "id:3,slots:1"},
      {"CTEST_RESOURCE_GROUP_1_CRYPTO_CHIPS", "id:card0,slots:2"},
  }));
  ASSERT_TRUE(groups);
  EXPECT_THAT(*groups, ElementsAre(ElementsAre("1"), ElementsAre("3")));
}

TEST(CtestResourceGroups, EveryIdOfAGroupIsKept) {
  // "2,gpus:1,gpus:1": two GPUs a group, ';'-separated (rapids-cmake's
  // runner keeps only the last one of these).
  auto groups = ReadCtestResourceGroups(Env({
      {"CTEST_RESOURCE_GROUP_COUNT", "1"},
      {"CTEST_RESOURCE_GROUP_0", "gpus"},
      {"CTEST_RESOURCE_GROUP_0_GPUS", "id:0,slots:1;id:2,slots:1"},
  }));
  ASSERT_TRUE(groups);
  EXPECT_THAT(*groups, ElementsAre(ElementsAre("0", "2")));
}

TEST(CtestResourceGroups, GroupsWithoutGpusAreNotAGpuRequest) {
  EXPECT_EQ(ReadCtestResourceGroups(Env({
                {"CTEST_RESOURCE_GROUP_COUNT", "1"},
                {"CTEST_RESOURCE_GROUP_0", "crypto_chips"},
                {"CTEST_RESOURCE_GROUP_0_CRYPTO_CHIPS", "id:c,slots:1"},
            })),
            std::nullopt);
}

TEST(CtestResourceGroups, MalformedVariablesAreNamed) {
  auto read = [](std::map<std::string, std::string> vars) {
    return ErrorOf([&] { ReadCtestResourceGroups(Env(vars)); });
  };
  EXPECT_EQ(read({{"CTEST_RESOURCE_GROUP_COUNT", "two"}}),
            "environment variable CTEST_RESOURCE_GROUP_COUNT='two' is not an "
            "integer");
  EXPECT_EQ(read({{"CTEST_RESOURCE_GROUP_COUNT", "2"},
                  {"CTEST_RESOURCE_GROUP_0", "gpus"},
                  {"CTEST_RESOURCE_GROUP_0_GPUS", "id:0,slots:1"}}),
            "CTEST_RESOURCE_GROUP_COUNT=2, but CTEST_RESOURCE_GROUP_1 is not "
            "set");
  EXPECT_EQ(read({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                  {"CTEST_RESOURCE_GROUP_0", "gpus"}}),
            "CTEST_RESOURCE_GROUP_0='gpus' lists gpus, but "
            "CTEST_RESOURCE_GROUP_0_GPUS is not set");
  // Strict, as ctest writes it: id first, then slots, nothing else.
  for (const char* bad :
       {"0", "id:0", "slots:1,id:0", "id:0,slots:0", "id:GPU0,slots:1",
        "id:0,slots:1;", "id:,slots:1", "id:0,slots:1,x:2"}) {
    EXPECT_THAT(read({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                      {"CTEST_RESOURCE_GROUP_0", "gpus"},
                      {"CTEST_RESOURCE_GROUP_0_GPUS", bad}}),
                HasSubstr("CTEST_RESOURCE_GROUP_0_GPUS='" + std::string(bad) +
                          "': each entry must be id:<id>,slots:<n>"))
        << bad;
  }
}

// --- Assignment ---

TEST(AssignGpus, RanksTakeTheInventoryInOrder) {
  GpuAssignment a = AssignGpus(Inventory({"0", "1", "2", "3"}), std::nullopt,
                               {.world_size = 2, .gpus_per_rank = 2});
  EXPECT_EQ(a.too_few, "");
  EXPECT_THAT(a.own, ElementsAre(ElementsAre("0", "1"), ElementsAre("2", "3")));
  EXPECT_THAT(a.visible, ElementsAre("0,1", "2,3"));
  EXPECT_EQ(a.str(), "rank 0: 0,1, rank 1: 2,3 (NVML)");
}

TEST(AssignGpus, AllRotatedShowsEveryGpuOwnFirst) {
  GpuAssignment one = AssignGpus(Inventory({"0", "1", "2", "3"}), std::nullopt,
                                 {.world_size = 4,
                                  .gpus_per_rank = 1,
                                  .visibility = GpuVisibility::kAllRotated});
  EXPECT_THAT(one.visible,
              ElementsAre("0,1,2,3", "1,2,3,0", "2,3,0,1", "3,0,1,2"));
  GpuAssignment two = AssignGpus(Inventory({"0", "1", "2", "3"}), std::nullopt,
                                 {.world_size = 2,
                                  .gpus_per_rank = 2,
                                  .visibility = GpuVisibility::kAllRotated});
  EXPECT_THAT(two.visible, ElementsAre("0,1,2,3", "2,3,0,1"));
}

TEST(AssignGpus, InheritedNamesPassThrough) {
  GpuAssignment a = AssignGpus(
      Inventory({"GPU-aa", "GPU-bb", "MIG-cc"}, "CUDA_VISIBLE_DEVICES"),
      std::nullopt, {.world_size = 3, .gpus_per_rank = 1});
  EXPECT_THAT(a.visible, ElementsAre("GPU-aa", "GPU-bb", "MIG-cc"));
}

TEST(AssignGpus, TooFewSaysHowManyAndWhere) {
  EXPECT_EQ(AssignGpus(Inventory({"0", "1"}), std::nullopt,
                       {.world_size = 4, .gpus_per_rank = 1})
                .too_few,
            "needs 4 GPUs, found 2: 0,1 (NVML); options().share_gpus (or "
            "DISTTEST_SHARE_GPUS=1) places the ranks on the GPUs there are");
  EXPECT_EQ(AssignGpus(Inventory({"0", "1", "2"}), std::nullopt,
                       {.world_size = 2, .gpus_per_rank = 2})
                .too_few,
            "needs 4 GPUs (2 ranks x 2), found 3: 0,1,2 (NVML); "
            "options().share_gpus (or DISTTEST_SHARE_GPUS=1) places the ranks "
            "on the GPUs there are");
  // One GPU cannot hold a rank of two, shared or not.
  EXPECT_EQ(AssignGpus(Inventory({"0"}), std::nullopt,
                       {.world_size = 2, .gpus_per_rank = 2, .share = true})
                .too_few,
            "needs 4 GPUs (2 ranks x 2), found 1: 0 (NVML)");
  GpuAssignment none = AssignGpus(Inventory({}, "no NVIDIA driver"),
                                  std::nullopt, {.world_size = 2});
  EXPECT_EQ(none.too_few, "needs 2 GPUs, found 0 (no NVIDIA driver)");
  EXPECT_TRUE(none.visible.empty());
}

TEST(AssignGpus, SharedGpusGoRoundRobin) {
  GpuAssignment four =
      AssignGpus(Inventory({"0", "1"}), std::nullopt,
                 {.world_size = 4, .gpus_per_rank = 1, .share = true});
  EXPECT_EQ(four.too_few, "");
  EXPECT_THAT(four.visible, ElementsAre("0", "1", "0", "1"));
  EXPECT_EQ(four.ranks_per_gpu, 2);
  EXPECT_EQ(four.str(),
            "rank 0: 0, rank 1: 1, rank 2: 0, rank 3: 1 (NVML; 2 ranks share "
            "a GPU)");
  // Three on two: one GPU holds two of them.
  GpuAssignment three =
      AssignGpus(Inventory({"0", "1"}), std::nullopt,
                 {.world_size = 3, .gpus_per_rank = 1, .share = true});
  EXPECT_THAT(three.visible, ElementsAre("0", "1", "0"));
  EXPECT_EQ(three.ranks_per_gpu, 2);
  // Two a rank on three GPUs: a rank's own are different GPUs.
  GpuAssignment pairs =
      AssignGpus(Inventory({"0", "1", "2"}), std::nullopt,
                 {.world_size = 2, .gpus_per_rank = 2, .share = true});
  EXPECT_THAT(pairs.own,
              ElementsAre(ElementsAre("0", "1"), ElementsAre("2", "0")));
  // Enough GPUs: shared or not, each rank its own.
  GpuAssignment enough =
      AssignGpus(Inventory({"0", "1"}), std::nullopt,
                 {.world_size = 2, .gpus_per_rank = 1, .share = true});
  EXPECT_THAT(enough.visible, ElementsAre("0", "1"));
  EXPECT_EQ(enough.ranks_per_gpu, 1);
}

// Under ctest, a test that shares gets as many groups as there are GPUs
// (disttest_discover_tests): its ranks take them round-robin. Without
// sharing, too few groups are an error that names them.
TEST(AssignGpus, SharedCtestGroupsGoRoundRobin) {
  const GpuInventory gpus = Inventory({"0", "1", "2", "3"});
  GpuAssignment a =
      AssignGpus(gpus, Groups{{"2"}, {"0"}},
                 {.world_size = 5, .gpus_per_rank = 1, .share = true});
  EXPECT_THAT(a.visible, ElementsAre("2", "0", "2", "0", "2"));
  EXPECT_EQ(a.ranks_per_gpu, 3);
  EXPECT_EQ(a.str(),
            "rank 0: 2, rank 1: 0, rank 2: 2, rank 3: 0, rank 4: 2 (CTest "
            "resource groups; 3 ranks share a GPU)");
  GpuAssignment pairs =
      AssignGpus(gpus, Groups{{"3", "1"}},
                 {.world_size = 2, .gpus_per_rank = 2, .share = true});
  EXPECT_THAT(pairs.own,
              ElementsAre(ElementsAre("3", "1"), ElementsAre("3", "1")));
  EXPECT_THAT(
      [&] {
        AssignGpus(gpus, Groups{{"2"}, {"0"}},
                   {.world_size = 5, .gpus_per_rank = 1});
      },
      ThrowsMessage<ConfigError>(HasSubstr("CTest gave 2 resource groups")));
  // Two groups on one GPU are still refused.
  EXPECT_THAT(
      [&] {
        AssignGpus(gpus, Groups{{"2"}, {"2"}},
                   {.world_size = 3, .gpus_per_rank = 1, .share = true});
      },
      ThrowsMessage<ConfigError>(HasSubstr("CTest gave GPU 2 to rank 0 and "
                                           "rank 1")));
}

TEST(AssignGpus, CtestGroupIdsIndexTheInheritedList) {
  // ctest ran under CUDA_VISIBLE_DEVICES=4,5,6,7: id 1 is GPU 5.
  GpuInventory inherited =
      Inventory({"4", "5", "6", "7"}, "CUDA_VISIBLE_DEVICES");
  GpuAssignment a = AssignGpus(inherited, Groups{{"1"}, {"3"}},
                               {.world_size = 2, .gpus_per_rank = 1});
  EXPECT_THAT(a.visible, ElementsAre("5", "7"));
  EXPECT_EQ(a.str(), "rank 0: 5, rank 1: 7 (CTest resource groups)");
}

TEST(AssignGpus, CtestGroupsOfTwoGpusEach) {
  GpuInventory gpus = Inventory({"0", "1", "2", "3"});
  GpuAssignment own = AssignGpus(gpus, Groups{{"3", "0"}, {"2", "1"}},
                                 {.world_size = 2, .gpus_per_rank = 2});
  EXPECT_THAT(own.visible, ElementsAre("3,0", "2,1"));
  GpuAssignment all = AssignGpus(gpus, Groups{{"3", "0"}, {"2", "1"}},
                                 {.world_size = 2,
                                  .gpus_per_rank = 2,
                                  .visibility = GpuVisibility::kAllRotated});
  EXPECT_THAT(all.visible, ElementsAre("3,0,1,2", "2,1,3,0"));
}

TEST(AssignGpus, OneCtestGroupIsSplitOverTheRanks) {
  GpuAssignment a =
      AssignGpus(Inventory({"0", "1", "2", "3"}), Groups{{"2", "0", "3", "1"}},
                 {.world_size = 2, .gpus_per_rank = 2});
  EXPECT_THAT(a.visible, ElementsAre("2,0", "3,1"));
}

TEST(AssignGpus, ASmallerStepUsesTheFirstGroups) {
  // A 1-rank fixture of a 2-rank test registered with "2,gpus:1".
  GpuAssignment a = AssignGpus(Inventory({"0", "1"}), Groups{{"1"}, {"0"}},
                               {.world_size = 1, .gpus_per_rank = 1});
  EXPECT_THAT(a.visible, ElementsAre("1"));
}

TEST(AssignGpus, CtestGroupsThatDoNotFitAreErrors) {
  GpuInventory gpus = Inventory({"0", "1", "2", "3"});
  EXPECT_EQ(ErrorOf([&] {
              AssignGpus(gpus, Groups{{"0"}, {"1"}},
                         {.world_size = 4, .gpus_per_rank = 1});
            }),
            "CTest gave 2 resource groups (with 1, 1 GPUs) to a test of 4 "
            "ranks with 1 GPU each: register it with RESOURCE_GROUPS "
            "\"4,gpus:1\" (disttest_discover_tests does)");
  EXPECT_THAT(ErrorOf([&] {
                AssignGpus(gpus, Groups{{"0"}, {"1"}},
                           {.world_size = 2, .gpus_per_rank = 2});
              }),
              HasSubstr("CTest resource group 0 holds 1 GPU (0), but each "
                        "rank uses 2 (options().gpus_per_rank)"));
  EXPECT_THAT(ErrorOf([&] {
                AssignGpus(gpus, Groups{{"0"}, {"9"}},
                           {.world_size = 2, .gpus_per_rank = 1});
              }),
              HasSubstr("CTest resource group 1 names GPU '9', but this "
                        "process has 4 GPUs (0,1,2,3) from NVML"));
  EXPECT_EQ(ErrorOf([&] {
              AssignGpus(gpus, Groups{{"2"}, {"2"}},
                         {.world_size = 2, .gpus_per_rank = 1});
            }),
            "CTest gave GPU 2 to rank 0 and rank 1: give every GPU "
            "\"slots\": 1 in the resource spec file (disttest_resource_spec "
            "does), so that no two ranks share one");
  EXPECT_THAT(
      ErrorOf([&] { AssignGpus(gpus, std::nullopt, {.world_size = 0}); }),
      HasSubstr("both must be >= 1"));
}

}  // namespace
}  // namespace disttest
