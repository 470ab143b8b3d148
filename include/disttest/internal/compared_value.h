// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// How DIST_EXPECT_ALL_EQ sends a rank's value to its peers and compares it
// there: by value, with ==, as EXPECT_EQ compares, never by printed text.
//
//   std::string bytes;
//   ComparedValue<std::vector<double>>::Encode(v, bytes);     // this rank's
//   ValueReader in(peer_bytes);                               // a peer's
//   auto theirs = ComparedValue<std::vector<double>>::Decode(in);
//   bool same = ComparedValue<std::vector<double>>::Local(v) == theirs;
//
// The types that can be sent: numbers, enums and disttest::float16 and
// bfloat16; strings (std::string, std::string_view, C strings, and char
// arrays, every byte), compared whole; std::pair and std::optional of such;
// the standard containers of such (std::vector, std::array, std::deque,
// std::list, std::set, std::map, std::span) and C arrays, compared element
// by element in order, lengths included; and trivially copyable types with
// == that a user marks disttest::ComparableAcrossRanks<T> (their bytes
// mean the same in every rank). Anything else (a pointer, an unordered
// container, a class with a heap or an == of its own over its elements, a
// struct holding a string_view) is a compile error naming
// CannotBeComparedAcrossRanks<T>. Each rank's value is sent with a tag of
// its type and the assertion's file:line, so ranks at different
// assertions are told so, never compared as each other's bytes.
//
// Users never include this; collective_assertions.h does.
#ifndef DISTTEST_INTERNAL_COMPARED_VALUE_H_
#define DISTTEST_INTERNAL_COMPARED_VALUE_H_

#include <gtest/gtest.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <forward_list>
#include <iterator>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "disttest/comm/data_type.h"
#include "disttest/comm/half.h"

namespace disttest::internal {

// Reads what ComparedValue<T>::Encode wrote; throws Error when the bytes run
// out (a peer that sent another type: reached another assertion).
class ValueReader {
 public:
  explicit ValueReader(std::string_view bytes) : bytes_(bytes) {}
  void Read(void* out, std::size_t n);
  template <typename X>
  X Read() {
    X x;
    Read(&x, sizeof x);
    return x;
  }
  bool done() const { return bytes_.empty(); }
  // The bytes left: more elements than that cannot follow.
  std::size_t left() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

template <typename X>
void Append(std::string& out, const X& x) {
  out.append(reinterpret_cast<const char*>(&x), sizeof x);
}

// Floating point with every digit it needs to read back as the same value
// (the shortest such form: two values that differ never print alike, 0.1
// prints as 0.1); a 16-bit one with `digits` significant digits (its
// max_digits10). Others as gtest prints them.
std::string ShowFloat(long double value);
std::string ShowFloat(double value);
std::string ShowFloat(float value);
std::string ShowFloat(float value, int digits);
template <typename X>
std::string ShowElement(const X& x) {
  if constexpr (std::is_same_v<X, float> || std::is_same_v<X, double> ||
                std::is_same_v<X, long double>) {
    return ShowFloat(x);
  } else if constexpr (std::is_same_v<X, float16>) {
    return ShowFloat(static_cast<float>(x), 5);
  } else if constexpr (std::is_same_v<X, bfloat16>) {
    return ShowFloat(static_cast<float>(x), 4);
  } else if constexpr (std::is_same_v<X, ::__half>) {
    // CUDA's (cuda_fp16.h, included where one is compared): as float16,
    // not through the integer conversion gtest would pick.
    return ShowFloat(static_cast<float>(x), 5);
  } else if constexpr (std::is_same_v<X, ::__nv_bfloat16>) {
    return ShowFloat(static_cast<float>(x), 4);
#ifdef __FLT16_MANT_DIG__
  } else if constexpr (std::is_same_v<X, _Float16>) {
    return ShowFloat(static_cast<float>(x), 5);
#endif
#ifdef __BFLT16_MANT_DIG__
  } else if constexpr (std::is_same_v<X, __bf16>) {
    return ShowFloat(static_cast<float>(x), 4);
#endif
  } else if constexpr (std::is_same_v<X, std::optional<std::string>>) {
    return x ? ::testing::PrintToString(*x) : std::string("NULL");
  } else if constexpr (requires {
                         x.has_value();
                         *x;
                       }) {
    return x ? ShowElement(*x) : std::string("nullopt");
  } else if constexpr (requires {
                         x.first;
                         x.second;
                       }) {
    return "(" + ShowElement(x.first) + ", " + ShowElement(x.second) + ")";
  } else {
    return ::testing::PrintToString(x);
  }
}

// Named in the compiler's error for a type no rank can send.
template <typename T>
struct CannotBeComparedAcrossRanks : std::false_type {};

template <typename T>
concept CharString = std::is_same_v<T, std::string> ||
    std::is_same_v<T, std::string_view> || std::is_same_v<T, const char*> ||
    std::is_same_v<T, char*> ||
    (std::is_array_v<T>&&
         std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>);

// The standard containers compared element by element (their == is
// exactly that), C arrays and spans. Another iterable class may have an ==
// of its own (a tensor's shape beside its data): not taken as a range.
template <typename T>
struct IsStandardSequence : std::false_type {};
template <typename... A>
struct IsStandardSequence<std::vector<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::deque<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::list<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::forward_list<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::set<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::multiset<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::map<A...>> : std::true_type {};
template <typename... A>
struct IsStandardSequence<std::multimap<A...>> : std::true_type {};
template <typename E, std::size_t N>
struct IsStandardSequence<std::array<E, N>> : std::true_type {};
template <typename E, std::size_t N>
struct IsStandardSequence<std::span<E, N>> : std::true_type {};

template <typename T>
concept SequenceOfValues =
    !CharString<T> && (IsStandardSequence<T>::value ||
                       (std::is_array_v<T> && std::rank_v<T> == 1));

// Sent as their bytes and compared with their own ==: numbers, enums and
// the 16-bit floating-point types. A class of the user's only when it says
// so (disttest::ComparableAcrossRanks below): its bytes must mean the same
// in every rank (no pointer, no string_view, no handle).
template <typename T>
struct IsSentAsBytes
    : std::bool_constant<
          std::is_arithmetic_v<T> || std::is_enum_v<T> ||
          std::is_same_v<T, float16> || std::is_same_v<T, bfloat16> ||
          std::is_same_v<T, ::__half> || std::is_same_v<T, ::__nv_bfloat16>
#ifdef __FLT16_MANT_DIG__
          || std::is_same_v<T, _Float16>
#endif
#ifdef __BFLT16_MANT_DIG__
          || std::is_same_v<T, __bf16>
#endif
          > {
};

}  // namespace disttest::internal

namespace disttest {
// Specialize as std::true_type for a trivially copyable type with == whose
// bytes mean the same in every rank (no pointers), so that
// DIST_EXPECT_ALL_EQ can compare it:
//   template <> struct disttest::ComparableAcrossRanks<Shape>
//       : std::true_type {};
template <typename T>
struct ComparableAcrossRanks : std::false_type {};
}  // namespace disttest

namespace disttest::internal {

template <typename T>
concept PlainValue =
    (IsSentAsBytes<T>::value || ComparableAcrossRanks<T>::value) &&
    std::is_trivially_copyable_v<T>&& std::equality_comparable<T>;

template <typename T>
struct ComparedValue {
  static_assert(
      CannotBeComparedAcrossRanks<T>::value,
      "disttest: DIST_EXPECT_ALL_EQ / DIST_ASSERT_ALL_EQ send each rank's "
      "value to the others and compare them with ==; they take numbers, "
      "enums, strings, std::pair, std::optional, the standard containers of "
      "those (std::vector, std::array, std::map, ...), C arrays, and "
      "trivially copyable types with == marked "
      "disttest::ComparableAcrossRanks<T> (their bytes must mean the same "
      "in every rank). For another type compare what identifies it (a "
      "checksum, a size, a field); an unordered container as a sorted "
      "std::vector; a pointer's pointee, not its address");
};

// Numbers, enums, and trivially copyable values with ==: their bytes.
template <typename T>
requires PlainValue<T>
struct ComparedValue<T> {
  using Decoded = T;
  static Decoded Local(const T& value) { return value; }
  static void Encode(const T& value, std::string& out) { Append(out, value); }
  static Decoded Decode(ValueReader& in) {
    Decoded d;
    in.Read(&d, sizeof d);
    return d;
  }
};

// Strings, whole; a null C string is NULL, unequal to "".
template <CharString T>
struct ComparedValue<T> {
  using Decoded = std::optional<std::string>;
  static Decoded Local(const T& value) {
    if constexpr (std::is_pointer_v<T>) {
      if (value == nullptr) return std::nullopt;
      return std::string(value);
    } else if constexpr (std::is_array_v<T>) {
      // Every byte of a char array, past a NUL too: it may hold data.
      return std::string(value, std::extent_v<T>);
    } else {
      return std::string(value);
    }
  }
  static void Encode(const T& value, std::string& out) {
    const Decoded d = Local(value);
    Append(out, static_cast<std::uint8_t>(d.has_value()));
    Append(out, static_cast<std::uint64_t>(d ? d->size() : 0));
    if (d) out += *d;
  }
  static Decoded Decode(ValueReader& in) {
    if (in.Read<std::uint8_t>() == 0) {
      in.Read<std::uint64_t>();
      return std::nullopt;
    }
    const auto n = in.Read<std::uint64_t>();
    if (n > in.left()) in.Read(nullptr, n);  // Throws: it cannot hold them.
    std::string s(n, '\0');
    in.Read(s.data(), s.size());
    return s;
  }
};

template <typename A, typename B>
struct ComparedValue<std::pair<A, B>> {
  using First = ComparedValue<std::remove_cv_t<A>>;
  using Second = ComparedValue<std::remove_cv_t<B>>;
  using Decoded = std::pair<typename First::Decoded, typename Second::Decoded>;
  static Decoded Local(const std::pair<A, B>& value) {
    return {First::Local(value.first), Second::Local(value.second)};
  }
  static void Encode(const std::pair<A, B>& value, std::string& out) {
    First::Encode(value.first, out);
    Second::Encode(value.second, out);
  }
  static Decoded Decode(ValueReader& in) {
    auto first = First::Decode(in);
    return {std::move(first), Second::Decode(in)};
  }
};

// Whether it holds a value, then the value.
template <typename U>
struct ComparedValue<std::optional<U>> {
  using Of = ComparedValue<std::remove_cv_t<U>>;
  using Decoded = std::optional<typename Of::Decoded>;
  static Decoded Local(const std::optional<U>& value) {
    if (!value) return std::nullopt;
    return Of::Local(*value);
  }
  static void Encode(const std::optional<U>& value, std::string& out) {
    Append(out, static_cast<std::uint8_t>(value.has_value()));
    if (value) Of::Encode(*value, out);
  }
  static Decoded Decode(ValueReader& in) {
    if (in.Read<std::uint8_t>() == 0) return std::nullopt;
    return Of::Decode(in);
  }
};

// Ranges: their length, then their elements in order.
template <SequenceOfValues T>
struct ComparedValue<T> {
  using Element =
      std::remove_cvref_t<decltype(*std::begin(std::declval<const T&>()))>;
  using Of = ComparedValue<Element>;
  using Decoded = std::vector<typename Of::Decoded>;
  static Decoded Local(const T& value) {
    Decoded d;
    for (const auto& e : value) d.push_back(Of::Local(Element(e)));
    return d;
  }
  static void Encode(const T& value, std::string& out) {
    Append(out, static_cast<std::uint64_t>(
                    std::distance(std::begin(value), std::end(value))));
    for (const auto& e : value) Of::Encode(Element(e), out);
  }
  static Decoded Decode(ValueReader& in) {
    const auto n = in.Read<std::uint64_t>();
    if (n > in.left()) in.Read(nullptr, n);  // Throws: it cannot hold them.
    Decoded d;
    for (std::uint64_t i = 0; i < n; ++i) d.push_back(Of::Decode(in));
    return d;
  }
};

// What a disagreement shows of a decoded value: a sequence or a string a
// window around `at` (the first index where the ranks differ); anything
// else whole.
template <typename D>
std::string ShowAround(const D& value, std::size_t at) {
  constexpr std::size_t kBefore = 3, kAfter = 4;  // Elements of a sequence.
  constexpr std::size_t kChars = 24;              // Of a string, each side.
  if constexpr (std::is_same_v<D, std::optional<std::string>>) {
    if (!value) return "NULL";
    const std::string& s = *value;
    const std::size_t from = at > kChars ? at - kChars : 0;
    const std::size_t to = std::min(s.size(), at + kChars);
    std::string out = from > 0 ? "..." : "";
    out += ::testing::PrintToString(s.substr(from, to - from));
    if (to < s.size()) out += "...";
    if (from > 0 || to < s.size()) {
      out += " (" + std::to_string(s.size()) + " chars)";
    }
    return out;
  } else if constexpr (requires {
                         value.size();
                         value[0];
                       }) {
    const std::size_t from = at > kBefore ? at - kBefore : 0;
    const std::size_t to = std::min(value.size(), at + kAfter);
    std::string out = "{ ";
    if (from > 0) out += "[" + std::to_string(from) + "] ";
    for (std::size_t i = from; i < to; ++i) {
      if (i > from) out += ", ";
      out += ShowElement(value[i]);
    }
    if (to < value.size()) out += ", ...";
    out += " }";
    if (from > 0 || to < value.size()) {
      out += " (" + std::to_string(value.size()) + " elements)";
    }
    return out;
  } else {
    (void)at;
    return ShowElement(value);
  }
}

// The first index at which two decoded sequences or strings differ (their
// shorter length when one is the other's start); 0 for anything else.
template <typename D>
std::size_t FirstDifference(const D& a, const D& b) {
  if constexpr (std::is_same_v<D, std::optional<std::string>>) {
    if (!a || !b) return 0;
    return FirstDifference(*a, *b);
  } else if constexpr (requires {
                         a.size();
                         a[0];
                       }) {
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (!(a[i] == b[i])) return i;
    }
    return n;
  } else {
    return 0;
  }
}

}  // namespace disttest::internal

#endif  // DISTTEST_INTERNAL_COMPARED_VALUE_H_
