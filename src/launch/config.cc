// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/launch/config.h"

#include <fmt/format.h>

#include <climits>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "disttest/error.h"

namespace disttest {
namespace {

using Json = nlohmann::json;

// One parallel size: an integer, or {"size": integer}.
int ReadSize(const Json& value, const std::string& key) {
  const Json* size = &value;
  if (value.is_object()) {
    for (const auto& [name, unused] : value.items()) {
      if (name != "size") {
        throw ConfigError(fmt::format(
            "config: parallel.{} has an unknown key \"{}\" (only \"size\" is "
            "read)",
            key, name));
      }
    }
    if (!value.contains("size")) {
      throw ConfigError(fmt::format(
          "config: parallel.{} is an object without \"size\"", key));
    }
    size = &value["size"];
  }
  if (!size->is_number_integer()) {
    throw ConfigError(
        fmt::format("config: parallel.{} must be an integer or {{\"size\": "
                    "integer}}, got {}",
                    key, value.dump()));
  }
  long long n = size->get<long long>();
  if (n < INT_MIN || n > INT_MAX) {
    throw ConfigError(
        fmt::format("config: parallel.{} = {} is out of range", key, n));
  }
  return static_cast<int>(n);
}

void CheckAtLeastOne(int value, const char* key) {
  if (value < 1) {
    throw ConfigError(
        fmt::format("config: parallel.{} must be >= 1, got {}", key, value));
  }
}

}  // namespace

const char* Name(ParallelMode mode) {
  switch (mode) {
    case ParallelMode::kGlobal:
      return "global";
    case ParallelMode::kData:
      return "data";
    case ParallelMode::kTensor:
      return "tensor";
    case ParallelMode::kPipeline:
      return "pipeline";
    case ParallelMode::kZero1:
      return "zero1";
  }
  return "unknown";
}

Config Config::FromJson(std::string_view text) {
  Json root;
  // The keys of each object being read: JSON lets a key come twice (the
  // last one would win), which is a typo to the reader of the file.
  std::vector<std::set<std::string>> keys;
  const Json::parser_callback_t no_key_twice =
      [&](int, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        if (event == Json::parse_event_t::object_end) keys.pop_back();
        if (event == Json::parse_event_t::key &&
            !keys.back().insert(parsed.get<std::string>()).second) {
          throw ConfigError(
              fmt::format("config: the key \"{}\" comes twice in one object",
                          parsed.get<std::string>()));
        }
        return true;
      };
  try {
    root = Json::parse(text.begin(), text.end(), no_key_twice);
  } catch (const Json::exception& e) {
    throw ConfigError(fmt::format("config: not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) {
    throw ConfigError(
        fmt::format("config: the top level must be a JSON object, got {}",
                    root.type_name()));
  }
  Config config;
  config.json = std::string(text);
  auto parallel = root.find("parallel");
  if (parallel == root.end()) return config;
  if (!parallel->is_object()) {
    throw ConfigError(fmt::format("config: parallel must be an object, got {}",
                                  parallel->dump()));
  }
  ParallelConfig& p = config.parallel;
  for (const auto& [key, value] : parallel->items()) {
    if (key == "tensor") {
      p.tensor = ReadSize(value, key);
      CheckAtLeastOne(p.tensor, "tensor");
    } else if (key == "pipeline") {
      p.pipeline = ReadSize(value, key);
      CheckAtLeastOne(p.pipeline, "pipeline");
    } else if (key == "data") {
      p.data = ReadSize(value, key);
      CheckAtLeastOne(p.data, "data");
    } else if (key == "zero1") {
      p.zero1 = ReadSize(value, key);
    } else {
      throw ConfigError(fmt::format(
          "config: parallel has an unknown key \"{}\" (known: tensor, "
          "pipeline, data, zero1)",
          key));
    }
  }
  return config;
}

Config Config::FromFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(fmt::format(
        "config file {} cannot be read: it is a directory", path.string()));
  }
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(
        fmt::format("config file {} cannot be read", path.string()));
  }
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {  // libstdc++'s filebuf on a read error.
    throw ConfigError(fmt::format("config file {} cannot be read: {}",
                                  path.string(), e.what()));
  }
  try {
    return FromJson(text);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", path.string(), e.what()));
  }
}

void Layout::CheckSizes(const ParallelConfig& p) {
  if (p.tensor < 1 || p.pipeline < 1 || p.data < 0) {
    throw ConfigError(fmt::format(
        "parallel sizes must be >= 1: tensor {}, pipeline {}, data {}",
        p.tensor, p.pipeline, p.data));
  }
  if (p.data > 0 && p.zero1 > 0 && p.data % p.zero1 != 0) {
    throw ConfigError(
        fmt::format("parallel.zero1 = {} does not divide the data size {}",
                    p.zero1, p.data));
  }
}

Layout::Layout(int world_size, const ParallelConfig& p) : world_(world_size) {
  if (world_size < 1) {
    throw ConfigError(
        fmt::format("world size must be >= 1, got {}", world_size));
  }
  CheckSizes(p);
  tensor_ = p.tensor;
  pipeline_ = p.pipeline;
  const long long model = static_cast<long long>(tensor_) * pipeline_;
  if (world_size % model != 0) {
    throw ConfigError(
        fmt::format("world size {} does not split into pipeline {} x tensor "
                    "{} (= {})",
                    world_size, pipeline_, tensor_, model));
  }
  data_ = static_cast<int>(world_size / model);
  if (p.data != 0 && p.data != data_) {
    throw ConfigError(
        fmt::format("world size {} is not data {} x pipeline {} x tensor {} "
                    "(= {})",
                    world_size, p.data, pipeline_, tensor_, p.data * model));
  }
  zero1_ = p.zero1 <= 0 ? data_ : p.zero1;
  if (zero1_ > data_ || data_ % zero1_ != 0) {
    throw ConfigError(fmt::format(
        "parallel.zero1 = {} does not divide the data size {}", zero1_, data_));
  }
}

int Layout::size(ParallelMode mode) const {
  switch (mode) {
    case ParallelMode::kGlobal:
      return world_;
    case ParallelMode::kData:
      return data_;
    case ParallelMode::kTensor:
      return tensor_;
    case ParallelMode::kPipeline:
      return pipeline_;
    case ParallelMode::kZero1:
      return zero1_;
  }
  return 0;
}

void Layout::CheckRank(int rank) const {
  if (rank < 0 || rank >= world_) {
    throw ConfigError(
        fmt::format("rank {} is outside the world of {}", rank, world_));
  }
}

Coords Layout::coords(int rank) const {
  CheckRank(rank);
  return {rank / (tensor_ * pipeline_), (rank / tensor_) % pipeline_,
          rank % tensor_};
}

int Layout::rank_of(const Coords& c) const {
  return c.data * tensor_ * pipeline_ + c.pipeline * tensor_ + c.tensor;
}

int Layout::rank_in(ParallelMode mode, int rank) const {
  Coords c = coords(rank);
  switch (mode) {
    case ParallelMode::kGlobal:
      return rank;
    case ParallelMode::kData:
      return c.data;
    case ParallelMode::kTensor:
      return c.tensor;
    case ParallelMode::kPipeline:
      return c.pipeline;
    case ParallelMode::kZero1:
      return c.data % zero1_;
  }
  return -1;
}

std::vector<int> Layout::group_of(ParallelMode mode, int rank) const {
  Coords c = coords(rank);
  std::vector<int> group;
  switch (mode) {
    case ParallelMode::kGlobal:
      for (int r = 0; r < world_; ++r) group.push_back(r);
      break;
    case ParallelMode::kData:
      for (int d = 0; d < data_; ++d)
        group.push_back(rank_of({d, c.pipeline, c.tensor}));
      break;
    case ParallelMode::kTensor:
      for (int t = 0; t < tensor_; ++t)
        group.push_back(rank_of({c.data, c.pipeline, t}));
      break;
    case ParallelMode::kPipeline:
      for (int p = 0; p < pipeline_; ++p)
        group.push_back(rank_of({c.data, p, c.tensor}));
      break;
    case ParallelMode::kZero1: {
      const int first = c.data / zero1_ * zero1_;
      for (int d = first; d < first + zero1_; ++d) {
        group.push_back(rank_of({d, c.pipeline, c.tensor}));
      }
      break;
    }
  }
  return group;
}

std::vector<std::vector<int>> Layout::groups(ParallelMode mode) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> placed(static_cast<std::size_t>(world_), false);
  for (int r = 0; r < world_; ++r) {
    if (placed[static_cast<std::size_t>(r)]) continue;
    std::vector<int> group = group_of(mode, r);
    for (int member : group) placed[static_cast<std::size_t>(member)] = true;
    out.push_back(std::move(group));
  }
  return out;
}

int Layout::group_index(ParallelMode mode, int rank) const {
  const std::vector<int> mine = group_of(mode, rank);
  std::vector<std::vector<int>> all = groups(mode);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i] == mine) return static_cast<int>(i);
  }
  return -1;
}

std::string Layout::str() const {
  return fmt::format("data {} x pipeline {} x tensor {}, zero1 {}", data_,
                     pipeline_, tensor_, zero1_);
}

std::uint64_t ModeSeed(ParallelMode mode, std::uint64_t base,
                       const Layout& layout, int rank) {
  if (mode != ParallelMode::kTensor) {
    layout.coords(rank);  // Checks the rank.
    return base;
  }
  const Coords c = layout.coords(rank);
  return base + static_cast<std::uint64_t>(c.tensor) +
         1024u * static_cast<std::uint64_t>(c.pipeline);
}

}  // namespace disttest
