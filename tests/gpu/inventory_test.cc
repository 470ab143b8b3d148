// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/gpu/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "disttest/error.h"
#include "gpu/inventory_internal.h"

namespace disttest {
namespace {

using internal::MakeGpuInventory;
using internal::ParseVisibleDevices;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const DriverGpus kFourFromNvml{4, "NVML"};

TEST(GpuInventory, DriverCountWithoutVisibleDevices) {
  GpuInventory gpus = MakeGpuInventory(Env({}), kFourFromNvml);
  EXPECT_THAT(gpus.devices, ElementsAre("0", "1", "2", "3"));
  EXPECT_EQ(gpus.source, "NVML");
  EXPECT_EQ(gpus.str(), "4 GPUs (0,1,2,3) from NVML");
}

TEST(GpuInventory, NoDriverMeansNoGpuEvenWhenVisibleDevicesAreSet) {
  GpuInventory gpus =
      MakeGpuInventory(Env({{"CUDA_VISIBLE_DEVICES", "0"}}), std::nullopt);
  EXPECT_THAT(gpus.devices, IsEmpty());
  EXPECT_EQ(gpus.str(),
            "no GPU (no NVIDIA driver; CUDA_VISIBLE_DEVICES='0' names none)");
  EXPECT_EQ(MakeGpuInventory(Env({}), std::nullopt).str(),
            "no GPU (no NVIDIA driver)");
}

TEST(GpuInventory, InheritedVisibleDevicesKeepTheirNames) {
  GpuInventory gpus = MakeGpuInventory(
      Env({{"CUDA_VISIBLE_DEVICES", "3, 1,GPU-8f2e-aa,MIG-1c2d"}}),
      kFourFromNvml);
  EXPECT_THAT(gpus.devices, ElementsAre("3", "1", "GPU-8f2e-aa", "MIG-1c2d"));
  EXPECT_EQ(gpus.source, "CUDA_VISIBLE_DEVICES");
  // A list that hides every GPU is shown as it was written.
  EXPECT_EQ(
      MakeGpuInventory(Env({{"CUDA_VISIBLE_DEVICES", "-1"}}), kFourFromNvml)
          .str(),
      "no GPU (CUDA_VISIBLE_DEVICES='-1')");
}

TEST(GpuInventory, VisibleDevicesStopWhereCudaStops) {
  // CUDA uses the entries before the first one it rejects.
  EXPECT_THAT(ParseVisibleDevices("0,1,-1,2", 4), ElementsAre("0", "1"));
  EXPECT_THAT(ParseVisibleDevices("2,7,1", 4), ElementsAre("2"));
  EXPECT_THAT(ParseVisibleDevices("1,1,2", 4), ElementsAre("1"));
  // One GPU written two ways is a repeat (trial 11: "0,00" was two GPUs),
  // and an index is kept as its number.
  EXPECT_THAT(ParseVisibleDevices("0,00,1", 4), ElementsAre("0"));
  EXPECT_THAT(ParseVisibleDevices("01,2", 4), ElementsAre("1", "2"));
  EXPECT_THAT(ParseVisibleDevices("0,gpu0", 4), ElementsAre("0"));
  EXPECT_THAT(ParseVisibleDevices("-1", 4), IsEmpty());
  EXPECT_THAT(ParseVisibleDevices("", 4), IsEmpty());
  EXPECT_THAT(ParseVisibleDevices("  ", 4), IsEmpty());
  // Without the driver's count, indices are not bounded.
  EXPECT_THAT(ParseVisibleDevices("2,7", std::nullopt), ElementsAre("2", "7"));
}

TEST(GpuInventory, OverrideTakesACountOrAList) {
  GpuInventory counted =
      MakeGpuInventory(Env({{"DISTTEST_GPUS", "3"}}), std::nullopt);
  EXPECT_THAT(counted.devices, ElementsAre("0", "1", "2"));
  EXPECT_EQ(counted.source, "DISTTEST_GPUS");
  GpuInventory listed = MakeGpuInventory(
      Env({{"DISTTEST_GPUS", "GPU-a, GPU-b"}, {"CUDA_VISIBLE_DEVICES", "0"}}),
      kFourFromNvml);
  EXPECT_THAT(listed.devices, ElementsAre("GPU-a", "GPU-b"));
  EXPECT_THAT(
      MakeGpuInventory(Env({{"DISTTEST_GPUS", "0"}}), kFourFromNvml).devices,
      IsEmpty());
  // A trailing comma makes one number a list: GPU 3, not three GPUs.
  EXPECT_THAT(
      MakeGpuInventory(Env({{"DISTTEST_GPUS", "3,"}}), std::nullopt).devices,
      ElementsAre("3"));
}

// A count is of the GPUs the process may use: an inherited
// CUDA_VISIBLE_DEVICES's first (trial 11: DISTTEST_GPUS=2 under
// CUDA_VISIBLE_DEVICES=4,5 gave the ranks GPUs 0 and 1).
TEST(GpuInventory, ACountIsOfTheInheritedVisibleDevices) {
  GpuInventory two = MakeGpuInventory(
      Env({{"DISTTEST_GPUS", "2"}, {"CUDA_VISIBLE_DEVICES", "4, GPU-b,6"}}),
      std::nullopt);
  EXPECT_THAT(two.devices, ElementsAre("4", "GPU-b"));
  EXPECT_EQ(two.source, "DISTTEST_GPUS of CUDA_VISIBLE_DEVICES");
  // CUDA's reading: up to the first entry it rejects, a repeat included.
  try {
    MakeGpuInventory(
        Env({{"DISTTEST_GPUS", "2"}, {"CUDA_VISIBLE_DEVICES", "4,04,5"}}),
        std::nullopt);
    ADD_FAILURE() << "two GPUs of one written twice";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CUDA_VISIBLE_DEVICES='4,04,5' shows 1"));
  }
  try {
    MakeGpuInventory(
        Env({{"DISTTEST_GPUS", "3"}, {"CUDA_VISIBLE_DEVICES", "4,5,x,7"}}),
        std::nullopt);
    ADD_FAILURE() << "three GPUs of two";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DISTTEST_GPUS=3 asks for 3 GPUs, but "
                                    "CUDA_VISIBLE_DEVICES='4,5,x,7' shows 2"));
  }
  // A list names GPUs as written.
  EXPECT_THAT(MakeGpuInventory(Env({{"DISTTEST_GPUS", "0,1"},
                                    {"CUDA_VISIBLE_DEVICES", "4,5"}}),
                               std::nullopt)
                  .devices,
              ElementsAre("0", "1"));
}

TEST(GpuInventory, MalformedOverrideNamesTheVariable) {
  auto message = [](const char* value) {
    try {
      MakeGpuInventory(Env({{"DISTTEST_GPUS", value}}), std::nullopt);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("0,,1"),
            "environment variable DISTTEST_GPUS='0,,1' is not a GPU count or "
            "a comma list of GPUs: an entry is empty");
  EXPECT_THAT(message("1,2,1"), HasSubstr("'1' is listed twice"));
  EXPECT_THAT(message("99999"), HasSubstr("more than 1024 GPUs"));
  EXPECT_EQ(message("garbage"),
            "environment variable DISTTEST_GPUS='garbage' is not a GPU count "
            "or a comma list of GPUs: 'garbage' is neither a GPU index nor a "
            "GPU-/MIG- UUID");
  EXPECT_THAT(message("0,gpu1"), HasSubstr("'gpu1' is neither"));
  EXPECT_EQ(message("MIG-x,3"), "no error");
}

TEST(GpuInventory, CountsTheDriversDirectory) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("disttest-gpus-" + std::to_string(::getpid()));
  EXPECT_EQ(internal::CountDriverGpuDirectory(dir), std::nullopt);
  std::filesystem::create_directories(dir / "0000:07:00.0");
  std::filesystem::create_directories(dir / "0000:0f:00.0");
  EXPECT_EQ(internal::CountDriverGpuDirectory(dir), 2);
  std::filesystem::remove_all(dir);
}

TEST(GpuInventory, GpusIsCachedAndHonoursTheOverride) {
  // This process has not asked before: the override decides, no probe.
  ASSERT_EQ(::setenv("DISTTEST_GPUS", "2", 1), 0);
  const GpuInventory& first = Gpus();
  ASSERT_EQ(::setenv("DISTTEST_GPUS", "5", 1), 0);
  const GpuInventory& second = Gpus();
  ::unsetenv("DISTTEST_GPUS");
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(second.count(), 2);
}

}  // namespace
}  // namespace disttest
