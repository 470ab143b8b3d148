// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "disttest/collective_assertions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "base/threads.h"
#include "disttest/error.h"
#include "glue/current_communicator.h"

namespace disttest::internal {
namespace {

// "rank 1" or "ranks 0, 2, 3".
std::string Ranks(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks",
                     fmt::join(ranks, ", "));
}

// " of communicator \"mine\"" for an assertion on a communicator the test
// made ("" on the test's own).
std::string Of(const Communicator* on) {
  if (on == nullptr) return "";
  const std::string& name = on->name();
  if (name.empty()) return " of its communicator";
  // An unnamed one is already 'communicator "<prefix>"'.
  if (name.rfind("communicator \"", 0) == 0 || name == "unnamed communicator") {
    return " of " + name;
  }
  return fmt::format(" of communicator \"{}\"", name);
}

// Whether `address` lies in a mapping of this process that can be written
// (/proc/self/maps): a constant (a literal, a constexpr global) is in one
// that cannot, and is the same on every rank in any mode. Where the maps
// cannot be read, as if it could be.
bool Writable(std::uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return true;
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start = 0;
    unsigned long long end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &start, &end, perms) != 3) {
      continue;
    }
    if (address >= start && address < end) return perms[1] == 'w';
  }
  return true;
}

// "model_test.cc" of "/src/tests/model_test.cc".
std::string_view Basename(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

Communicator& CurrentCommunicator() {
  Communicator* comm = CurrentCommunicatorOrNull();
  if (comm == nullptr) {
    throw Error(
        "a collective assertion (DIST_EXPECT_ALL_*) needs a rank with a "
        "communicator: use it in a DIST_TEST_F body, SetUpRank() or "
        "TearDownRank() of a test with options().init_distributed");
  }
  return *comm;
}

void ValueReader::Read(void* out, std::size_t n) {
  if (n > bytes_.size()) {
    throw Error(fmt::format(
        "a collective assertion's value ends {} bytes early: the ranks "
        "compare values of different types (are they at different "
        "assertions?)",
        n - bytes_.size()));
  }
  if (n > 0) std::memcpy(out, bytes_.data(), n);
  bytes_.remove_prefix(n);
}

// The shortest text that reads back as the same value: values that differ
// never print alike.
std::string ShowFloat(long double value) { return fmt::format("{}", value); }
std::string ShowFloat(double value) { return fmt::format("{}", value); }
std::string ShowFloat(float value) { return fmt::format("{}", value); }
std::string ShowFloat(float value, int digits) {
  return fmt::format("{:.{}g}", value, digits);
}

namespace {
// NoteTestParameter's, read by every rank thread.
std::atomic<std::uintptr_t> g_parameter{0};
std::atomic<std::size_t> g_parameter_size{0};
}  // namespace

void NoteTestParameter(const void* object, std::size_t size) {
  g_parameter_size.store(size);
  g_parameter.store(reinterpret_cast<std::uintptr_t>(object));
}

bool IsPlainName(const char* expression) {
  if (expression == nullptr || *expression == '\0' ||
      std::isdigit(static_cast<unsigned char>(*expression))) {
    return false;
  }
  for (const char* c = expression; *c != '\0'; ++c) {
    if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '_' &&
        *c != ':') {
      return false;
    }
  }
  return true;
}

std::uintptr_t AddressWhereRanksAreThreads(const volatile void* object) {
  if (!RanksAreThreads()) return 0;
  const auto address = reinterpret_cast<std::uintptr_t>(object);
  const std::uintptr_t parameter = g_parameter.load();
  if (parameter != 0 && address >= parameter &&
      address < parameter + g_parameter_size.load()) {
    return 0;
  }
  return address;
}

Agreement OneSharedObject(const char* macro, const char* expression,
                          const Communicator& comm, const Communicator* on,
                          const std::vector<std::uintptr_t>& addresses) {
  if (addresses.size() < 2 || addresses[0] == 0 ||
      std::adjacent_find(addresses.begin(), addresses.end(),
                         std::not_equal_to<>()) != addresses.end() ||
      !Writable(addresses[0])) {
    return Agreement("");
  }
  // A program that left each rank's result in a global, or one object the
  // ranks share, would pass here whatever it computed; as processes its
  // ranks would each have their own and disagree.
  return Agreement(fmt::format(
      "{}({}): every one of the {} ranks{} passed the same object (at {:#x}, "
      "a global, a static or one they share, or a const view of one), so "
      "this compares nothing: the "
      "ranks are threads of one process here (LaunchMode::kThreads) and "
      "share it. Keep each rank's value in an object of its own (a local, "
      "the fixture), or run the test as processes (options().process_only); "
      "a value every rank shares by design (a table made at run time, what "
      "the test's parameter holds) needs no comparing",
      macro, expression, comm.size(), Of(on), addresses[0]));
}

std::vector<std::string> GatherBytes(Communicator& comm,
                                     const std::string& mine,
                                     const CallSite& where, const char* macro,
                                     const char* expression) {
  const int n = comm.size();
  std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(n);
  std::vector<std::uint8_t> all;
  std::int64_t longest = 0;
  try {
    comm.allgather(&length, lengths.data(), 1, where);
    for (std::int64_t l : lengths) longest = std::max(longest, l);
    std::vector<std::uint8_t> padded(longest, 0);
    std::copy(mine.begin(), mine.end(), padded.begin());
    all.resize(longest * n);
    comm.allgather(padded.data(), all.data(), longest, where);
  } catch (const CommError& e) {
    // Its collectives are disttest's: the test's line is the assertion.
    throw CommError(fmt::format(
        "{}({}) at {}:{} could not compare across the ranks (each must reach "
        "the same collective assertions, as many times and in the same "
        "order): {}",
        macro, expression, Basename(where.file_name()), where.line(),
        e.what()));
  }
  std::vector<std::string> out(n);
  for (int r = 0; r < n; ++r) {
    const char* start = reinterpret_cast<const char*>(all.data()) + r * longest;
    out[r].assign(start, lengths[r]);
  }
  return out;
}

std::uint64_t AssertionTag(const char* type, const char* expression,
                           const CallSite& where) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  };
  mix(type);
  mix("\n");
  mix(expression);
  mix("\n");
  mix(where.file_name());
  mix(fmt::format(":{}", where.line()));
  return h;
}

Agreement Elsewhere(const char* macro, const char* expression,
                    const Communicator& comm, const Communicator* on,
                    const std::vector<int>& elsewhere, const CallSite& where) {
  return Agreement(fmt::format(
      "{}({}): {} of the {}{} {} at another collective assertion, or "
      "compare{} a value of another type, than this one at {}:{} (every rank "
      "must reach the same assertions in the same order)",
      macro, expression, Ranks(elsewhere), comm.size(),
      on != nullptr ? " ranks" + Of(on) : std::string(" ranks"),
      elsewhere.size() == 1 ? "is" : "are", elsewhere.size() == 1 ? "s" : "",
      Basename(where.file_name()), where.line()));
}

Agreement Disagreement(
    const char* macro, const char* expression, const Communicator& comm,
    const Communicator* on, const std::string& at,
    const std::vector<std::pair<std::string, std::vector<int>>>& rows) {
  const std::string where =
      at.empty() ? "" : fmt::format(", first at index {}", at);
  // One row: a value on one rank alone that is not equal to itself (NaN).
  std::string message =
      rows.size() == 1
          ? fmt::format(
                "{}({}): the value of the only rank{} does not equal "
                "itself{}:",
                macro, expression, Of(on), where)
          : fmt::format("{}({}): the {} ranks{} disagree{}:", macro, expression,
                        comm.size(), Of(on), where);
  for (const auto& [value, ranks] : rows) {
    message += fmt::format("\n  {}: {}", value, Ranks(ranks));
  }
  return Agreement(message);
}

Agreement AllTrue(const char* macro, const char* expression, bool value,
                  Communicator* on, std::uintptr_t address, CallSite where) {
  Communicator& comm = on != nullptr ? *on : CurrentCommunicator();
  // Where it is, then the value: ranks at another assertion fail saying so.
  // Gathered as every assertion's value is (GatherBytes), so that ranks at
  // another kind of assertion get here too, not a mismatch of allgathers.
  const std::uint64_t tag = AssertionTag("bool", expression, where);
  std::string mine(sizeof(tag) + 1 + sizeof(address), '\0');
  std::memcpy(mine.data(), &tag, sizeof(tag));
  mine[sizeof(tag)] = value ? 1 : 0;
  std::memcpy(mine.data() + sizeof(tag) + 1, &address, sizeof(address));
  const std::vector<std::string> all =
      GatherBytes(comm, mine, where, macro, expression);
  std::vector<int> false_on;
  std::vector<int> elsewhere;
  std::vector<std::uintptr_t> addresses;
  for (int r = 0; r < comm.size(); ++r) {
    const std::string& theirs = all[r];
    if (theirs.size() != mine.size() ||
        std::memcmp(theirs.data(), &tag, sizeof(tag)) != 0) {
      elsewhere.push_back(r);
      continue;
    }
    if (theirs[sizeof(tag)] == 0) false_on.push_back(r);
    std::uintptr_t theirs_at = 0;
    std::memcpy(&theirs_at, theirs.data() + sizeof(tag) + 1, sizeof(theirs_at));
    addresses.push_back(theirs_at);
  }
  if (!elsewhere.empty()) {
    return Elsewhere(macro, expression, comm, on, elsewhere, where);
  }
  if (false_on.empty()) {
    return OneSharedObject(macro, expression, comm, on, addresses);
  }
  return Agreement(fmt::format("{}({}) is false on {} of {}{}{}", macro,
                               expression, Ranks(false_on),
                               on != nullptr ? "the " : "", comm.size(),
                               on != nullptr ? " ranks" + Of(on) : ""));
}

}  // namespace disttest::internal
