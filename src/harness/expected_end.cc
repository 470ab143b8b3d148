// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "harness/expected_end.h"

#include <fmt/format.h>

#include <charconv>

namespace disttest::internal {
namespace {

bool ParseInt(std::string_view text, int* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && p == end && !text.empty();
}

}  // namespace

std::string ExpectedEnd::str() const {
  if (signal) {
    return fmt::format("be killed by signal {} ({})", value, SignalName(value));
  }
  return fmt::format("exit with status {}", value);
}

bool ExpectedEnd::Matches(const RankOutcome& o) const {
  return signal ? o.signaled() && o.signal() == value
                : o.exited() && o.exit_code() == value;
}

std::string EncodeExpectedEnd(int rank, const ExpectedEnd& end) {
  return fmt::format("{} {} {} {}{}", rank, end.signal ? "signal" : "exit",
                     end.value, end.declared_ns, end.after_end ? " ended" : "");
}

std::optional<std::pair<int, ExpectedEnd>> DecodeExpectedEnd(
    std::string_view text) {
  const std::size_t a = text.find(' ');
  if (a == std::string_view::npos) return std::nullopt;
  const std::size_t b = text.find(' ', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  int rank = 0;
  ExpectedEnd end;
  const std::size_t c = text.find(' ', b + 1);
  if (c == std::string_view::npos) return std::nullopt;
  const std::string_view how = text.substr(a + 1, b - a - 1);
  std::string_view when = text.substr(c + 1);
  if (when.ends_with(" ended")) {
    end.after_end = true;
    when.remove_suffix(6);
  }
  if (!ParseInt(text.substr(0, a), &rank) ||
      !ParseInt(text.substr(b + 1, c - b - 1), &end.value) ||
      (how != "signal" && how != "exit") || when.empty() ||
      when.find_first_not_of("0123456789") != std::string_view::npos ||
      when.size() > 18) {
    return std::nullopt;
  }
  for (char digit : when)
    end.declared_ns = end.declared_ns * 10 + (digit - '0');
  end.signal = how == "signal";
  return std::make_pair(rank, end);
}

}  // namespace disttest::internal
