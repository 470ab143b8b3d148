// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// GpuInventory: the GPUs this process may hand to ranks, counted without
// initialising CUDA here (a process that forks ranks must not: a child of a
// process that touched the CUDA driver cannot use CUDA).
//
//   const disttest::GpuInventory& gpus = disttest::Gpus();
//   // gpus.devices == {"0", "1"}: what CUDA_VISIBLE_DEVICES calls them
//   // gpus.str() == "2 GPUs (0,1) from NVML"
//
// Where the list comes from, first match wins:
//   1. DISTTEST_GPUS: a count ("4" means 0..3) or a comma list of
//      CUDA_VISIBLE_DEVICES entries ("3,5"; "3," is GPU 3 alone). For tests
//      of the harness itself, and to pin a rerun to the GPUs of a failure.
//   2. An inherited CUDA_VISIBLE_DEVICES, read the way CUDA reads it: every
//      entry up to the first one CUDA would reject (a negative or out-of-range
//      index, a repeated one, text that is neither an index nor a "GPU-" or
//      "MIG-" identifier). Entries stay as written, so a rank's own list
//      names the same devices whether they were given as indices, UUIDs or
//      MIG instances. "" or "-1" hide every GPU.
//   3. The driver: NVML (libnvidia-ml.so.1, loaded with dlopen in a
//      short-lived child process, so that no driver state or thread stays in
//      this one), else the entries of /proc/driver/nvidia/gpus.
//   4. None: no driver, no GPU.
// The driver's count also bounds the indices of step 2.
#ifndef DISTTEST_GPU_INVENTORY_H_
#define DISTTEST_GPU_INVENTORY_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/env/rank_env.h"

namespace disttest {

struct GpuInventory {
  // Position k is CUDA's device k in this process; each entry is how
  // CUDA_VISIBLE_DEVICES names it ("3", "GPU-8f2e...", "MIG-...").
  std::vector<std::string> devices;
  // "DISTTEST_GPUS", "CUDA_VISIBLE_DEVICES", "NVML",
  // "/proc/driver/nvidia/gpus" or "no NVIDIA driver".
  std::string source;

  int count() const { return static_cast<int>(devices.size()); }
  // "2 GPUs (0,1) from NVML", "no GPU (no NVIDIA driver)".
  std::string str() const;
};

// The GPUs of this process, found once and cached (the first call starts
// the NVML probe: milliseconds, more where the driver initialises the GPUs
// on demand; it gives up after 10 s). Throws ConfigError naming the
// variable when DISTTEST_GPUS is malformed (and again on each call).
const GpuInventory& Gpus();

// The driver's view: how many GPUs it has and who said so.
struct DriverGpus {
  int count = 0;
  std::string source;
};

}  // namespace disttest

#endif  // DISTTEST_GPU_INVENTORY_H_
