#!/usr/bin/env bash
# Builds disttest with its tests and examples and runs every test with ctest.
#   bash scripts/run-tests.sh                     # the regular build, in build/
#   DISTTEST_SANITIZE=ON bash scripts/run-tests.sh  # ASan+UBSan, in build-asan/
#                                                   # (less what ASan adds nothing to:
#                                                   # see `which` below)
#   DISTTEST_SANITIZE=thread bash scripts/run-tests.sh  # TSan, in build-tsan/: where
#                                                   # threads meet (see `which` below)
#   DISTTEST_WITH_NCCL=OFF bash scripts/run-tests.sh  # the CPU-only build
# The NCCL backend is built when CMake finds CUDA and NCCL (AUTO); without a
# GPU its tests skip, saying how many GPUs they need.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
sanitize=${DISTTEST_SANITIZE:-OFF}
nccl=${DISTTEST_WITH_NCCL:-AUTO}
dir=build
case $sanitize in
  ON | address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  OFF) ;;
  *) echo "DISTTEST_SANITIZE=$sanitize: expected OFF, ON (address) or thread" >&2
     exit 2 ;;
esac
# A sanitizer's build at -O1 with line tables only (-g1), as the sanitizers
# advise: its reports and the hang report's stacks keep every function,
# file and line, and the library builds in about 60% of the time of -O2 -g.
flags=()
if [[ $sanitize != OFF ]]; then
  flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
fi
log=$(mktemp "${TMPDIR:-/tmp}/configure-XXXXXX.log")
trap 'rm -f "$log"' EXIT
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTTEST_BUILD_TESTS=ON \
    -DDISTTEST_BUILD_EXAMPLES=ON -DDISTTEST_WERROR=ON -DDISTTEST_SANITIZE="$sanitize" \
    -DDISTTEST_WITH_NCCL="$nccl" "${flags[@]}" >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
grep 'disttest:' "$log" || true
built_from=$SECONDS
cmake --build "$dir" -j "$(nproc)"
echo "disttest: built $dir in $((SECONDS - built_from)) s"
cd "$dir"
# Under ASan, what the sanitizer flags do not change and the regular build
# runs: the example suites as threads (the verdict cases run as threads
# here), the package tests (they build consumer projects against disttest's
# CMake package), the self-tests' second pair of launch modes (OwnMainFork
# and OwnMainExec: fork and exec ranks again, under the user's own main()),
# and the scale tests of 128 and 256 ranks (their point is time and the size
# of the report; their memory is that of 4 ranks, which run), and the two runs of
# many tests in one process (FullRunLeavesNothingBehind: every verdict
# case at once, each of which runs here alone; HundredsOfTestsLeaveNoTime-
# WaitSockets: sockets), and the verdict and no-false-pass cases in exec
# mode (a re-executed rank runs the same rank runtime as a forked one and a
# rank thread, which run here; what is exec's own, the zygote and the
# re-execution, runs here in harness_processes_test), and the example suites
# under mpirun (a launched rank runs that same runtime, and launched_test's
# ranks run here under mpirun): together about half of the sanitizer run's
# time. The compile checks and the MPI tests are not even built under a
# sanitizer (tests/CMakeLists.txt).
# The sanitizer build has neither the cluster tests (their point is the
# network between namespaces; the launched ranks they run are the launched
# tests', which run here) nor the benchmarks (CMakeLists.txt).
which=()
if [[ $sanitize == ON || $sanitize == address ]]; then
  which=(-E '^package\.|^examples\.(collectives|cookbook)\.threads$|^examples\.(collectives|cookbook)_test\.mpirun$|/OwnMain(Fork|Exec)( |$)|^(LaunchModes/VerdictsTest|Modes/NoFalsePassTest)\..*/exec( |$)|HangOfManyRanksIsOneFailureAndOneTreeOfStacks|(Crash|Hang)Among256Ranks|FullRunLeavesNothingBehind|HundredsOfTestsLeaveNoTimeWaitSockets')
fi
# Under ThreadSanitizer, where threads meet: ranks as threads (the verdict
# and no-false-pass cases, the example suites), a rank's own threads (the
# same cases forked), the race cases, the units of what threads share.
if [[ $sanitize == thread ]]; then
  which=(-R '^(LaunchModes/VerdictsTest|Modes/NoFalsePassTest)\..*/(fork|threads)( |$)|^examples\.(collectives|cookbook)|Race|^(HostArena|Ledger|Request)')
fi
ctest --output-on-failure -j "$(nproc)" --timeout 600 "${which[@]}"
