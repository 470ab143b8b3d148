// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Config and Layout: how a job's ranks are split into parallel groups, the
// part of InternLM's launch() that needs no communication.
//
//   disttest::Config config = disttest::Config::FromJson(
//       R"({"parallel": {"tensor": 2, "pipeline": {"size": 2}}})");
//   disttest::Layout layout(/*world_size=*/8, config.parallel);
//   layout.size(disttest::ParallelMode::kData);          // 2
//   layout.group_of(disttest::ParallelMode::kTensor, 5);  // {4, 5}
//
// The layout: tensor is the fastest-varying axis, then pipeline, then data:
//   rank = d * (tensor * pipeline) + p * tensor + t
// so a tensor group is a contiguous block of ranks, a pipeline group strides
// by `tensor`, and a data group strides by `tensor * pipeline`. A zero1
// group is a contiguous chunk of `zero1` members of the rank's data group.
// (InternLM used this order; its successor InternEvo put pipeline outermost.)
//
// Errors are ConfigErrors that say what is wrong:
//   "config: parallel.tensor must be >= 1, got 0"
//   "world size 6 does not split into pipeline 2 x tensor 2 (= 4)"
//   "parallel.zero1 = 3 does not divide the data size 4"
#ifndef DISTTEST_LAUNCH_CONFIG_H_
#define DISTTEST_LAUNCH_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace disttest {

enum class ParallelMode { kGlobal, kData, kTensor, kPipeline, kZero1 };

// "global", "data", "tensor", "pipeline", "zero1".
const char* Name(ParallelMode mode);

// Every mode, in the order launch() creates their groups.
inline constexpr ParallelMode kAllParallelModes[] = {
    ParallelMode::kGlobal, ParallelMode::kData, ParallelMode::kTensor,
    ParallelMode::kPipeline, ParallelMode::kZero1};

struct ParallelConfig {
  int tensor = 1;
  int pipeline = 1;
  // 0: world_size / (tensor * pipeline). Set, it must make the product.
  int data = 0;
  // <= 0: the whole data group (InternLM's -1). Must divide the data size.
  int zero1 = 0;
};

struct Config {
  ParallelConfig parallel;
  // The JSON text the config came from (empty for a struct): keys other
  // than "parallel" belong to the program, which may parse them itself.
  std::string json;

  // {"parallel": {"tensor": 2, "pipeline": 1, "data": 4, "zero1": -1}};
  // each size is an integer or {"size": integer}; all are optional. Keys
  // outside "parallel" are ignored; unknown keys inside it are errors (a
  // typo must not silently mean 1). Throws ConfigError.
  static Config FromJson(std::string_view json);
  // Reads a JSON file; throws ConfigError naming the file.
  static Config FromFile(const std::filesystem::path& path);
};

// A rank's place in the grid.
struct Coords {
  int data = 0;
  int pipeline = 0;
  int tensor = 0;
};

class Layout {
 public:
  // Resolves the sizes for `world_size` ranks; throws ConfigError when the
  // world cannot be split as asked.
  Layout(int world_size, const ParallelConfig& parallel);
  // Throws ConfigError where `parallel` splits no world at all (a size
  // below 1, or a zero1 that does not divide the data size it sets): a
  // mistake, where a world it does not split may just be the wrong size.
  static void CheckSizes(const ParallelConfig& parallel);

  int world_size() const { return world_; }
  // The size of every group of `mode`.
  int size(ParallelMode mode) const;

  Coords coords(int rank) const;
  int rank_of(const Coords& c) const;

  // `rank`'s index in its group of `mode`.
  int rank_in(ParallelMode mode, int rank) const;
  // The global ranks of `rank`'s group of `mode`, in group-rank order.
  std::vector<int> group_of(ParallelMode mode, int rank) const;
  // Every group of `mode`, ordered by their lowest rank; each group is
  // created in this order on every rank.
  std::vector<std::vector<int>> groups(ParallelMode mode) const;
  // The index of `rank`'s group in groups(mode).
  int group_index(ParallelMode mode, int rank) const;

  // "data 2 x pipeline 2 x tensor 2, zero1 1".
  std::string str() const;

 private:
  void CheckRank(int rank) const;

  int world_;
  int data_;
  int pipeline_;
  int tensor_;
  int zero1_;
};

// The seed of `mode` for `rank` (InternLM's rules): the base seed for the
// global, data, pipeline and zero1 modes (replicas draw the same numbers);
// base + tensor rank + 1024 * pipeline rank for the tensor mode (each shard
// of a layer draws its own).
std::uint64_t ModeSeed(ParallelMode mode, std::uint64_t base,
                       const Layout& layout, int rank);

}  // namespace disttest

#endif  // DISTTEST_LAUNCH_CONFIG_H_
