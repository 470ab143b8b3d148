// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// disttest_resource_spec: writes a CTest resource spec file for this
// machine's GPUs, as disttest counts them (DISTTEST_GPUS, an inherited
// CUDA_VISIBLE_DEVICES, NVML or /proc/driver/nvidia/gpus; no CUDA):
//
//   disttest_resource_spec -o gpus.json
//   ctest --resource-spec-file gpus.json -j8
//
// Each GPU gets one slot, so that ctest never gives one GPU to two ranks
// (NCCL rejects that: "Duplicate GPU detected"). Ids are positions in the
// list disttest sees, which is how the harness reads them back.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "disttest/gpu/inventory.h"

namespace {

constexpr char kUsage[] =
    "usage: disttest_resource_spec [-o FILE] [--count]\n"
    "Writes a CTest resource spec file (JSON) with one \"gpus\" entry of one\n"
    "slot for each GPU this machine shows disttest, to FILE or stdout.\n"
    "--count prints only how many GPUs that is.\n";

std::string SpecJson(const disttest::GpuInventory& gpus) {
  std::string entries;
  for (int i = 0; i < gpus.count(); ++i) {
    entries += fmt::format("{}\n        {{\"id\": \"{}\", \"slots\": 1}}",
                           i == 0 ? "" : ",", i);
  }
  if (!entries.empty()) entries += "\n      ";
  return fmt::format(
      "{{\n  \"version\": {{\"major\": 1, \"minor\": 0}},\n"
      "  \"local\": [\n    {{\n      \"gpus\": [{}]\n    }}\n  ]\n}}\n",
      entries);
}

}  // namespace

int main(int argc, char** argv) {
  std::string output;
  bool count_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "-o" || arg == "--output") && i + 1 < argc) {
      output = argv[++i];
    } else if (arg == "--count") {
      count_only = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "disttest_resource_spec: unknown argument '%s'\n%s",
                   arg.c_str(), kUsage);
      return 2;
    }
  }
  try {
    const disttest::GpuInventory& gpus = disttest::Gpus();
    if (count_only) {
      std::printf("%d\n", gpus.count());
      return 0;
    }
    std::string json = SpecJson(gpus);
    if (output.empty()) {
      std::fputs(json.c_str(), stdout);
    } else {
      std::ofstream out(output);
      out << json;
      if (!out.flush()) {
        std::fprintf(stderr, "disttest_resource_spec: cannot write %s: %s\n",
                     output.c_str(), std::strerror(errno));
        return 1;
      }
    }
    std::fprintf(stderr, "disttest_resource_spec: %s\n", gpus.str().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttest_resource_spec: %s\n", e.what());
    return 1;
  }
  return 0;
}
