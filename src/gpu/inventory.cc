// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/gpu/inventory.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <system_error>

#include "base/child_process.h"
#include "base/retry.h"
#include "base/threads.h"
#include "disttest/env/names.h"
#include "disttest/error.h"
#include "env/text.h"
#include "gpu/inventory_internal.h"

namespace disttest {
namespace {

using internal::IsDigits;
using internal::Trim;

// A comma list's items, without white space around them.
std::vector<std::string_view> SplitCommas(std::string_view s) {
  std::vector<std::string_view> items = internal::SplitOn(s, ',');
  for (std::string_view& item : items) item = Trim(item);
  return items;
}

std::vector<std::string> CountedDevices(int count) {
  std::vector<std::string> devices;
  for (int i = 0; i < count; ++i) devices.push_back(std::to_string(i));
  return devices;
}

// DISTTEST_GPUS: a count or a list of distinct, non-empty entries.
std::vector<std::string> ParseGpusOverride(std::string_view value) {
  auto malformed = [&](const std::string& why) {
    return ConfigError(fmt::format(
        "environment variable {}='{}' is not a GPU count or a comma list of "
        "GPUs: {}",
        env::kGpus, value, why));
  };
  std::string_view trimmed = Trim(value);
  if (IsDigits(trimmed)) {
    if (trimmed.size() > 4 || std::stoi(std::string(trimmed)) > 1024) {
      throw malformed("more than 1024 GPUs");
    }
    return CountedDevices(std::stoi(std::string(trimmed)));
  }
  std::vector<std::string> devices;
  // "3," is a list of one GPU (a bare "3" is a count).
  if (trimmed.ends_with(',')) trimmed.remove_suffix(1);
  for (std::string_view entry : SplitCommas(trimmed)) {
    if (entry.empty()) throw malformed("an entry is empty");
    // What CUDA_VISIBLE_DEVICES takes: an index, or a GPU or MIG UUID.
    if (!IsDigits(entry) && !entry.starts_with("GPU-") &&
        !entry.starts_with("MIG-")) {
      throw malformed(fmt::format(
          "'{}' is neither a GPU index nor a GPU-/MIG- UUID", entry));
    }
    if (std::find(devices.begin(), devices.end(), entry) != devices.end()) {
      throw malformed(fmt::format("'{}' is listed twice", entry));
    }
    devices.emplace_back(entry);
  }
  return devices;
}

// The NVML device count, asked in a child process; nullopt when NVML cannot
// be loaded or does not answer.
std::optional<int> NvmlCountInChild() {
  // The child runs the loader (dlopen) without exec: only in a process that
  // runs no other thread, whose locks no thread can be holding at the fork.
  // Otherwise the driver's directory counts the GPUs.
  if (internal::ThreadCount() != 1) return std::nullopt;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int count = -1;
    if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
      using InitFn = int (*)();
      using CountFn = int (*)(unsigned*);
      auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
      auto get =
          reinterpret_cast<CountFn>(dlsym(nvml, "nvmlDeviceGetCount_v2"));
      auto shutdown = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlShutdown"));
      unsigned n = 0;
      if (init != nullptr && get != nullptr && init() == 0) {
        if (get(&n) == 0) count = static_cast<int>(n);
        if (shutdown != nullptr) shutdown();
      }
    }
    ssize_t ignored = write(fds[1], &count, sizeof count);
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  int count = -1;
  pollfd p{fds[0], POLLIN, 0};
  // A driver that does not answer in 10 s is not one to run tests on.
  if (poll(&p, 1, 10000) == 1) {
    if (read(fds[0], &count, sizeof count) != sizeof count) count = -1;
  } else {
    kill(pid, SIGKILL);
  }
  close(fds[0]);
  internal::RetryOnEintr([&] { return waitpid(pid, nullptr, 0); });
  if (count < 0) return std::nullopt;
  return count;
}

// In a process that runs threads (where NvmlCountInChild does not run): the
// count nvidia-smi -L gives, started with exec; nullopt without it, or when
// it fails (no driver).
std::optional<int> NvidiaSmiCount() {
  if (internal::ThreadCount() == 1) return std::nullopt;
  const std::string smi = internal::FindProgram("nvidia-smi");
  if (smi.empty()) return std::nullopt;
  internal::ChildProcess p = internal::ChildProcess::Start({smi, "-L"});
  if (!p.started()) return std::nullopt;
  if (!p.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(10))) {
    return std::nullopt;  // Killed with the object.
  }
  if (!p.succeeded()) return std::nullopt;
  int count = 0;
  std::istringstream lines(p.Output());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("GPU ", 0) == 0) ++count;
  }
  return count;
}

}  // namespace

std::string GpuInventory::str() const {
  if (devices.empty()) return fmt::format("no GPU ({})", source);
  return fmt::format("{} GPU{} ({}) from {}", devices.size(),
                     devices.size() == 1 ? "" : "s", fmt::join(devices, ","),
                     source);
}

namespace internal {

std::vector<std::string> ParseVisibleDevices(std::string_view value,
                                             std::optional<int> driver_count) {
  std::vector<std::string> devices;
  if (Trim(value).empty()) return devices;
  for (std::string_view written : SplitCommas(value)) {
    bool identifier =
        written.starts_with("GPU-") || written.starts_with("MIG-");
    std::string entry(written);
    if (!identifier) {
      if (!IsDigits(written) || written.size() > 4) break;
      const int index = std::stoi(entry);
      if (driver_count && index >= *driver_count) break;
      // "00" is GPU 0: once more, it stops the list as a repeat does
      // (trial 11: "0,00" counted two GPUs).
      entry = std::to_string(index);
    }
    if (std::find(devices.begin(), devices.end(), entry) != devices.end()) {
      break;
    }
    devices.push_back(std::move(entry));
  }
  return devices;
}

std::optional<int> CountDriverGpuDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return std::nullopt;
  int count = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    ++count;
  }
  return count;
}

std::optional<DriverGpus> ProbeDriverGpus() {
  if (std::optional<int> n = NvmlCountInChild()) return DriverGpus{*n, "NVML"};
  if (std::optional<int> n = NvidiaSmiCount()) {
    return DriverGpus{*n, "nvidia-smi"};
  }
  constexpr char kProc[] = "/proc/driver/nvidia/gpus";
  if (std::optional<int> n = CountDriverGpuDirectory(kProc)) {
    return DriverGpus{*n, kProc};
  }
  return std::nullopt;
}

GpuInventory MakeGpuInventory(const EnvLookup& lookup,
                              const std::optional<DriverGpus>& driver) {
  EnvLookup get = internal::OrProcessEnvironment(lookup);
  GpuInventory inventory;
  if (const char* value = get(env::kGpus); value != nullptr && *value) {
    inventory.devices = ParseGpusOverride(value);
    inventory.source = env::kGpus;
    // A count among the GPUs this process may use: an inherited
    // CUDA_VISIBLE_DEVICES's first, not GPUs 0..N-1, which it may not
    // show (trial 11: DISTTEST_GPUS=2 under CUDA_VISIBLE_DEVICES=4,5 gave
    // the ranks GPUs 0 and 1). A list names GPUs as written.
    const char* visible = get(env::kCudaVisibleDevices);
    if (IsDigits(Trim(value)) && visible != nullptr) {
      std::vector<std::string> shown =
          internal::ParseVisibleDevices(visible, std::nullopt);
      if (shown.size() < inventory.devices.size()) {
        throw ConfigError(fmt::format(
            "environment variable {}={} asks for {} GPUs, but {}='{}' shows "
            "{} (a count is of the GPUs it shows; list GPUs to name others)",
            env::kGpus, Trim(value), inventory.devices.size(),
            env::kCudaVisibleDevices, visible, shown.size()));
      }
      shown.resize(inventory.devices.size());
      inventory.devices = std::move(shown);
      inventory.source =
          fmt::format("{} of {}", env::kGpus, env::kCudaVisibleDevices);
    }
    return inventory;
  }
  if (!driver) {
    const char* visible = get(env::kCudaVisibleDevices);
    inventory.source = visible == nullptr
                           ? "no NVIDIA driver"
                           : fmt::format("no NVIDIA driver; {}='{}' names none",
                                         env::kCudaVisibleDevices, visible);
    return inventory;
  }
  if (const char* visible = get(env::kCudaVisibleDevices)) {
    inventory.devices = ParseVisibleDevices(visible, driver->count);
    inventory.source =
        inventory.devices.empty()
            ? fmt::format("{}='{}'", env::kCudaVisibleDevices, visible)
            : env::kCudaVisibleDevices;
    return inventory;
  }
  inventory.devices = CountedDevices(driver->count);
  inventory.source = driver->source;
  return inventory;
}

}  // namespace internal

const GpuInventory& Gpus() {
  static std::mutex mutex;
  static std::optional<GpuInventory> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) {
    const char* override = std::getenv(env::kGpus);
    bool overridden = override != nullptr && *override != '\0';
    cached = internal::MakeGpuInventory(
        {}, overridden ? std::nullopt : internal::ProbeDriverGpus());
  }
  return *cached;
}

}  // namespace disttest
