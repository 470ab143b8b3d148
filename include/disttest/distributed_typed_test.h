// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// DIST_TYPED_TEST: a distributed test for each type of a list, at each of
// its world sizes.
//
//   template <typename T>
//   class Typed : public disttest::DistributedTest {};
//   using Numbers = ::testing::Types<int, float>;
//   DIST_TYPED_TEST_SUITE(Typed, Numbers);
//
//   DIST_TYPED_TEST(Typed, Sums, 2, 4) {
//     TypeParam x = 1;
//     this->comm().allreduce(&x, 1, disttest::ReduceOp::kSum);
//     EXPECT_EQ(x, TypeParam(this->world_size()));
//   }
//
// The tests are "Typed/0.Sums/4ranks", the type in the XML's type_param.
#ifndef DISTTEST_DISTRIBUTED_TYPED_TEST_H_
#define DISTTEST_DISTRIBUTED_TYPED_TEST_H_

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "disttest/distributed_test.h"
#include "disttest/internal/registration.h"

namespace disttest::internal {

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

#endif  // DISTTEST_DISTRIBUTED_TYPED_TEST_H_
