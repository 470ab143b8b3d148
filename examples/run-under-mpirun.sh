#!/usr/bin/env bash
# Runs a program under Open MPI's mpirun on this machine, over loopback:
#   examples/run-under-mpirun.sh <ranks> <program> [args...]
# MASTER_ADDR is 127.0.0.1; MASTER_PORT is a free port (another is tried if
# rank 0 finds it taken). Every rank's output is tagged with its rank.
set -euo pipefail
ranks=$1
shift
root=()
if [[ $(id -u) -eq 0 ]]; then root=(--allow-run-as-root); fi
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  status=0
  out=$(timeout 120 mpirun "${root[@]}" --oversubscribe --tag-output \
    -np "$ranks" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
    "$@" 2>&1) || status=$?
  if [[ $status -ne 0 && $out == *"cannot host the store"* && $attempt -lt 5 ]]; then
    continue
  fi
  printf '%s\n' "$out"
  exit "$status"
done
