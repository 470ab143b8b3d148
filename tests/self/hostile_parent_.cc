// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A wrapper as hostile as the ones users run tests under: it changes what a
// program inherits, then execs it.
//
//   hostile_parent_ --ignore-sigchld --block-signals --close=1 -- prog args
//
// --ignore-sigchld  SIGCHLD set to SIG_IGN (kept across exec)
// --block-signals   every signal blocked (the mask is kept across exec)
// --close=N         descriptor N closed (repeatable)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--ignore-sigchld") == 0) {
      signal(SIGCHLD, SIG_IGN);
    } else if (std::strcmp(argv[i], "--block-signals") == 0) {
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_BLOCK, &all, nullptr);
    } else if (std::strncmp(argv[i], "--close=", 8) == 0) {
      close(std::atoi(argv[i] + 8));
    } else {
      std::fprintf(stderr, "hostile_parent_: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr, "hostile_parent_: no program after --\n");
    return 2;
  }
  execv(argv[i + 1], argv + i + 1);
  std::perror("hostile_parent_: exec");
  return 127;
}
