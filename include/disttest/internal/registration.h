// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What DIST_TEST_F needs and users must not call.
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
    auto* test = static_cast<Test*>(inner_.CreateTest());
    TestAccess::Configure(*test, n_, file_, line_, error_);
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

// --- DIST_TYPED_TEST ----------------------------------------------------
//
// One suite per type, "Suite/<name>" (gtest's default names are the type's
// index, "Suite/0"; a DIST_TYPED_TEST_SUITE name generator gives others),
// its tests "Suite/0.Name/4ranks", the type in the XML's type_param.

template <typename G = ::testing::internal::DefaultNameGenerator>
using TypeNamesOr = G;

template <template <typename> class Fixture, template <typename> class Test,
          typename Names, typename Types>
struct TypedTestRegistrar {
  static bool Register(const char* suite, const char* name, const char* file,
                       int line, std::initializer_list<int> sizes,
                       int index = 0) {
    using T = typename Types::Head;
    const std::string typed_suite =
        std::string(suite) + "/" + Names::template GetName<T>(index);
    RegisterDistributedTest<Fixture<T>, Test<T>>(
        typed_suite.c_str(), name, file, line, sizes, "DIST_TYPED_TEST",
        ::testing::internal::GetTypeName<T>().c_str());
    return TypedTestRegistrar<Fixture, Test, Names,
                              typename Types::Tail>::Register(suite, name, file,
                                                              line, sizes,
                                                              index + 1);
  }
};

template <template <typename> class Fixture, template <typename> class Test,
          typename Names>
struct TypedTestRegistrar<Fixture, Test, Names, ::testing::internal::None> {
  static bool Register(const char*, const char*, const char*, int,
                       std::initializer_list<int>, int = 0) {
    return true;
  }
};

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

// DIST_TYPED_TEST_SUITE(Fixture, Types[, NameGenerator]);
// DIST_TYPED_TEST(Fixture, Name[, world sizes...]) { body }
//
// Fixture is a class template over one type, derived from DistributedTest;
// Types a ::testing::Types<...> (give it a name first: a comma in a macro
// argument splits it). In the body, TypeParam is the type and the fixture's
// members need this-> (as in TYPED_TEST). The tests are
// "Fixture/<index>.Name/4ranks" (a NameGenerator names them as in
// TYPED_TEST_SUITE).
#define DIST_TYPED_TEST_SUITE(fixture, types, ...)        \
  using disttest_typed_types_##fixture##_ =               \
      ::testing::internal::GenerateTypeList<types>::type; \
  using disttest_typed_names_##fixture##_ =               \
      ::disttest::internal::TypeNamesOr<__VA_ARGS__>

#define DIST_TYPED_TEST(fixture, name, ...)                                 \
  static_assert(sizeof(#name) > 1, "DIST_TYPED_TEST needs a test name");    \
  template <typename disttest_TypeParam_>                                   \
  class DISTTEST_CLASS_NAME_(fixture, name)                                 \
      : public fixture<disttest_TypeParam_> {                               \
   public:                                                                  \
    using TestFixture = fixture<disttest_TypeParam_>;                       \
    using TypeParam = disttest_TypeParam_;                                  \
    DISTTEST_CLASS_NAME_(fixture, name)() = default;                        \
                                                                            \
   private:                                                                 \
    void RunDistributedBody() override;                                     \
  };                                                                        \
  [[maybe_unused]] static const bool disttest_typed_##fixture##_##name##_ = \
      ::disttest::internal::TypedTestRegistrar<                             \
          fixture, DISTTEST_CLASS_NAME_(fixture, name),                     \
          disttest_typed_names_##fixture##_,                                \
          disttest_typed_types_##fixture##_>::Register(#fixture, #name,     \
                                                       __FILE__, __LINE__,  \
                                                       {__VA_ARGS__});      \
  template <typename disttest_TypeParam_>                                   \
  void DISTTEST_CLASS_NAME_(fixture,                                        \
                            name)<disttest_TypeParam_>::RunDistributedBody()

#endif  // DISTTEST_INTERNAL_REGISTRATION_H_
