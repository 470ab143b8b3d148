// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// A store client from outside the job, for the cluster tests: connects to
// a launched job's store without its token and tries to read and write.
//   store_probe <host> <port>
// Prints "served" when the store answered, or "refused: <why>"; exits 0
// either way (2 on bad arguments).
#include <disttest/rendezvous/tcp_store.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_probe <host> <port>\n");
    return 2;
  }
  try {
    disttest::TcpStore store(argv[1], std::stoi(argv[2]),
                             std::chrono::seconds(5));
    store.set("disttest-probe", std::vector<char>{'1'});
    store.check({"disttest-probe"});
    std::printf("served\n");
  } catch (const std::exception& e) {
    std::printf("refused: %s\n", e.what());
  }
  return 0;
}
