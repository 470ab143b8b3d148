#!/usr/bin/env bash
# The GPU check, for one short run (a few minutes) on a machine with GPUs:
# builds disttest with the NCCL backend (Release, in build-gpu/), runs every
# GPU test and prints a summary: passed, skipped (with the reasons), failed.
#   bash scripts/gpu-check.sh            # CUDA, NCCL and the deps installed
#   bash scripts/gpu-check.sh --install  # runs scripts/install-deps.sh first
#   bash scripts/gpu-check.sh --no-build # runs what build-gpu/ already holds
#                                        # (built on a machine without a GPU)
# Exits non-zero when a test failed. A world size needs a GPU per rank: on a
# machine with one GPU only size 1 runs, the others skip ("needs 2 GPUs,
# found 1"). GPU_CHECK_TIMEOUT sets the per-test limit (seconds, 600).
set -euo pipefail
cd "$(dirname "$0")/.."

install=0
build=1
for arg in "$@"; do
  case $arg in
    --install) install=1 ;;
    --no-build) build=0 ;;
    -h | --help)
      sed -n '2,11p' "$0"
      exit 0
      ;;
    *)
      echo "gpu-check.sh: unknown argument '$arg' (it takes --install, --no-build)" >&2
      exit 2
      ;;
  esac
done
if ((install)); then bash scripts/install-deps.sh; fi

# A skip must stay a skip here: the summary reports it.
unset DISTTEST_REQUIRE_GPUS
dir=build-gpu
log=$dir/gpu-check.log
timeout=${GPU_CHECK_TIMEOUT:-600}
# The GPU tests: the NCCL example, the cookbook's AnyDevice recipe, and the
# communicator-creation unit tests (which skip their no-GPU cases here).
tests='^(examples\.nccl_allreduce|examples\.cookbook\.any_device|CreateCommunicatorTest\..*|NcclCommunicatorTest\..*)$'

if ((build)); then
  echo "== configure ($dir, Release, DISTTEST_WITH_NCCL=ON)"
  mkdir -p "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDISTTEST_WITH_NCCL=ON \
    -DDISTTEST_BUILD_TESTS=ON -DDISTTEST_BUILD_EXAMPLES=ON >"$dir/configure.log" 2>&1 || {
    cat "$dir/configure.log"
    exit 1
  }
  grep 'disttest: NCCL backend' "$dir/configure.log" || true

  echo "== build"
  cmake --build "$dir" -j "$(nproc)" --target nccl_allreduce_test cookbook_test create_test
elif [[ ! -f $dir/CTestTestfile.cmake ]]; then
  echo "gpu-check.sh: --no-build, but $dir/ holds no build (run it once without --no-build)" >&2
  exit 1
fi

echo "== GPUs"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L || true
else
  echo "nvidia-smi not found"
fi
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
  echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
fi

echo "== tests (ctest, ${timeout} s per test)"
status=0
ctest --test-dir "$dir" -R "$tests" --output-on-failure --timeout "$timeout" -V \
  2>&1 | tee "$log" || status=$?

# gtest's per-case lines carry a duration: "[       OK ] Suite.Name (12 ms)";
# the closing lists repeat the names without one. ctest -V prefixes "N: ".
count() { grep -cE "^([0-9]+: )?\[ +$1 +\] .* \([0-9]+ ms\)$" "$log" || true; }
passed=$(count OK)
skipped=$(count SKIPPED)
failed=$(count FAILED)

echo
echo "== summary"
echo "passed:  $passed"
echo "skipped: $skipped"
if ((skipped > 0)); then
  # The reason is the line after gtest's "file:line: Skipped".
  grep -E -A1 "^([0-9]+: )?.*: Skipped$" "$log" |
    grep -vE ": Skipped$|^--$" | sed -E 's/^[0-9]+: //' |
    sort | uniq -c | sort -rn | sed 's/^/  /' || true
fi
echo "failed:  $failed"
if ((failed > 0)); then
  grep -E "^([0-9]+: )?\[  FAILED  \] .* \([0-9]+ ms\)$" "$log" |
    sed -E 's/^[0-9]+: //; s/^/  /' || true
fi
grep -E "^[0-9]+% tests passed" "$log" || true
echo "(full output: $log)"

if ((passed + skipped + failed == 0)); then
  echo "gpu-check.sh: no GPU test ran" >&2
  exit 1
fi
if ((status != 0 || failed > 0)); then exit 1; fi
