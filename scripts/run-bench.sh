#!/usr/bin/env bash
# The per-test cost benchmark (bench/per_test_cost.cc): builds it in release
# mode and prints the table that docs/speed.md, "Speed", shows. Arguments go to
# the benchmark, e.g. --runs=200 or --gtest_filter='Fork.*'.
#   bash scripts/run-bench.sh [--runs=N] [gtest flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTTEST_BUILD_TESTS=ON \
  -DDISTTEST_SANITIZE=OFF >/dev/null
cmake --build build --target per_test_cost -j "$(nproc)"
./build/bench/per_test_cost "$@"
