// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// The pieces of Gpus() (disttest/gpu/inventory.h), each testable alone.
//
//   GpuInventory g = internal::MakeGpuInventory(lookup, DriverGpus{4, "test"});
#ifndef DISTTEST_SRC_GPU_INVENTORY_INTERNAL_H_
#define DISTTEST_SRC_GPU_INVENTORY_INTERNAL_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttest/gpu/inventory.h"

namespace disttest {

namespace internal {

// The inventory from an environment and the driver's answer (nullopt: no
// driver). Pure; Gpus() is this with the real environment and driver.
GpuInventory MakeGpuInventory(const EnvLookup& lookup,
                              const std::optional<DriverGpus>& driver);

// CUDA_VISIBLE_DEVICES as CUDA reads it (see the top of this file);
// `driver_count` bounds numeric entries when known.
std::vector<std::string> ParseVisibleDevices(std::string_view value,
                                             std::optional<int> driver_count);

// The number of GPU entries in a /proc/driver/nvidia/gpus-like directory;
// nullopt when it does not exist.
std::optional<int> CountDriverGpuDirectory(const std::filesystem::path& dir);

// Asks the driver: NVML in a child process (when this process runs one
// thread), nvidia-smi -L (when it runs more), else /proc/driver/nvidia/gpus.
std::optional<DriverGpus> ProbeDriverGpus();

}  // namespace internal
}  // namespace disttest

#endif  // DISTTEST_SRC_GPU_INVENTORY_INTERNAL_H_
