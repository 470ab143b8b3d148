// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Config parsing and the rank layout: the formulas of launch/config.h over
// many (world, tensor, pipeline, zero1) combinations, and the errors a user
// sees for a wrong config.
#include "disttest/launch/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "disttest/error.h"

namespace disttest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ConfigErrorOf(const std::string& json) {
  try {
    Config::FromJson(json);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConfigTest, ReadsIntegersAndSizeObjects) {
  Config c = Config::FromJson(
      R"({"model": {"layers": 4},
          "parallel": {"tensor": 2, "pipeline": {"size": 3}, "zero1": -1}})");
  EXPECT_EQ(c.parallel.tensor, 2);
  EXPECT_EQ(c.parallel.pipeline, 3);
  EXPECT_EQ(c.parallel.data, 0);
  EXPECT_EQ(c.parallel.zero1, -1);
  EXPECT_THAT(c.json, HasSubstr("\"layers\""));  // The program's own keys.
}

TEST(ConfigTest, EmptyObjectMeansEverythingIsOne) {
  Config c = Config::FromJson("{}");
  EXPECT_EQ(c.parallel.tensor, 1);
  EXPECT_EQ(c.parallel.pipeline, 1);
}

TEST(ConfigTest, ErrorsSayWhatIsWrong) {
  EXPECT_THAT(ConfigErrorOf("{\"parallel\": "), HasSubstr("not valid JSON"));
  EXPECT_THAT(ConfigErrorOf("[1, 2]"),
              HasSubstr("the top level must be a JSON object, got array"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": 4})"),
              HasSubstr("parallel must be an object, got 4"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tensor": "2"}})"),
              HasSubstr("parallel.tensor must be an integer or {\"size\": "
                        "integer}, got \"2\""));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tensor": 1.5}})"),
              HasSubstr("parallel.tensor must be an integer"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"pipeline": {"sise": 2}}})"),
              HasSubstr("parallel.pipeline has an unknown key \"sise\""));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"pipeline": {}}})"),
              HasSubstr("parallel.pipeline is an object without \"size\""));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tensor": 0}})"),
              HasSubstr("parallel.tensor must be >= 1, got 0"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"data": -2}})"),
              HasSubstr("parallel.data must be >= 1, got -2"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tenser": 2}})"),
              HasSubstr("parallel has an unknown key \"tenser\""));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tensor": 99999999999}})"),
              HasSubstr("out of range"));
}

TEST(ConfigTest, FromFileNamesTheFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("disttest-config-test-" + std::to_string(getpid()));
  std::ofstream(path) << R"({"parallel": {"tensor": 0}})";
  try {
    Config::FromFile(path);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ": config: "
                                                    "parallel.tensor"));
  }
  std::ofstream(path) << R"({"parallel": {"tensor": 4}})";
  EXPECT_EQ(Config::FromFile(path).parallel.tensor, 4);
  std::filesystem::remove(path);
  EXPECT_THROW(Config::FromFile(path), ConfigError);
  try {
    Config::FromFile(std::filesystem::temp_directory_path());
    ADD_FAILURE() << "a directory was read as a config";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(": it is a directory"));
  }
}

// A key twice in one object is a typo (JSON would keep the last); the same
// key in two objects is not.
TEST(ConfigTest, AKeyTwiceInOneObjectIsAnError) {
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {"tensor": 2, "tensor": 4}})"),
              HasSubstr("config: the key \"tensor\" comes twice in one "
                        "object"));
  EXPECT_THAT(ConfigErrorOf(R"({"parallel": {}, "parallel": {"data": 2}})"),
              HasSubstr("the key \"parallel\" comes twice"));
  EXPECT_EQ(Config::FromJson(
                R"({"a": {"size": 1}, "parallel": {"tensor": {"size": 2}}})")
                .parallel.tensor,
            2);
}

std::string LayoutErrorOf(int world, ParallelConfig p) {
  try {
    Layout l(world, p);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LayoutTest, ValidationSaysWhy) {
  EXPECT_EQ(LayoutErrorOf(6, {.tensor = 2, .pipeline = 2}),
            "world size 6 does not split into pipeline 2 x tensor 2 (= 4)");
  EXPECT_EQ(LayoutErrorOf(8, {.tensor = 2, .pipeline = 2, .data = 4}),
            "world size 8 is not data 4 x pipeline 2 x tensor 2 (= 16)");
  EXPECT_EQ(LayoutErrorOf(16, {.tensor = 2, .pipeline = 2, .zero1 = 3}),
            "parallel.zero1 = 3 does not divide the data size 4");
  EXPECT_EQ(LayoutErrorOf(8, {.tensor = 2, .zero1 = 8}),
            "parallel.zero1 = 8 does not divide the data size 4");
  EXPECT_EQ(LayoutErrorOf(0, {}), "world size must be >= 1, got 0");
  EXPECT_THAT(LayoutErrorOf(4, {.tensor = 0}), HasSubstr("must be >= 1"));
  // Sizes that split no world, whatever its size; a world that is only the
  // wrong size is not a mistake of the sizes.
  EXPECT_THROW(Layout::CheckSizes({.pipeline = 0}), ConfigError);
  EXPECT_THROW(Layout::CheckSizes({.data = -1}), ConfigError);
  EXPECT_THROW(Layout::CheckSizes({.data = 4, .zero1 = 3}), ConfigError);
  EXPECT_THROW(Layout::CheckSizes({.data = 2, .zero1 = 4}), ConfigError);
  EXPECT_NO_THROW(Layout::CheckSizes({.tensor = 2, .data = 4, .zero1 = 2}));
  EXPECT_NO_THROW(Layout::CheckSizes({.tensor = 3, .zero1 = 5}));
}

// The reference's example: 16 ranks, tensor 2, pipeline 2 (data 4), zero1 2.
TEST(LayoutTest, MatchesTheWorkedExample) {
  Layout l(16, {.tensor = 2, .pipeline = 2, .zero1 = 2});
  EXPECT_EQ(l.size(ParallelMode::kData), 4);
  EXPECT_THAT(l.groups(ParallelMode::kTensor)[1], ElementsAre(2, 3));
  EXPECT_THAT(l.groups(ParallelMode::kPipeline)[0], ElementsAre(0, 2));
  EXPECT_THAT(l.groups(ParallelMode::kPipeline)[1], ElementsAre(1, 3));
  EXPECT_THAT(l.groups(ParallelMode::kPipeline)[2], ElementsAre(4, 6));
  EXPECT_THAT(l.groups(ParallelMode::kData)[0], ElementsAre(0, 4, 8, 12));
  EXPECT_THAT(l.groups(ParallelMode::kData)[3], ElementsAre(3, 7, 11, 15));
  EXPECT_THAT(l.group_of(ParallelMode::kZero1, 0), ElementsAre(0, 4));
  EXPECT_THAT(l.group_of(ParallelMode::kZero1, 8), ElementsAre(8, 12));
  EXPECT_THAT(l.group_of(ParallelMode::kZero1, 13), ElementsAre(9, 13));
  EXPECT_EQ(l.rank_in(ParallelMode::kZero1, 13), 1);
  EXPECT_EQ(l.str(), "data 4 x pipeline 2 x tensor 2, zero1 2");
}

struct Shape {
  int world, tensor, pipeline, zero1;
};

class LayoutShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(LayoutShapes, EveryModePartitionsTheWorldAsTheFormulasSay) {
  const Shape s = GetParam();
  Layout l(s.world,
           {.tensor = s.tensor, .pipeline = s.pipeline, .zero1 = s.zero1});
  const int mp = s.tensor * s.pipeline;
  const int dp = s.world / mp;
  const int z = s.zero1 <= 0 ? dp : s.zero1;
  EXPECT_EQ(l.size(ParallelMode::kData), dp);
  EXPECT_EQ(l.size(ParallelMode::kZero1), z);
  for (int r = 0; r < s.world; ++r) {
    const Coords c = l.coords(r);
    EXPECT_EQ(c.tensor, r % s.tensor);
    EXPECT_EQ(c.pipeline, r / s.tensor % s.pipeline);
    EXPECT_EQ(c.data, r / mp);
    EXPECT_EQ(r, c.data * mp + c.pipeline * s.tensor + c.tensor);
    EXPECT_EQ(l.rank_of(c), r);
  }
  for (ParallelMode mode : kAllParallelModes) {
    SCOPED_TRACE(Name(mode));
    std::vector<std::vector<int>> groups = l.groups(mode);
    std::multiset<int> seen;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      ASSERT_EQ(static_cast<int>(groups[g].size()), l.size(mode));
      for (std::size_t i = 0; i < groups[g].size(); ++i) {
        const int r = groups[g][i];
        seen.insert(r);
        // Each member finds this group, at its own index.
        EXPECT_EQ(l.group_of(mode, r), groups[g]);
        EXPECT_EQ(l.rank_in(mode, r), static_cast<int>(i));
        EXPECT_EQ(l.group_index(mode, r), static_cast<int>(g));
      }
      // Groups are listed by their lowest rank.
      if (g > 0) {
        EXPECT_LT(groups[g - 1].front(), groups[g].front());
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), s.world);
    EXPECT_EQ(static_cast<int>(std::set<int>(seen.begin(), seen.end()).size()),
              s.world);
  }
  for (int r = 0; r < s.world; ++r) {
    const Coords c = l.coords(r);
    // Tensor groups are contiguous; pipeline groups stride by tensor; data
    // groups by tensor x pipeline; zero1 groups are chunks of the data group.
    std::vector<int> tensor = l.group_of(ParallelMode::kTensor, r);
    EXPECT_EQ(tensor.back() - tensor.front(), s.tensor - 1);
    std::vector<int> pipeline = l.group_of(ParallelMode::kPipeline, r);
    for (std::size_t i = 1; i < pipeline.size(); ++i) {
      EXPECT_EQ(pipeline[i] - pipeline[i - 1], s.tensor);
    }
    std::vector<int> data = l.group_of(ParallelMode::kData, r);
    for (std::size_t i = 1; i < data.size(); ++i) {
      EXPECT_EQ(data[i] - data[i - 1], mp);
    }
    std::vector<int> zero1 = l.group_of(ParallelMode::kZero1, r);
    const int first = c.data / z * z;
    for (int i = 0; i < z; ++i) EXPECT_EQ(zero1[i], data[first + i]);
    EXPECT_EQ(l.rank_in(ParallelMode::kZero1, r), c.data % z);
  }
}

std::vector<Shape> AllShapes() {
  std::vector<Shape> shapes;
  for (int world : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32}) {
    for (int tensor : {1, 2, 3, 4, 8}) {
      for (int pipeline : {1, 2, 3, 4}) {
        if (world % (tensor * pipeline) != 0) continue;
        const int data = world / (tensor * pipeline);
        for (int zero1 = 0; zero1 <= data; ++zero1) {
          if (zero1 > 0 && data % zero1 != 0) continue;
          shapes.push_back({world, tensor, pipeline, zero1});
        }
      }
    }
  }
  return shapes;
}

INSTANTIATE_TEST_SUITE_P(Many, LayoutShapes, ::testing::ValuesIn(AllShapes()),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "w" + std::to_string(s.world) + "_t" +
                                  std::to_string(s.tensor) + "_p" +
                                  std::to_string(s.pipeline) + "_z" +
                                  std::to_string(s.zero1);
                         });

TEST(ModeSeedTest, ReplicasShareAndTensorShardsDiffer) {
  Layout l(8, {.tensor = 2, .pipeline = 2});
  // rank 7: data 1, pipeline 1, tensor 1.
  EXPECT_EQ(ModeSeed(ParallelMode::kData, 1024, l, 7), 1024u);
  EXPECT_EQ(ModeSeed(ParallelMode::kGlobal, 1024, l, 7), 1024u);
  EXPECT_EQ(ModeSeed(ParallelMode::kTensor, 1024, l, 7), 1024u + 1 + 1024);
  EXPECT_EQ(ModeSeed(ParallelMode::kTensor, 1024, l, 2), 1024u + 0 + 1024);
  // Data replicas (same pipeline stage and tensor shard) agree.
  EXPECT_EQ(ModeSeed(ParallelMode::kTensor, 5, l, 3),
            ModeSeed(ParallelMode::kTensor, 5, l, 7));
  EXPECT_THROW(ModeSeed(ParallelMode::kData, 1, l, 8), ConfigError);
}

}  // namespace
}  // namespace disttest
