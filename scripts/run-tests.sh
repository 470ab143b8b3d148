#!/usr/bin/env bash
# Builds disttest with its tests and examples and runs every test with ctest.
#   bash scripts/run-tests.sh                     # the regular build, in build/
#   DISTTEST_SANITIZE=ON bash scripts/run-tests.sh  # ASan+UBSan, in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
sanitize=${DISTTEST_SANITIZE:-OFF}
dir=build
if [[ $sanitize == ON ]]; then dir=build-asan; fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTTEST_BUILD_TESTS=ON \
  -DDISTTEST_BUILD_EXAMPLES=ON -DDISTTEST_WERROR=ON -DDISTTEST_SANITIZE="$sanitize" >/dev/null
cmake --build "$dir" -j "$(nproc)"
cd "$dir"
ctest --output-on-failure -j "$(nproc)" --timeout 600
