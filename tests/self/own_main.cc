// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A user's own main() for the verdict child binary: it insists on a flag of
// its own, prints before gtest starts and adds a listener, as real test
// mains do. disttest must work with it unchanged, in both launch modes (a
// re-executed rank gets the same command line, so the flag is there).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool have_flag = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--user_flag=42") == 0) have_flag = true;
  }
  if (!have_flag) {
    std::fprintf(stderr, "own_main: --user_flag=42 is required\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
