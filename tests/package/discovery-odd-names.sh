#!/bin/sh
# disttest_discover_tests with names a CMake list cannot hold as they are
# (trial 13): a '#' in a typed test's name is registered whole; a ';' is
# refused, naming the test, where it was cut in two (each half a filter that
# runs no test, and a run of no test passes).
#   sh discovery-odd-names.sh <cmake> <DisttestAddTests.cmake>
set -eu
cmake=$1
script=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/disttest-discovery.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# A test binary that lists $dir/listing, and runs no test.
fake=$dir/fake_test
printf '#!/bin/sh\ncase "$*" in *--gtest_list_tests*) cat "%s/listing" ;; esac\n' \
  "$dir" >"$fake"
chmod +x "$fake"
discover() {
  printf '%s\n' "$1" >"$dir/listing"
  "$cmake" -DTEST_EXECUTABLE="$fake" -DTEST_WORKING_DIR="$dir" \
    -DTEST_DISCOVERY_TIMEOUT=60 -DCTEST_FILE="$dir/tests.cmake" \
    -DTEST_PREFIX= -DTEST_EXTRA_ARGS= -DTEST_PROPERTIES= -P "$script" 2>&1
}

if ! out=$(discover 'Odd/hash#x.  # TypeParam = int
  Fails/2ranks  # a comment'); then
  echo "a '#' in a name was refused: $out"
  exit 1
fi
if ! grep -qF 'add_test([==[Odd/hash#x.Fails/2ranks]==]' "$dir/tests.cmake"; then
  echo "the test with a '#' was not registered whole:"
  cat "$dir/tests.cmake"
  exit 1
fi

if out=$(discover 'Odd/semi;colon.  # TypeParam = int
  Fails/2ranks'); then
  echo "a ';' in a name was taken: $out"
  cat "$dir/tests.cmake"
  exit 1
fi
# CMake wraps its message's lines.
out=$(printf '%s' "$out" | tr '\n' ' ' | tr -s ' ')
case $out in
*'the test "Odd/semi;colon.Fails/2ranks" of '*"has a ';' in its name"*) ;;
*)
  echo "a ';' in a name was refused without naming it: $out"
  exit 1
  ;;
esac
echo "names with '#' and ';': registered whole, and refused by name"
