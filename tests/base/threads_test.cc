// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
#include "base/threads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

namespace disttest::internal {
namespace {

// A low `ulimit -v` made the Gloo mesh fail "Resource temporarily
// unavailable" (its thread's stack could not be mapped), which named no
// limit.
TEST(AddressSpaceHintTest, NamesALimitedAddressSpaceWhenMemoryRanOut) {
  EXPECT_EQ(AddressSpaceHint("cannot start thread: Resource temporarily "
                             "unavailable",
                             256ULL << 20),
            " (RLIMIT_AS is 256 MiB (ulimit -v): a thread's stack or a buffer "
            "could not be mapped; raise it)");
  EXPECT_THAT(AddressSpaceHint("std::bad_alloc", 1ULL << 30),
              ::testing::HasSubstr("RLIMIT_AS is 1024 MiB"));
  // Not for other errors, nor without a limit.
  EXPECT_EQ(AddressSpaceHint("Connection refused", 256ULL << 20), "");
  EXPECT_EQ(AddressSpaceHint("Cannot allocate memory", RLIM_INFINITY), "");
}

}  // namespace
}  // namespace disttest::internal
