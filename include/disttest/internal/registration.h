// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What DIST_TEST_F needs and users must not call. DIST_TEST_P and
// DIST_TYPED_TEST are in public headers of their own
// (distributed_param_test.h, distributed_typed_test.h).
#ifndef DISTTEST_INTERNAL_REGISTRATION_H_
#define DISTTEST_INTERNAL_REGISTRATION_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "disttest/distributed_test.h"

namespace disttest::internal {

struct TestAccess {
  static void Configure(DistributedTest& test, int world_size, const char* file,
                        int line, std::string registration_error = "") {
    test.registered_world_size_ = world_size;
    test.file_ = file;
    test.line_ = line;
    test.registration_error_ = std::move(registration_error);
  }
  static void Bind(DistributedTest& test, const RankEnv* env,
                   Communicator* comm, Store* store) {
    test.rank_env_ = env;
    test.comm_ = comm;
    test.store_ = store;
  }
  static void BindContext(DistributedTest& test, Context* ctx) {
    test.ctx_ = ctx;
  }
  static void SetUpRank(DistributedTest& test) { test.SetUpRank(); }
  static void MarkDeathTestChild(DistributedTest& test) {
    test.death_test_child_ = true;
  }
  // gtest's own fixture hooks, for a pooled rank's tests (gtest runs them
  // everywhere else).
  static void SetUp(DistributedTest& test) { test.SetUp(); }
  static void TearDown(DistributedTest& test) { test.TearDown(); }
  static void Body(DistributedTest& test) { test.RunDistributedBody(); }
  static void TearDownRank(DistributedTest& test) { test.TearDownRank(); }
  static const char* file(const DistributedTest& test) { return test.file_; }
  static int line(const DistributedTest& test) { return test.line_; }
  static int world_size(const DistributedTest& test) {
    return test.registered_world_size_;
  }
  static const Options& options(const DistributedTest& test) {
    return test.options_;
  }
};

struct FixtureAccess {
  static std::vector<std::unique_ptr<DistributedFixture>>& fixtures(
      DistributedTest& test) {
    return test.fixtures_;
  }
  static void SetName(DistributedFixture& f, std::string name) {
    f.name_ = std::move(name);
  }
  static void SetDir(DistributedFixture& f, std::filesystem::path dir) {
    f.dir_ = std::move(dir);
  }
  static void Bind(DistributedFixture& f, const RankEnv* env,
                   Communicator* comm, Store* store) {
    f.rank_env_ = env;
    f.comm_ = comm;
    f.store_ = store;
  }
  static void Run(DistributedFixture& f) { f.Run(); }
};

// "Name/4ranks": the world size is part of the gtest name. A size outside
// [1, kMaxWorldSize] gives "Name/invalid_world_size_0" (or "..._minus_1"),
// a test that fails and says why.
std::string DistributedTestName(const char* name, int world_size);

// For a world size listed twice in one DIST_TEST_F: the failing test's name
// ("Name/2ranks_listed_again", "Name/2ranks_listed_again2" for a third
// time) and what it says.
std::string DuplicateWorldSizeName(const char* name, int world_size,
                                   const std::vector<int>& sizes,
                                   std::size_t index);
std::string DuplicateWorldSizeError(const char* macro, const char* suite,
                                    const char* name, int world_size);

// Every DIST_TEST_F test by its full gtest name ("Suite.Name/2ranks"): how
// to make it. Pooled ranks make the tests they are handed.
std::map<std::string, std::function<DistributedTest*()>>& TestFactories();

// Calls `each(n, test_name, error)` for every world size of a
// DIST_TEST_F/_P/TYPED_TEST (the fixture's default when `sizes` is empty).
// A size listed again is a test of its own that fails saying so (two gtest
// tests of one name would run the same test twice): its error is not
// empty.
template <typename F>
void ForEachWorldSize(const char* macro, const char* suite, const char* name,
                      std::initializer_list<int> sizes, int default_size,
                      F&& each) {
  std::vector<int> all(sizes);
  if (all.empty()) all.push_back(default_size);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const int n = all[i];
    const bool again =
        std::find(all.begin(), all.begin() + i, n) != all.begin() + i;
    each(
        n,
        again ? DuplicateWorldSizeName(name, n, all, i)
              : DistributedTestName(name, n),
        again ? DuplicateWorldSizeError(macro, suite, name, n) : std::string());
  }
}

// Registers one gtest test per world size. Runs during static
// initialisation. `type_param`: a typed test's type, for the XML.
template <typename Fixture, typename Test>
bool RegisterDistributedTest(const char* suite, const char* name,
                             const char* file, int line,
                             std::initializer_list<int> sizes,
                             const char* macro = "DIST_TEST_F",
                             const char* type_param = nullptr) {
  ForEachWorldSize(
      macro, suite, name, sizes, Fixture::kDefaultWorldSize,
      [&](int n, const std::string& test_name, const std::string& error) {
        auto make = [=]() -> Fixture* {
          const MakingWorldSize making(n);
          auto* test = new Test();
          TestAccess::Configure(*test, n, file, line, error);
          return test;
        };
        if (error.empty()) {
          TestFactories()[std::string(suite) + "." + test_name] = make;
        }
        ::testing::RegisterTest(suite, test_name.c_str(), type_param, nullptr,
                                file, line, make);
      });
  return true;
}

}  // namespace disttest::internal

#define DISTTEST_CLASS_NAME_(fixture, name) fixture##_##name##_DistTest

// The test class of DIST_TEST_F and DIST_TEST_P, registered by `registrar`.
#define DISTTEST_TEST_(macro, registrar, fixture, name, ...)                \
  static_assert(sizeof(#name) > 1, macro " needs a test name");             \
  class DISTTEST_CLASS_NAME_(fixture, name) : public fixture {              \
   public:                                                                  \
    DISTTEST_CLASS_NAME_(fixture, name)() = default;                        \
                                                                            \
   private:                                                                 \
    void RunDistributedBody() override;                                     \
    static const bool disttest_registered_;                                 \
  };                                                                        \
  const bool DISTTEST_CLASS_NAME_(fixture, name)::disttest_registered_ =    \
      ::disttest::internal::registrar<fixture,                              \
                                      DISTTEST_CLASS_NAME_(fixture, name)>( \
          #fixture, #name, __FILE__, __LINE__, {__VA_ARGS__});              \
  void DISTTEST_CLASS_NAME_(fixture, name)::RunDistributedBody()

// DIST_TEST_F(Fixture, Name[, world sizes...]) { body }
#define DIST_TEST_F(fixture, name, ...)                                 \
  DISTTEST_TEST_("DIST_TEST_F", RegisterDistributedTest, fixture, name, \
                 __VA_ARGS__)

// The sweeps' macros come with DIST_TEST_F (public headers of their own).
#include "disttest/distributed_param_test.h"  // IWYU pragma: export
#include "disttest/distributed_typed_test.h"  // IWYU pragma: export

#endif  // DISTTEST_INTERNAL_REGISTRATION_H_
