// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/plan/gpu_placement.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/own_files.h"
#include "disttest/comm/create.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "disttest/gpu/assignment.h"
#include "disttest/gpu/inventory.h"
#include "env/internal_names.h"
#include "env/text.h"

namespace disttest::internal {

int ResolveBackend(Options& options, int world_size) {
  if (options.gpus_per_rank && *options.gpus_per_rank < 0) {
    throw ConfigError(
        fmt::format("options().gpus_per_rank is {}; it must be >= 0",
                    *options.gpus_per_rank));
  }
  switch (options.backend) {
    case Backend::kGloo:
      return options.gpus_per_rank.value_or(0);
    case Backend::kNccl:
      if (options.gpus_per_rank.value_or(1) == 0) {
        throw ConfigError(
            "backend nccl needs a GPU per rank, but options().gpus_per_rank "
            "is 0");
      }
      return options.gpus_per_rank.value_or(1);
    case Backend::kAuto: {
      int wanted = options.gpus_per_rank.value_or(1);
      if (wanted > 0 && NcclBuilt() && Gpus().count() >= world_size * wanted) {
        options.backend = Backend::kNccl;
        return wanted;
      }
      options.backend = Backend::kGloo;
      return 0;
    }
  }
  throw ConfigError(fmt::format("options().backend has the unknown value {}",
                                static_cast<int>(options.backend)));
}

namespace {

// The GPUs a rank of a test with `options` asks for, wherever it runs: as
// ResolveBackend, but kAuto asks for its GPUs whenever disttest has NCCL
// (the machine that lists may not be the one that runs).
int ListedGpusPerRank(const Options& options) {
  if (options.backend == Backend::kAuto) {
    return NcclBuilt() ? std::max(0, options.gpus_per_rank.value_or(1)) : 0;
  }
  Options copy = options;
  return ResolveBackend(copy, 1);
}

}  // namespace

std::string PlaceOnGpus(TestSpec& spec, int gpus_per_rank) {
  spec.child_env.emplace_back(env::kInternalBackend,
                              Name(spec.options.backend));
  if (gpus_per_rank == 0) return "";
  GpuAssignment a = AssignGpus(Gpus(), ReadCtestResourceGroups(),
                               {.world_size = spec.world_size,
                                .gpus_per_rank = gpus_per_rank,
                                .visibility = spec.options.gpu_visibility});
  if (!a.too_few.empty()) return a.too_few;
  spec.visible_devices = a.visible;
  spec.gpus = a.str();
  std::vector<std::string> all;
  for (const auto& own : a.own) all.insert(all.end(), own.begin(), own.end());
  spec.gpus_rerun = fmt::format("{}", fmt::join(all, ","));
  // One numeric GPU would read as a count: "3," is the list of GPU 3.
  if (all.size() == 1 && IsDigits(all.front())) {
    spec.gpus_rerun += ",";
  }
  return "";
}

bool GpusRequired() {
  const char* value = std::getenv(env::kRequireGpus);
  if (value == nullptr || *value == '\0') return false;
  return ParseIntVariable(env::kRequireGpus, value, 0, 1) == 1;
}

bool ListResources(const std::string& name, int ranks, const Options& options) {
  const char* path = std::getenv(env::kListResources);
  if (path == nullptr || *path == '\0') return false;
  std::string line =
      fmt::format("{} {} {}\n", name, ranks, ListedGpusPerRank(options));
  std::string why;
  const int fd = CreateOwnFile(path, /*append=*/true, &why);
  if (fd < 0) {
    throw Error(fmt::format("{}={}: {}", env::kListResources, path, why));
  }
  if (write(fd, line.data(), line.size()) !=
      static_cast<ssize_t>(line.size())) {
    int error = errno;
    close(fd);
    throw Error(fmt::format("cannot write {}={}: {}", env::kListResources, path,
                            std::strerror(error)));
  }
  close(fd);
  return true;
}

}  // namespace disttest::internal
