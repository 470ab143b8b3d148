#!/usr/bin/env bash
# Coverage of code that runs only in ranks, checked with gcovr (CI runs it):
# builds the cookbook with gcc's --coverage (in build-cov/), runs its
# coverage recipe (fork and exec ranks), and checks with gcovr that
# ShardChecksum (examples/cookbook/14_coverage_test.cc), which only rank
# bodies call, ran 8 times: once in each of 1, 2 and 3 forked ranks (6),
# and once in each of 2 exec'd ranks (2).
#   bash scripts/run-coverage.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
if ! command -v gcovr >/dev/null; then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  echo "disttest: installing gcovr"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends gcovr
fi

dir=build-cov
log=$(mktemp "${TMPDIR:-/tmp}/configure-XXXXXX.log")
json=$(mktemp "${TMPDIR:-/tmp}/coverage-XXXXXX.json")
trap 'rm -f "$log" "$json"' EXIT
# Debug without debug information (-g0): gcov reads its own notes (.gcno),
# and the build takes a quarter less.
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g0 \
    -DDISTTEST_BUILD_TESTS=OFF \
    -DDISTTEST_BUILD_EXAMPLES=ON -DDISTTEST_WITH_NCCL=OFF \
    -DCMAKE_CXX_FLAGS=--coverage \
    "-DCMAKE_EXE_LINKER_FLAGS=--coverage -Wl,-u,__gcov_reset" >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
cmake --build "$dir" -j "$(nproc)" --target cookbook_test
# Counts from an earlier run would add up with this one's.
find "$dir" -name '*.gcda' -delete
DISTTEST_NO_REUSE=1 "./$dir/examples/cookbook_test" --gtest_filter='Coverage*.*'

gcovr --root . --filter 'examples/cookbook/14_coverage_test.cc' \
  --json "$json" "$dir" >/dev/null
python3 - "$json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
source = "examples/cookbook/14_coverage_test.cc"
lines = [l for f in data["files"] if f["file"] == source for l in f["lines"]]
text = open(source).read().splitlines()
# The first line of ShardChecksum's body.
body = next(i + 1 for i, t in enumerate(text)
            if "std::uint64_t sum = 0;" in t)
count = next((l["count"] for l in lines if l["line_number"] == body), None)
print(f"run-coverage: {source}:{body} (ShardChecksum, only in ranks) "
      f"ran {count} times; 8 expected")
sys.exit(0 if count == 8 else 1)
PY
