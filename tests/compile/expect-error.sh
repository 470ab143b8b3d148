#!/bin/sh
# expect-error.sh COMPILER INCLUDE_DIR SOURCE PATTERN...: passes when SOURCE
# does not compile and the compiler's output holds every PATTERN.
compiler=$1 include=$2 source=$3
shift 3
if out=$("$compiler" -std=c++20 -fsyntax-only -I"$include" "$source" 2>&1); then
  echo "$source compiled, but must not"
  exit 1
fi
for pattern in "$@"; do
  if ! printf '%s\n' "$out" | grep -q -- "$pattern"; then
    printf '%s\n' "$out" | head -n 40
    echo "the compiler's error does not say: $pattern"
    exit 1
  fi
done
echo "refused, saying: $*"
