// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Registered with disttest_discover_tests(), run by
// `ctest --resource-spec-file` with DISTTEST_GPUS standing in for the GPUs:
// each rank checks that its CUDA_VISIBLE_DEVICES holds exactly the GPUs of
// its own CTest resource group.
#include <disttest/disttest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) {
    parts.push_back(part);
  }
  return parts;
}

// CTEST_RESOURCE_GROUP_<rank>_GPUS ("id:2,slots:1;id:0,slots:1") mapped
// through the GPU list DISTTEST_GPUS names: "GPU-c,GPU-a".
std::string GroupDevices(int rank) {
  std::vector<std::string> gpus = Split(std::getenv("DISTTEST_GPUS"), ',');
  std::string name = "CTEST_RESOURCE_GROUP_" + std::to_string(rank) + "_GPUS";
  const char* entries = std::getenv(name.c_str());
  if (entries == nullptr) return name + " is not set";
  std::string devices;
  for (const std::string& entry : Split(entries, ';')) {
    std::size_t id = std::stoul(entry.substr(3, entry.find(',') - 3));
    devices += (devices.empty() ? "" : ",") + gpus.at(id);
  }
  return devices;
}

class ResourceGroups : public disttest::DistributedTest {
 protected:
  // Gloo ranks that own GPUs: what a GPU test gets, without needing one.
  ResourceGroups() { options().gpus_per_rank = 1; }

  void CheckOwnGroup() {
    const char* count = std::getenv("CTEST_RESOURCE_GROUP_COUNT");
    if (count == nullptr || std::getenv("DISTTEST_GPUS") == nullptr) {
      GTEST_SKIP() << "runs under ctest --resource-spec-file, with "
                      "DISTTEST_GPUS";
    }
    // disttest_discover_tests registered "<ranks>,gpus:1...".
    EXPECT_EQ(std::atoi(count), world_size());
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    ASSERT_NE(visible, nullptr);
    EXPECT_EQ(visible, GroupDevices(rank()));
  }
};

DIST_TEST_F(ResourceGroups, EachRankGetsItsGroup, 1, 2, 3) { CheckOwnGroup(); }

class TwoGpusEach : public ResourceGroups {
 protected:
  TwoGpusEach() { options().gpus_per_rank = 2; }
};

DIST_TEST_F(TwoGpusEach, EachRankGetsBothGpusOfItsGroup, 2) {
  CheckOwnGroup();
  EXPECT_EQ(Split(std::getenv("CUDA_VISIBLE_DEVICES"), ',').size(), 2u);
}

// A DIST_TEST_P's tests ("Counts/SweepGroups.EachRankGetsItsGroup/2ranks/0")
// are distributed tests to disttest_discover_tests too.
class SweepGroups : public ResourceGroups,
                    public ::testing::WithParamInterface<int> {};

DIST_TEST_P(SweepGroups, EachRankGetsItsGroup, 2) {
  CheckOwnGroup();
  EXPECT_GE(GetParam(), 1);
}

INSTANTIATE_TEST_SUITE_P(Counts, SweepGroups, ::testing::Values(1, 2));

// More ranks than GPUs, sharing: a group for each GPU there is, the ranks
// round-robin on them (rank r in group r % groups).
class SharedGroups : public ResourceGroups {
 protected:
  SharedGroups() { options().share_gpus = true; }
};

DIST_TEST_F(SharedGroups, RanksTakeTheGroupsInTurn, 6) {
  const char* count = std::getenv("CTEST_RESOURCE_GROUP_COUNT");
  if (count == nullptr || std::getenv("DISTTEST_GPUS") == nullptr) {
    GTEST_SKIP() << "runs under ctest --resource-spec-file, with "
                    "DISTTEST_GPUS";
  }
  const int groups = std::atoi(count);
  EXPECT_EQ(groups,
            static_cast<int>(Split(std::getenv("DISTTEST_GPUS"), ',').size()));
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  ASSERT_NE(visible, nullptr);
  ASSERT_GT(groups, 0);
  EXPECT_EQ(visible, GroupDevices(rank() % groups));
}

}  // namespace
