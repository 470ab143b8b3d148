// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/plan/gpu_placement.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
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
    case Backend::kMpi:
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
      const int needed = SharesGpus(options) ? wanted : world_size * wanted;
      if (wanted > 0 && NcclBuilt() && Gpus().count() >= needed) {
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

// Whether the ranks' NCCL logs at INFO or TRACE: NCCL_DEBUG is kept
// (DISTTEST_KEEP_NCCL_DEBUG) and says so. NCCL's warnings alone stay in the
// rank's output, where a failure's report shows them.
bool NcclLogsMuch() {
  const char* level = std::getenv(env::kNcclDebug);
  if (!SetToOne(env::kKeepNcclDebug) || level == nullptr) {
    return false;
  }
  std::string upper(level);
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  return upper == "INFO" || upper == "TRACE";
}

// "<DISTTEST_LOG_DIR>/<test>/rank-2.nccl.log", beside the rank's own log,
// as NCCL_DEBUG_FILE reads it (NCCL expands %h and %p: a % is written %%);
// "" without a log directory, or where NCCL logs little.
std::string NcclLogOf(const TestSpec& spec, int rank) {
  const char* dir = std::getenv(env::kLogDir);
  if (dir == nullptr || *dir == '\0' || !NcclLogsMuch()) return "";
  std::string file = fmt::format("rank-{}.nccl.log", rank);
  if (!spec.fixture.empty()) file = spec.fixture + "-" + file;
  std::string path;
  for (char c : fmt::format("{}/{}/{}", dir, spec.name, file)) {
    path += c;
    if (c == '%') path += '%';
  }
  return path;
}

// How ranks that share GPUs share them, in a note; rank threads that need
// a host id each (NCCL before 2.30) run as processes.
void SayHowRanksShare(TestSpec& spec, int ranks_per_gpu) {
  const bool host_ids = NcclBuilt() && !NcclHasMultiRankGpu();
  std::string how = !NcclBuilt() ? "disttest has no NCCL"
                    : host_ids ? "NCCL over sockets (a NCCL_HOSTID each), for "
                                 "correctness, not speed"
                               : "NCCL_MULTI_RANK_GPU_ENABLE=1";
  // The test's own communicator is not NCCL's (trial 11: a Gloo test's note
  // spoke of NCCL as if it were): NCCL's way is for those the test makes.
  if (NcclBuilt() && spec.options.backend != Backend::kNccl) {
    how = fmt::format(
        "the test's communicator is {}; NCCL communicators it "
        "makes share them so: {}",
        Name(spec.options.backend), how);
  }
  if (host_ids && spec.options.launch == LaunchMode::kThreads) {
    spec.options.launch = LaunchMode::kFork;
    // The ranks read the launch mode again: as processes there too.
    spec.child_env.emplace_back(env::kLaunch, Name(LaunchMode::kFork));
    how += "; as processes, not threads (a host id is per process)";
  }
  std::printf(
      "[ disttest ] note: %s: %d ranks share the GPUs, up to %d a "
      "GPU: %s\n",
      spec.name.c_str(), spec.world_size, ranks_per_gpu, how.c_str());
  std::fflush(stdout);
}

// What the ranks of a test with GPUs tell NCCL: its RAS service off unless
// the user set it (every NCCL 2.24+ process listens on localhost:28028);
// each rank's debug log beside its own; and, where ranks share a GPU,
// NCCL's way to share it.
void TellNccl(TestSpec& spec, int ranks_per_gpu) {
  if (std::getenv(env::kNcclRasEnable) == nullptr &&
      std::getenv(env::kNcclRasAddr) == nullptr) {
    spec.child_env.emplace_back(env::kNcclRasEnable, "0");
  }
  spec.rank_env.assign(static_cast<std::size_t>(spec.world_size), {});
  const std::string test_id = std::to_string(getpid());
  for (int r = 0; r < spec.world_size; ++r) {
    auto& own = spec.rank_env[static_cast<std::size_t>(r)];
    if (std::string log = NcclLogOf(spec, r);
        !log.empty() && std::getenv(env::kNcclDebugFile) == nullptr) {
      own.emplace_back(env::kNcclDebugFile, std::move(log));
    }
    if (ranks_per_gpu > 1) {
      for (auto& kv : NcclSharedGpuEnv(r, test_id)) own.push_back(kv);
    }
  }
  if (ranks_per_gpu > 1) SayHowRanksShare(spec, ranks_per_gpu);
}

// Rank threads share one process, and so what it sees: every rank's GPUs,
// each once, in rank order (then, with kAllRotated, the machine's others);
// a rank thread's device is its first GPU's place there (two threads that
// share a GPU share its place).
void SeeEveryRanksGpus(TestSpec& spec, const GpuAssignment& a) {
  std::vector<std::string> all;
  std::vector<std::size_t> places;
  auto add = [&](const std::string& gpu) {
    if (std::find(all.begin(), all.end(), gpu) == all.end()) all.push_back(gpu);
  };
  for (const auto& own : a.own) {
    for (const std::string& gpu : own) add(gpu);
    if (own.empty()) {  // (AssignGpus gives every rank one at least.)
      places.push_back(0);
      continue;
    }
    places.push_back(static_cast<std::size_t>(
        std::find(all.begin(), all.end(), own.front()) - all.begin()));
  }
  if (spec.options.gpu_visibility == GpuVisibility::kAllRotated) {
    for (const std::string& gpu : Gpus().devices) add(gpu);
  }
  spec.visible_devices.assign(spec.visible_devices.size(),
                              fmt::format("{}", fmt::join(all, ",")));
  spec.child_env.emplace_back(env::kInternalThreadDevices,
                              fmt::format("{}", fmt::join(places, ",")));
}

}  // namespace

std::string PlaceOnGpus(TestSpec& spec, int gpus_per_rank) {
  spec.child_env.emplace_back(env::kInternalBackend,
                              Name(spec.options.backend));
  if (gpus_per_rank == 0) return "";
  GpuAssignment a = AssignGpus(Gpus(), ReadCtestResourceGroups(),
                               {.world_size = spec.world_size,
                                .gpus_per_rank = gpus_per_rank,
                                .visibility = spec.options.gpu_visibility,
                                .share = SharesGpus(spec.options)});
  if (!a.too_few.empty()) return a.too_few;
  spec.visible_devices = a.visible;
  spec.gpus = a.str();
  TellNccl(spec, a.ranks_per_gpu);
  // (TellNccl may have made them processes.)
  if (spec.options.launch == LaunchMode::kThreads) SeeEveryRanksGpus(spec, a);
  // Each GPU once, in the ranks' order: ranks that share them are placed
  // round-robin on that list again (a GPU listed twice is no inventory).
  std::vector<std::string> all;
  for (const auto& own : a.own) {
    for (const std::string& gpu : own) {
      if (std::find(all.begin(), all.end(), gpu) == all.end()) {
        all.push_back(gpu);
      }
    }
  }
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

bool SharesGpus(const Options& options) {
  if (options.share_gpus) return true;
  const char* value = std::getenv(env::kShareGpus);
  if (value == nullptr || *value == '\0') return false;
  return ParseIntVariable(env::kShareGpus, value, 0, 1) == 1;
}

bool NcclHasMultiRankGpu() {
  const int version = NcclVersion();  // 2.30.0 is 23000.
  return version >= 23000;
}

std::vector<std::pair<std::string, std::string>> NcclSharedGpuEnv(
    int rank, const std::string& test_id) {
  if (!NcclBuilt()) return {};
  if (NcclHasMultiRankGpu()) return {{env::kNcclMultiRankGpu, "1"}};
  return {{env::kNcclHostId, fmt::format("disttest-{}-rank{}", test_id, rank)}};
}

bool ListResources(const std::string& name, int ranks, const Options& options) {
  const char* path = std::getenv(env::kListResources);
  if (path == nullptr || *path == '\0') return false;
  const int gpus = ListedGpusPerRank(options);
  std::string line =
      fmt::format("{} {} {}{}\n", name, ranks, gpus,
                  gpus > 0 && options.share_gpus ? " share" : "");
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
