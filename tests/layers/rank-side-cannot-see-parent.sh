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
# The compiler's word that the file's own line 1 names a header it cannot
# find (gcc: "No such file or directory", clang: "file not found"); an error
# further down, inside a header that was found, is not that.
not_found() {
  printf '%s\n' "$1" |
    grep -qE "^<stdin>:1:[0-9]+: fatal error: '?$2'?(: No such file or directory| file not found)"
}
for header in harness/supervise/supervisor.h harness/supervise/worker_pool.h \
              harness/spawn/rank_spawner.h harness/plan/step_plan.h; do
  if out=$(try harness_rank "$header"); then
    echo "the rank's side includes $header, but must not"
    status=1
  elif ! not_found "$out" "$header"; then
    printf '%s\n' "$out" | head -n 20
    echo "the compiler's error for $header does not say it was not found"
    status=1
  fi
  # The parent's side finds it (so a wrong path above cannot pass).
  out=$(try harness_supervise "$header")
  if not_found "$out" "$header"; then
    echo "the parent's side cannot find $header either"
    status=1
  fi
done
[ $status = 0 ] && echo "the rank's side cannot see the parent's"
exit $status
