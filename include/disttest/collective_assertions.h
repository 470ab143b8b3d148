// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// Collective assertions: every rank passes its own value, and the check is
// whether the ranks agree.
//
//   DIST_TEST_F(Training, SameChecksumEverywhere, 4) {
//     DIST_EXPECT_ALL_EQ(Checksum(model));   // each rank's checksum
//     DIST_ASSERT_ALL_TRUE(loss < 10.0);     // true on every rank
//     comm().barrier();                      // safe: see below
//   }
//
// When the ranks disagree, every rank fails with the same table, grouped by
// value ("43: rank 1" / "42: ranks 0, 2, 3"), so the odd rank out is obvious
// at any world size. Values are compared as EXPECT_EQ compares them: with
// == on the values themselves (every rank's value is sent to every rank),
// a container element by element and in full, a string whole; 0.0 and
// -0.0 agree, 500 and 500.0001 do not. The table prints floating point
// with every digit it needs, and a container or a string as a window
// around the first index where the ranks differ. The types that can be
// compared are those of disttest/internal/compared_value.h (numbers,
// enums, strings, pairs, optionals, the standard containers of those, C
// arrays, and types marked disttest::ComparableAcrossRanks<T>); another is
// a compile error that says what to compare instead.
//
// These are collectives: every rank must reach the same assertion, in the
// same order, as for any comm() call. In return the fatal forms
// (DIST_ASSERT_*) return from the function on every rank together, so no
// rank is left waiting in a later collective for one that has left. They
// work in a DIST_TEST_F body, in SetUpRank()/TearDownRank() and in any
// function those call, on the test's comm(); the _ON forms
// (DIST_EXPECT_ALL_EQ_ON(comm, value), ...) on any communicator.
#ifndef DISTTEST_COLLECTIVE_ASSERTIONS_H_
#define DISTTEST_COLLECTIVE_ASSERTIONS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "disttest/comm/communicator.h"
#include "disttest/error.h"
#include "disttest/internal/compared_value.h"

namespace disttest::internal {

// The communicator of the rank this thread runs; throws Error outside a rank
// or without one.
Communicator& CurrentCommunicator();

// The outcome of a collective check: converts to true when the ranks agree.
class Agreement {
 public:
  explicit Agreement(std::string failure) : failure_(std::move(failure)) {}
  explicit operator bool() const { return failure_.empty(); }
  const std::string& message() const { return failure_; }

 private:
  std::string failure_;
};

// Every rank's `mine`, indexed by rank (an allgather of their lengths, then
// of their bytes, on `comm`, recorded at `where`), for assertion `macro` of
// `expression`: a CommError of the allgathers (ranks that reached the
// assertions a different number of times) names it.
std::vector<std::string> GatherBytes(Communicator& comm,
                                     const std::string& mine,
                                     const CallSite& where, const char* macro,
                                     const char* expression);

// The failure of an assertion whose ranks hold different values: `rows`
// are the values as shown, each with the ranks that hold it, in order of
// their first rank. `at` names the first index that differs ("" for a
// value without one).
Agreement Disagreement(
    const char* macro, const char* expression, const Communicator& comm,
    const Communicator* on, const std::string& at,
    const std::vector<std::pair<std::string, std::vector<int>>>& rows);

// A tag of what a rank compares and where: the decoded type's name, the
// asserted source text and the assertion's file:line, hashed (FNV-1a): two
// assertions on one line (`rank() == 0 ? ... : ...`) are told apart.
std::uint64_t AssertionTag(const char* type, const char* expression,
                           const CallSite& where);

// The failure of ranks that are at another assertion, or compare a value
// of another type there: `elsewhere` (this rank compares `type` at `where`).
Agreement Elsewhere(const char* macro, const char* expression,
                    const Communicator& comm, const Communicator* on,
                    const std::vector<int>& elsewhere, const CallSite& where);

// Where the ranks are threads of one process (LaunchMode::kThreads):
// `object`'s address, which the ranks gather with their values; 0
// elsewhere, where an address says nothing of another rank's, and for an
// object within the test's parameter (GetParam()), which the ranks share
// by design.
std::uintptr_t AddressWhereRanksAreThreads(const volatile void* object);

// Whether the asserted source text is a plain name ("kName",
// "ns::kName"): not a member access, a call, a subscript or a
// dereference, which may reach a writable object through a const one.
bool IsPlainName(const char* expression);

// The parameter of the DIST_TEST_P test being made (`size` bytes at
// `object`), which every rank thread of it reads through GetParam().
void NoteTestParameter(const void* object, std::size_t size);

// Whether an asserted expression's type is that of an object declared
// const (`Declared` is its decltype(e)): with IsPlainName, a `const` global
// named as such. A reference or a call's result (`std::as_const(g)`, a
// `const int&` bound to a global), or a member (`view.total`,
// `g_holder->sum` of a const member), may be a writable object the rank
// threads share: not such a name.
template <typename Declared>
constexpr bool NamesAConstObject() {
  return !std::is_reference_v<Declared> && std::is_const_v<Declared>;
}

// The failure of ranks that agree because every one of them passed one
// writable object (`addresses`, of AddressWhereRanksAreThreads): rank
// threads share it, and comparing it compares nothing. Agreement("")
// where they passed objects of their own, or a constant.
Agreement OneSharedObject(const char* macro, const char* expression,
                          const Communicator& comm, const Communicator* on,
                          const std::vector<std::uintptr_t>& addresses);

// Every rank's `value`, compared with == on every rank; a failure message
// with the table of values when they differ. `expression` is the asserted
// source text, `macro` names the assertion. On `on` (null: the test's).
// `constant`: the asserted expression's type is that of an object declared
// const (NamesAConstObject); one that is also a plain name (a `const`
// global) the ranks may share as threads without comparing nothing.
template <typename T>
Agreement AllEqual(const char* macro, const char* expression, const T& value,
                   Communicator* on, bool constant = false,
                   CallSite where = CallSite::current()) {
  static_assert(!std::is_volatile_v<T>,
                "a collective assertion of a volatile object: copy it into a "
                "local (int seen = g_flag;) and compare that");
  using Compared = ComparedValue<std::remove_cv_t<T>>;
  using Decoded = typename Compared::Decoded;
  Communicator& comm = on != nullptr ? *on : CurrentCommunicator();
  const std::uint64_t tag =
      AssertionTag(typeid(Decoded).name(), expression, where);
  std::string mine;
  Append(mine, tag);
  Append(mine, constant && IsPlainName(expression)
                   ? 0
                   : AddressWhereRanksAreThreads(std::addressof(value)));
  Compared::Encode(value, mine);
  const std::vector<std::string> all =
      GatherBytes(comm, mine, where, macro, expression);
  // Each distinct value with the ranks that hold it, in order of first rank.
  std::vector<std::pair<Decoded, std::vector<int>>> groups;
  std::vector<int> elsewhere;
  std::vector<std::uintptr_t> addresses;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    std::optional<Decoded> theirs;
    try {
      ValueReader in(all[r]);
      if (in.Read<std::uint64_t>() == tag) {
        addresses.push_back(in.Read<std::uintptr_t>());
        theirs = Compared::Decode(in);
        if (!in.done()) theirs.reset();
      }
    } catch (const Error&) {
    }
    if (!theirs) {
      elsewhere.push_back(r);
      continue;
    }
    auto it = groups.begin();
    while (it != groups.end() && !(it->first == *theirs)) ++it;
    if (it == groups.end()) {
      groups.push_back({std::move(*theirs), {r}});
    } else {
      it->second.push_back(r);
    }
  }
  if (!elsewhere.empty()) {
    return Elsewhere(macro, expression, comm, on, elsewhere, where);
  }
  // A value that holds NaN is a group of its own on every rank; on one rank
  // alone too, as EXPECT_EQ(nan, nan) fails.
  if (groups.size() == 1 && groups[0].first == groups[0].first) {
    return OneSharedObject(macro, expression, comm, on, addresses);
  }
  // One window for every row: around the first index where any value
  // differs from the first row's (from itself, where it is alone).
  std::size_t at = groups.size() == 1
                       ? FirstDifference(groups[0].first, groups[0].first)
                       : SIZE_MAX;
  bool unequal_to_itself = false;  // NaN, as EXPECT_EQ has it.
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (g > 0) {
      at = std::min(at, FirstDifference(groups[0].first, groups[g].first));
    }
    unequal_to_itself |= !(groups[g].first == groups[g].first);
  }
  std::vector<std::pair<std::string, std::vector<int>>> rows;
  for (auto& [decoded, ranks] : groups) {
    rows.push_back({ShowAround(decoded, at), std::move(ranks)});
  }
  const bool indexed = requires(const Decoded& d) { d.size(); }
  || std::is_same_v<Decoded, std::optional<std::string>>;
  Agreement failure =
      Disagreement(macro, expression, comm, on,
                   indexed ? std::to_string(at) : std::string(), rows);
  if (!unequal_to_itself) return failure;
  return Agreement(failure.message() +
                   "\n  (a value that holds NaN equals nothing, itself "
                   "included, as with EXPECT_EQ)");
}

// Gathers every rank's `value`; a failure naming the ranks where it is false.
// `address`: of AddressWhereRanksAreThreads, for an object the condition
// names (0: a value computed, or a constant); rank threads that all pass
// one writable object fail as AllEqual's do.
Agreement AllTrue(const char* macro, const char* expression, bool value,
                  Communicator* comm, std::uintptr_t address = 0,
                  CallSite where = CallSite::current());

// AllTrue of `condition`, evaluated once: the object it names, where it is
// one (`lvalue`: a `bool` global), goes with it.
template <typename T>
Agreement AllTrueOf(const char* macro, const char* expression,
                    const T& condition, Communicator* comm, bool constant,
                    bool lvalue, CallSite where = CallSite::current()) {
  const std::uintptr_t address =
      lvalue && !(constant && IsPlainName(expression))
          ? AddressWhereRanksAreThreads(std::addressof(condition))
          : 0;
  return AllTrue(macro, expression, static_cast<bool>(condition), comm, address,
                 where);
}

}  // namespace disttest::internal

#define DISTTEST_COLLECTIVE_(agreement, on_failure)                          \
  GTEST_AMBIGUOUS_ELSE_BLOCKER_                                              \
  if (const ::disttest::internal::Agreement disttest_agreement_ = agreement) \
    ;                                                                        \
  else                                                                       \
    on_failure(disttest_agreement_.message().c_str())

// One assertion: `macro` and `text` (the asserted source, stringized by the
// public macro) for the message, on `comm` (null: the test's comm()).
#define DISTTEST_ALL_EQ_(macro, text, value, comm, on_failure)         \
  DISTTEST_COLLECTIVE_(                                                \
      ::disttest::internal::AllEqual(                                  \
          macro, text, value, comm,                                    \
          ::disttest::internal::NamesAConstObject<decltype(value)>()), \
      on_failure)
#define DISTTEST_ALL_TRUE_(macro, text, condition, comm, on_failure)      \
  DISTTEST_COLLECTIVE_(                                                   \
      ::disttest::internal::AllTrueOf(                                    \
          macro, text, condition, comm,                                   \
          ::disttest::internal::NamesAConstObject<decltype(condition)>(), \
          std::is_lvalue_reference_v<decltype((condition))>),             \
      on_failure)
#define DISTTEST_ON_(comm) &static_cast<::disttest::Communicator&>(comm)

// Every rank's `value` must be equal (==).
#define DIST_EXPECT_ALL_EQ(value)                                \
  DISTTEST_ALL_EQ_("DIST_EXPECT_ALL_EQ", #value, value, nullptr, \
                   GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_EQ(value)                                \
  DISTTEST_ALL_EQ_("DIST_ASSERT_ALL_EQ", #value, value, nullptr, \
                   GTEST_FATAL_FAILURE_)

// `condition` must hold on every rank.
#define DIST_EXPECT_ALL_TRUE(condition)                                      \
  DISTTEST_ALL_TRUE_("DIST_EXPECT_ALL_TRUE", #condition, condition, nullptr, \
                     GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_TRUE(condition)                                      \
  DISTTEST_ALL_TRUE_("DIST_ASSERT_ALL_TRUE", #condition, condition, nullptr, \
                     GTEST_FATAL_FAILURE_)

// The same on a communicator of the test's own (one it made with
// CreateCommunicator(), with or without options().init_distributed): every
// rank of `comm` must reach it.
//   DIST_EXPECT_ALL_EQ_ON(*mine, Checksum(model));
#define DIST_EXPECT_ALL_EQ_ON(comm, value)                                     \
  DISTTEST_ALL_EQ_("DIST_EXPECT_ALL_EQ_ON", #value, value, DISTTEST_ON_(comm), \
                   GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_EQ_ON(comm, value)                                     \
  DISTTEST_ALL_EQ_("DIST_ASSERT_ALL_EQ_ON", #value, value, DISTTEST_ON_(comm), \
                   GTEST_FATAL_FAILURE_)
#define DIST_EXPECT_ALL_TRUE_ON(comm, condition)                       \
  DISTTEST_ALL_TRUE_("DIST_EXPECT_ALL_TRUE_ON", #condition, condition, \
                     DISTTEST_ON_(comm), GTEST_NONFATAL_FAILURE_)
#define DIST_ASSERT_ALL_TRUE_ON(comm, condition)                       \
  DISTTEST_ALL_TRUE_("DIST_ASSERT_ALL_TRUE_ON", #condition, condition, \
                     DISTTEST_ON_(comm), GTEST_FATAL_FAILURE_)

#endif  // DISTTEST_COLLECTIVE_ASSERTIONS_H_
