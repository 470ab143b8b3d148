#!/bin/sh
# rank-side-cannot-see-parent.sh COMPILER BUILD_DIR: passes when the rank's
# side of the harness (build/layers/harness_rank, the view its sources
# compile in) cannot include a header of the parent's side (supervision,
# spawning, planning), while the parent's side can: the compiler refuses,
# naming the header, at the line that includes it.
compiler=$1 build=$2
status=0
try() {  # try VIEW HEADER: the compiler's output for a file that includes it
  printf '#include "%s"\n' "$2" |
    "$compiler" -std=c++20 -fsyntax-only -I"$build/layers/$1/src" \
      -I"$build/layers/$1/include" -x c++ - 2>&1
}
for header in harness/supervise/supervisor.h harness/supervise/worker_pool.h \
              harness/spawn/rank_spawner.h harness/plan/step_plan.h; do
  if out=$(try harness_rank "$header"); then
    echo "the rank's side includes $header, but must not"
    status=1
  elif ! printf '%s\n' "$out" | grep -q "$header.*\(No such file\|not found\)"; then
    printf '%s\n' "$out" | head -n 20
    echo "the compiler's error for $header does not say it was not found"
    status=1
  fi
  # The parent's side finds it (so a wrong path above cannot pass).
  out=$(try harness_supervise "$header")
  if printf '%s\n' "$out" | grep -q "$header.*\(No such file\|not found\)"; then
    echo "the parent's side cannot find $header either"
    status=1
  fi
done
[ $status = 0 ] && echo "the rank's side cannot see the parent's"
exit $status
