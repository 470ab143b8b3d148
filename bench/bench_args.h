// Copyright 2026 The disttest Authors. SPDX-License-Identifier: Apache-2.0
//
// What the small benchmarks share: "--name=N" flags and medians.
//
//   const int runs = bench::Flag(argc, argv, "runs", 5);
//   double m = bench::Median(times);
#ifndef DISTTEST_BENCH_BENCH_ARGS_H_
#define DISTTEST_BENCH_BENCH_ARGS_H_

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

// The value of "--name=N" on the command line, or `fallback`.
inline int Flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return fallback;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench

#endif  // DISTTEST_BENCH_BENCH_ARGS_H_
