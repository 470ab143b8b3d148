// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DIST_TEST_P: a distributed test over gtest's parameters, at each of its
// world sizes.
//
//   class Sweep : public disttest::DistributedTest,
//                 public ::testing::WithParamInterface<int> {};
//
//   DIST_TEST_P(Sweep, AllReduces, 2, 4) {
//     int x = GetParam();
//     comm().allreduce(&x, 1, disttest::ReduceOp::kSum);
//     EXPECT_EQ(x, GetParam() * world_size());
//   }
//   INSTANTIATE_TEST_SUITE_P(Counts, Sweep, ::testing::Values(1, 8));
//
// The tests are "Counts/Sweep.AllReduces/4ranks/0" (a name generator names
// the last part, as with TEST_P).
#ifndef DISTTEST_DISTRIBUTED_PARAM_TEST_H_
#define DISTTEST_DISTRIBUTED_PARAM_TEST_H_

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "disttest/collective_assertions.h"
#include "disttest/distributed_test.h"
#include "disttest/internal/registration.h"

namespace disttest::internal {

// --- DIST_TEST_P --------------------------------------------------------
//
// Each world size is a pattern of gtest's own parameterized-test registry
// ("Name/4ranks"), so INSTANTIATE_TEST_SUITE_P, its name generators and
// gtest's check for a suite never instantiated work as with TEST_P; the
// tests are "Prefix/Suite.Name/4ranks/param".

// A parameterized test's factories, for pooled ranks, which make a test from
// its name: by the suite, the pattern and the parameter as gtest prints it
// (the TestInfo's value_param(); two that print alike cannot be told
// apart, and FindParamTestFactory refuses them).
struct ParamTestFactory {
  std::string suite;    // "Suite", without an instantiation's prefix.
  std::string pattern;  // "Name/4ranks"
  std::string param;    // PrintToString(parameter)
  std::function<DistributedTest*()> make;
};
std::vector<ParamTestFactory>& ParamTestFactories();

// The factory of the parameterized test of full gtest name `test`
// ("Prefix/Suite.Name/4ranks/param"), or null. Throws Error when several
// parameters of its pattern print alike (which is which cannot be told).
std::function<DistributedTest*()> FindParamTestFactory(const std::string& test);

// One test of a pattern, for one parameter (gtest owns it: the parameter
// GetParam() returns lives here).
template <typename Test>
class DistParamTestFactory : public ::testing::internal::TestFactoryBase {
 public:
  DistParamTestFactory(typename Test::ParamType param, int n, const char* file,
                       int line, std::string error)
      : inner_(param), n_(n), file_(file), line_(line), error_(error) {}
  ::testing::Test* CreateTest() override {
    const MakingWorldSize making(n_);
    auto* test = static_cast<Test*>(inner_.CreateTest());
    TestAccess::Configure(*test, n_, file_, line_, error_);
    NoteTestParameter(&Test::GetParam(), sizeof(typename Test::ParamType));
    return test;
  }

 private:
  ::testing::internal::ParameterizedTestFactory<Test> inner_;
  const int n_;
  const char* const file_;
  const int line_;
  const std::string error_;
};

// What gtest's registry calls once per parameter of each instantiation.
template <typename Test>
class DistParamMetaFactory : public ::testing::internal::TestMetaFactoryBase<
                                 typename Test::ParamType> {
 public:
  using ParamType = typename Test::ParamType;
  DistParamMetaFactory(std::string suite, std::string pattern, int n,
                       const char* file, int line, std::string error)
      : suite_(std::move(suite)),
        pattern_(std::move(pattern)),
        n_(n),
        file_(file),
        line_(line),
        error_(std::move(error)) {}
  ::testing::internal::TestFactoryBase* CreateTestFactory(
      ParamType parameter) override {
    auto* factory =
        new DistParamTestFactory<Test>(parameter, n_, file_, line_, error_);
    if (error_.empty()) {
      ParamTestFactories().push_back(
          {suite_, pattern_, ::testing::PrintToString(parameter), [factory] {
             return static_cast<DistributedTest*>(
                 static_cast<Test*>(factory->CreateTest()));
           }});
    }
    return factory;
  }

 private:
  const std::string suite_;
  const std::string pattern_;
  const int n_;
  const char* const file_;
  const int line_;
  const std::string error_;
};

template <typename Fixture, typename Test>
bool RegisterParamDistributedTest(const char* suite, const char* name,
                                  const char* file, int line,
                                  std::initializer_list<int> sizes) {
  const ::testing::internal::CodeLocation where(file, line);
  auto* holder = ::testing::UnitTest::GetInstance()
                     ->parameterized_test_registry()
                     .GetTestSuitePatternHolder<Fixture>(suite, where);
  ForEachWorldSize(
      "DIST_TEST_P", suite, name, sizes, Fixture::kDefaultWorldSize,
      [&](int n, const std::string& pattern, const std::string& error) {
        holder->AddTestPattern(suite, pattern.c_str(),
                               new DistParamMetaFactory<Test>(
                                   suite, pattern, n, file, line, error),
                               where);
      });
  return true;
}

}  // namespace disttest::internal

// DIST_TEST_P(Fixture, Name[, world sizes...]) { body }
//
// Fixture is a DistributedTest and a ::testing::WithParamInterface<T> (or a
// disttest::DistributedTestWithParam<T>); GetParam() works in every rank.
// Instantiate it with gtest's own INSTANTIATE_TEST_SUITE_P(Prefix, Fixture,
// generator[, name generator]); the tests are
// "Prefix/Fixture.Name/4ranks/<param>".
#define DIST_TEST_P(fixture, name, ...)                                      \
  DISTTEST_TEST_("DIST_TEST_P", RegisterParamDistributedTest, fixture, name, \
                 __VA_ARGS__)

#endif  // DISTTEST_DISTRIBUTED_PARAM_TEST_H_
