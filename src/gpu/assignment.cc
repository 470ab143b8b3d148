// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/gpu/assignment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "disttest/error.h"
#include "env/text.h"

namespace disttest {
namespace {

constexpr char kCountVariable[] = "CTEST_RESOURCE_GROUP_COUNT";

using internal::IsDigits;
using internal::SplitOn;

bool IsIdText(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsPositiveCount(std::string_view s) {
  return IsDigits(s) && s.size() <= 9 && s.front() != '0';
}

// "id:<id>,slots:<n>[;id:<id>,slots:<n>...]", exactly as ctest writes it.
std::vector<std::string> ParseGroupEntries(const std::string& name,
                                           std::string_view value) {
  auto malformed = [&](std::string_view entry) {
    return ConfigError(fmt::format(
        "{}='{}': each entry must be id:<id>,slots:<n> (entries separated by "
        "';'), not '{}'",
        name, value, entry));
  };
  std::vector<std::string> ids;
  for (std::string_view entry : SplitOn(value, ';')) {
    std::vector<std::string_view> fields = SplitOn(entry, ',');
    if (fields.size() != 2 || !fields[0].starts_with("id:") ||
        !fields[1].starts_with("slots:")) {
      throw malformed(entry);
    }
    std::string_view id = fields[0].substr(3);
    if (!IsIdText(id) || !IsPositiveCount(fields[1].substr(6))) {
      throw malformed(entry);
    }
    ids.emplace_back(id);
  }
  return ids;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(c));
  return out;
}

// The inventory entry that CTest's `id` names.
const std::string& DeviceOf(const GpuInventory& inventory,
                            const std::string& id, int group) {
  int index = IsDigits(id) && id.size() <= 4 ? std::atoi(id.c_str()) : -1;
  if (index < 0 || index >= inventory.count()) {
    throw ConfigError(fmt::format(
        "CTest resource group {} names GPU '{}', but this process has {}; a "
        "resource spec id must be the position of a GPU in that list (write "
        "the spec with disttest_resource_spec where the tests run)",
        group, id, inventory.str()));
  }
  return inventory.devices[static_cast<std::size_t>(index)];
}

}  // namespace

const char* Name(GpuVisibility visibility) {
  switch (visibility) {
    case GpuVisibility::kOwnOnly:
      return "own-only";
    case GpuVisibility::kAllRotated:
      return "all-rotated";
  }
  return "unknown";
}

std::optional<std::vector<std::vector<std::string>>> ReadCtestResourceGroups(
    const EnvLookup& lookup, std::string_view type) {
  EnvLookup get = internal::OrProcessEnvironment(lookup);
  const char* count_text = get(kCountVariable);
  if (count_text == nullptr) return std::nullopt;
  // ctest run with a spec file sets 0 for a test without RESOURCE_GROUPS.
  int count = ParseIntVariable(kCountVariable, count_text, 0, kMaxWorldSize);
  if (count == 0) return std::nullopt;
  std::vector<std::vector<std::string>> groups;
  bool any = false;
  for (int i = 0; i < count; ++i) {
    std::string types_name = fmt::format("CTEST_RESOURCE_GROUP_{}", i);
    const char* types = get(types_name.c_str());
    if (types == nullptr) {
      throw ConfigError(fmt::format("{}={}, but {} is not set", kCountVariable,
                                    count, types_name));
    }
    std::vector<std::string_view> listed = SplitOn(types, ',');
    groups.emplace_back();
    if (std::find(listed.begin(), listed.end(), type) == listed.end()) {
      continue;
    }
    std::string entries_name = fmt::format("{}_{}", types_name, Upper(type));
    const char* entries = get(entries_name.c_str());
    if (entries == nullptr) {
      throw ConfigError(fmt::format("{}='{}' lists {}, but {} is not set",
                                    types_name, types, type, entries_name));
    }
    groups.back() = ParseGroupEntries(entries_name, entries);
    any = true;
  }
  if (!any) return std::nullopt;
  return groups;
}

std::string GpuAssignment::str() const {
  std::vector<std::string> parts;
  for (std::size_t r = 0; r < own.size(); ++r) {
    parts.push_back(fmt::format("rank {}: {}", r, fmt::join(own[r], ",")));
  }
  if (ranks_per_gpu > 1) {
    return fmt::format("{} ({}; {} ranks share a GPU)", fmt::join(parts, ", "),
                       source, ranks_per_gpu);
  }
  return fmt::format("{} ({})", fmt::join(parts, ", "), source);
}

namespace {

// Each rank's GPUs from CTest's resource groups: a group a rank, one group
// for them all, or (sharing) fewer groups than ranks, round-robin.
void AssignFromGroups(const GpuInventory& inventory,
                      const std::vector<std::vector<std::string>>& groups,
                      int n, int g, bool share, GpuAssignment* a) {
  a->source = "CTest resource groups";
  std::vector<std::size_t> sizes;
  for (const auto& group : groups) sizes.push_back(group.size());
  const int count = static_cast<int>(groups.size());
  const bool one_for_all =
      count == 1 && static_cast<int>(groups.front().size()) >= n * g;
  // disttest_discover_tests gives a test that shares as many groups as the
  // machine has GPUs for (each of a rank's size).
  const bool round_robin = share && count < n && !one_for_all;
  const bool one_per_rank = count >= n || round_robin;
  if (round_robin) a->ranks_per_gpu = (n + count - 1) / count;
  if (!one_per_rank && !one_for_all) {
    std::string per_rank = "gpus:1";
    for (int i = 1; i < g; ++i) per_rank += ",gpus:1";
    throw ConfigError(fmt::format(
        "CTest gave {} resource group{} (with {} GPUs) to a test of {} "
        "ranks with {} GPU{} each: register it with RESOURCE_GROUPS "
        "\"{},{}\" (disttest_discover_tests does)",
        groups.size(), groups.size() == 1 ? "" : "s", fmt::join(sizes, ", "), n,
        g, g == 1 ? "" : "s", n, per_rank));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> ids;
    int group = one_per_rank ? r % count : 0;
    if (one_per_rank) {
      ids = groups[static_cast<std::size_t>(group)];
      if (static_cast<int>(ids.size()) != g) {
        throw ConfigError(fmt::format(
            "CTest resource group {} holds {} GPU{} ({}), but each rank "
            "uses {} (options().gpus_per_rank)",
            group, ids.size(), ids.size() == 1 ? "" : "s", fmt::join(ids, ","),
            g));
      }
    } else {
      const auto& all = groups.front();
      ids.assign(all.begin() + r * g, all.begin() + (r + 1) * g);
    }
    for (const std::string& id : ids) {
      a->own[static_cast<std::size_t>(r)].push_back(
          DeviceOf(inventory, id, group));
    }
  }
  // CTest may put two groups on one GPU when the spec gives it several
  // slots; NCCL would then fail with "Duplicate GPU detected". (Ranks that
  // share a group round-robin share it by design: one of each is checked.)
  std::map<std::string, int> owner;
  for (int r = 0; r < (round_robin ? count : n); ++r) {
    for (const std::string& device : a->own[static_cast<std::size_t>(r)]) {
      auto [it, fresh] = owner.emplace(device, r);
      if (!fresh) {
        throw ConfigError(fmt::format(
            "CTest gave GPU {} to rank {} and rank {}: give every GPU "
            "\"slots\": 1 in the resource spec file (disttest_resource_spec "
            "does), so that no two ranks share one",
            device, it->second, r));
      }
    }
  }
}

// Each rank's GPUs in the inventory's order (round-robin when `share`);
// false, with the shortfall in `too_few`, where there are not enough.
bool AssignFromInventory(const GpuInventory& inventory, int n, int g,
                         bool share, GpuAssignment* a) {
  a->source = inventory.source;
  const int count = inventory.count();
  if (share && n * g > count && count >= g) {
    std::vector<int> owners(static_cast<std::size_t>(count), 0);
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < g; ++k) {
        const int d = (r * g + k) % count;
        a->own[static_cast<std::size_t>(r)].push_back(
            inventory.devices[static_cast<std::size_t>(d)]);
        ++owners[static_cast<std::size_t>(d)];
      }
    }
    a->ranks_per_gpu = *std::max_element(owners.begin(), owners.end());
    return true;
  }
  if (n * g > count) {
    std::string found =
        inventory.devices.empty()
            ? fmt::format("0 ({})", inventory.source)
            : fmt::format("{}: {} ({})", inventory.count(),
                          fmt::join(inventory.devices, ","), inventory.source);
    a->too_few = g == 1 ? fmt::format("needs {} GPU{}, found {}", n,
                                      n == 1 ? "" : "s", found)
                        : fmt::format("needs {} GPUs ({} ranks x {}), found {}",
                                      n * g, n, g, found);
    if (count >= g && count > 0) {
      a->too_few +=
          "; options().share_gpus (or DISTTEST_SHARE_GPUS=1) places the "
          "ranks on the GPUs there are";
    }
    return false;
  }
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < g; ++k) {
      a->own[static_cast<std::size_t>(r)].push_back(
          inventory.devices[static_cast<std::size_t>(r * g + k)]);
    }
  }
  return true;
}

// What one rank sees: its own GPUs, then with kAllRotated the others.
std::string VisibleTo(const std::vector<std::string>& own,
                      const GpuInventory& inventory, GpuVisibility visibility) {
  std::vector<std::string> visible = own;
  if (visibility == GpuVisibility::kAllRotated) {
    // The others in rotated order, starting after the rank's first GPU.
    auto first = std::find(inventory.devices.begin(), inventory.devices.end(),
                           own.front());
    std::size_t start =
        first == inventory.devices.end()
            ? 0
            : static_cast<std::size_t>(first - inventory.devices.begin());
    for (std::size_t k = 1; k <= inventory.devices.size(); ++k) {
      const std::string& d =
          inventory.devices[(start + k) % inventory.devices.size()];
      if (std::find(visible.begin(), visible.end(), d) == visible.end()) {
        visible.push_back(d);
      }
    }
  }
  return fmt::format("{}", fmt::join(visible, ","));
}

}  // namespace

GpuAssignment AssignGpus(
    const GpuInventory& inventory,
    const std::optional<std::vector<std::vector<std::string>>>& groups,
    const GpuRequest& request) {
  const int n = request.world_size;
  const int g = request.gpus_per_rank;
  GpuAssignment a;
  if (n < 1 || g < 1) {
    throw ConfigError(fmt::format(
        "cannot assign GPUs to {} ranks of {} GPUs each: both must be >= 1", n,
        g));
  }
  a.own.resize(static_cast<std::size_t>(n));
  if (groups) {
    AssignFromGroups(inventory, *groups, n, g, request.share, &a);
  } else if (!AssignFromInventory(inventory, n, g, request.share, &a)) {
    GpuAssignment short_of;
    short_of.too_few = std::move(a.too_few);
    return short_of;
  }
  for (const auto& own : a.own) {
    a.visible.push_back(VisibleTo(own, inventory, request.visibility));
  }
  return a;
}

}  // namespace disttest
