#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz with clang (ASan + UBSan) into
# build-fuzz/ and runs each for SECONDS (default 30) on a scratch copy of its
# seed corpus, as many at once as there are cores. Exits non-zero when a
# fuzzer finds a crash, undefined behaviour, a leak or a hang; the reproducer
# is kept under build-fuzz/artifacts/.
#   bash scripts/run-fuzz.sh        # 30 s per fuzzer
#   bash scripts/run-fuzz.sh 600    # a longer run
# Replay a reproducer: build-fuzz/<fuzzer> build-fuzz/artifacts/<fuzzer>-crash-*
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
if [[ ! $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "run-fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
fuzzers=(store_request_fuzzer result_message_fuzzer ledger_text_fuzzer)

# clang 14 is Debian 12's default; its libFuzzer runtime is in libclang-rt-14-dev.
packages=(clang libclang-rt-14-dev cmake make libfmt-dev libboost-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  echo "run-fuzz.sh: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

build="build-fuzz"
CXX=clang++ cmake -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

scratch=$(mktemp -d)
# Fuzzers still running when this ends (an error, a signal) are ended first:
# each `timeout` is a process group of its own, which a signal to this
# script's group does not reach.
end_all() {
  local pid
  for pid in $(cat "$scratch"/*.pid 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  wait || true
  rm -rf "$scratch"
}
trap end_all EXIT
mkdir -p "$build/artifacts"
# One fuzzer a core at a time (each is one process), side by side.
run_one() {
  local fuzzer=$1
  cp -r "tests/fuzz/corpus/$fuzzer" "$scratch/$fuzzer"
  # -timeout: an input that runs 10 s counts as a hang. The outer timeout is a
  # backstop should the fuzzer itself wedge.
  local status=0
  timeout --kill-after=10 $((seconds + 60)) "$build/$fuzzer" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$fuzzer-" \
    "$scratch/$fuzzer" >"$build/$fuzzer.log" 2>&1 &
  echo $! >"$scratch/$fuzzer.pid"
  wait $! || status=$?
  rm -f "$scratch/$fuzzer.pid"
  echo "$status" >"$scratch/$fuzzer.status"
}
cores=$(nproc)
running=0
for fuzzer in "${fuzzers[@]}"; do
  echo "run-fuzz.sh: $fuzzer for ${seconds}s (log: $build/$fuzzer.log)"
  if ((running >= cores)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$fuzzer" &
  running=$((running + 1))
done
wait || true
failed=()
for fuzzer in "${fuzzers[@]}"; do
  log=$build/$fuzzer.log
  if [[ $(cat "$scratch/$fuzzer.status" 2>/dev/null) == 0 ]]; then
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" || tail -n 1 "$log"
  else
    echo "run-fuzz.sh: $fuzzer FAILED; the end of its log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$fuzzer")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "run-fuzz.sh: failed: ${failed[*]}; reproducers in $build/artifacts/" >&2
  exit 1
fi
echo "run-fuzz.sh: no crash in ${#fuzzers[@]} fuzzers"
