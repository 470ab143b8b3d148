#!/usr/bin/env bash
# Runs a gtest binary of DIST_TEST_Fs under mpirun with 4 ranks (each process
# runs the bodies as its rank; rank 0 reports) and checks the one XML report:
#   examples/check-suite-under-mpirun.sh <test binary> [gtest flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=$1
shift
xml=$(mktemp "${TMPDIR:-/tmp}/disttest-mpirun-XXXXXX.xml")
trap 'rm -f "$xml"' EXIT
status=0
"$here/run-under-mpirun.sh" 4 "$binary" --gtest_color=no \
  "--gtest_output=xml:$xml" "$@" || status=$?
tests=$(grep -c '<testcase ' "$xml" || true)
failures=$(grep -c '<failure ' "$xml" || true)
launcher=$(grep -c 'name="disttest_launcher" value="openmpi"' "$xml" || true)
echo "check-suite-under-mpirun: exit $status, $tests tests in the XML, $failures failures, $launcher run by openmpi"
if [[ $status -ne 0 || $tests -eq 0 || $failures -ne 0 || $launcher -eq 0 ]]; then
  echo "check-suite-under-mpirun: FAILED" >&2
  exit 1
fi
