#!/usr/bin/env bash
# Starts N copies of a program on this machine with the environment that
# torchrun or srun would give them, and waits for every one:
#   local-launcher.sh torchrun|slurm N program [args...]
# Unlike those launchers it never ends a process itself, so a test can see
# that the others stop on their own when one dies; like them, it passes
# SIGTERM and SIGINT on to every process. Exit status: 0 when every process
# exited 0, else the first non-zero status (128+n for signal n).
set -uo pipefail
# Each process in a group of its own, with SIGINT as it came (a script's
# background jobs would ignore it): a signal reaches them once, from here.
set -m
style=$1
n=$2
shift 2
# Below the kernel's ephemeral range (32768 and up by default), where no
# connect() or bind(0) of another process can take the port meanwhile.
port=$((20000 + RANDOM % 12000))
job=$((100000 + RANDOM % 900000))
pids=()
for ((r = 0; r < n; r++)); do
  case $style in
    torchrun)
      RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
      ;;
    slurm)
      # The store's port comes from the job id: 15000 + its last 4 digits.
      SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n \
        SLURM_STEP_ID=0 SLURM_LOCALID=$r SLURM_NODEID=0 \
        SLURM_STEP_TASKS_PER_NODE=$n SLURM_STEP_NODELIST=localhost \
        SLURM_JOB_ID=$job "$@" &
      ;;
    *)
      echo "local-launcher.sh: unknown style '$style' (torchrun or slurm)" >&2
      exit 2
      ;;
  esac
  pids+=($!)
done
set +m  # Job control no further: no job notices in the output.
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
trap 'kill -INT "${pids[@]}" 2>/dev/null' INT
status=0
for pid in "${pids[@]}"; do
  while :; do
    wait "$pid"
    s=$?
    # A signal passed on interrupts the wait while the process still runs.
    kill -0 "$pid" 2>/dev/null || break
  done
  if [[ $status -eq 0 && $s -ne 0 ]]; then status=$s; fi
done
exit "$status"
