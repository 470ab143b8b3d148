#!/bin/sh
# expect-ctest-results.sh CTEST BUILD_DIR LABEL RESULT:NAME...
# Runs the tests of LABEL in BUILD_DIR with ctest and checks that each NAME
# ended as RESULT (Passed, Failed or Skipped, as ctest prints it) and that
# ctest ran exactly those tests.
ctest=$1 dir=$2 label=$3
shift 3
out=$("$ctest" --test-dir "$dir" -L "$label" 2>&1)
printf '%s\n' "$out"
status=0
for expected in "$@"; do
  result=${expected%%:*}
  name=${expected#*:}
  # "  1/6 Test  #3: <name> ......   Passed    0.05 sec", "***Failed".
  line=$(printf '%s\n' "$out" | grep -F "Test" | grep -F ": $name " | head -n 1)
  case $line in
    *"$result"*) ;;
    *) echo "expect-ctest-results: $name: expected $result, got: ${line:-no such test}"
       status=1 ;;
  esac
done
ran=$(printf '%s\n' "$out" | grep -c ' Test  *#[0-9]*: ')
if [ "$ran" -ne "$#" ]; then
  echo "expect-ctest-results: ctest ran $ran tests, expected $#"
  status=1
fi
exit $status
