#!/bin/sh
# headers-compile-alone.sh COMPILER INCLUDE_DIR [-Idir...] HEADER...: passes
# when each HEADER (a path under INCLUDE_DIR) compiles as the only line of a
# file, as a user's first include would: none relies on another included
# before it. The -I options name where GoogleTest and fmt are.
compiler=$1 include=$2
shift 2
flags=""
while [ $# -gt 0 ] && [ "${1#-I}" != "$1" ]; do
  flags="$flags $1"
  shift
done
status=0
for header in "$@"; do
  if ! out=$(printf '#include <%s>\n' "$header" |
             "$compiler" -std=c++20 -fsyntax-only -I"$include" $flags -x c++ - 2>&1); then
    printf '%s\n' "$out" | head -n 20
    echo "$header does not compile alone"
    status=1
  fi
done
[ $status = 0 ] && echo "$# headers compile alone"
exit $status
