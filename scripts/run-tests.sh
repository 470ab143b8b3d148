#!/usr/bin/env bash
# Builds disttest with its tests and examples and runs every test with ctest.
#   bash scripts/run-tests.sh                     # the regular build, in build/
#   DISTTEST_SANITIZE=ON bash scripts/run-tests.sh  # ASan+UBSan, in build-asan/
#                                                   # (all but the package tests)
#   DISTTEST_WITH_NCCL=OFF bash scripts/run-tests.sh  # the CPU-only build
# The NCCL backend is built when CMake finds CUDA and NCCL (AUTO); without a
# GPU its tests skip, saying how many GPUs they need.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
sanitize=${DISTTEST_SANITIZE:-OFF}
nccl=${DISTTEST_WITH_NCCL:-AUTO}
dir=build
if [[ $sanitize == ON ]]; then dir=build-asan; fi
log=$(mktemp "${TMPDIR:-/tmp}/configure-XXXXXX.log")
trap 'rm -f "$log"' EXIT
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTTEST_BUILD_TESTS=ON \
    -DDISTTEST_BUILD_EXAMPLES=ON -DDISTTEST_WERROR=ON -DDISTTEST_SANITIZE="$sanitize" \
    -DDISTTEST_WITH_NCCL="$nccl" >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
grep 'disttest:' "$log" || true
cmake --build "$dir" -j "$(nproc)"
cd "$dir"
# The package tests build consumer projects against disttest: they check
# its CMake package, which the sanitizer flags do not change, and the regular
# build runs them. Under ASan they would only add minutes.
exclude=()
if [[ $sanitize == ON ]]; then exclude=(-E '^package\.'); fi
ctest --output-on-failure -j "$(nproc)" --timeout 600 "${exclude[@]}"
