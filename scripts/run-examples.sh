#!/usr/bin/env bash
# The main job: build disttest and run the example suite (the collectives
# and the cookbook) on the CPU (Gloo) backend. No GPU needed.
#   bash scripts/run-examples.sh [extra gtest flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTTEST_BUILD_TESTS=OFF \
  -DDISTTEST_BUILD_EXAMPLES=ON >/dev/null
cmake --build build --target collectives_test cookbook_test -j "$(nproc)"
status=0
./build/examples/collectives_test "$@" || status=$?
./build/examples/cookbook_test "$@" || status=$?
exit "$status"
