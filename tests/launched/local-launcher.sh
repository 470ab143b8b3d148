#!/usr/bin/env bash
# Starts N copies of a program on this machine with the environment that
# torchrun or srun would give them, and waits for every one:
#   local-launcher.sh torchrun|slurm N program [args...]
# Unlike those launchers it never ends a process itself, so a test can see
# that the others stop on their own when one dies; like them, it passes
# SIGTERM and SIGINT on to every process. Exit status: 0 when every process
# exited 0, else the first non-zero status (128+n for signal n).
# DUPLICATE_RANK=d (torchrun, one node, N >= 3, d < N - 1): a launcher's
# mistake, two processes with RANK=d. The last rank starts only once one of
# those two has ended (the second to join the store fails at once), so that
# the job's first test cannot start before both joined.
# Across nodes (tests/cluster/), one launcher per node, as torchrun's agents
# or srun's step daemons: NODE_RANK and NNODES give this node's place (the
# N processes here are ranks NODE_RANK*N to NODE_RANK*N+N-1), MASTER_ADDR and
# MASTER_PORT the store's host and port (torchrun), NODELIST and JOB_ID the
# step's node list and job id (Slurm: rank 0's node is the list's first).
set -uo pipefail
# Each process in a group of its own, with SIGINT as it came (a script's
# background jobs would ignore it): a signal reaches them once, from here.
set -m
style=$1
n=$2
shift 2
node=${NODE_RANK:-0}
nodes=${NNODES:-1}
# Below the kernel's ephemeral range (32768 and up by default), where no
# connect() or bind(0) of another process can take the port meanwhile.
port=${MASTER_PORT:-$((20000 + RANDOM % 12000))}
master=${MASTER_ADDR:-127.0.0.1}
job=${JOB_ID:-$((100000 + RANDOM % 900000))}
nodelist=${NODELIST:-localhost}
per_node=$n
if ((nodes > 1)); then per_node="$n(x$nodes)"; fi
duplicate=${DUPLICATE_RANK:-}
unset NODE_RANK NNODES MASTER_ADDR MASTER_PORT JOB_ID NODELIST DUPLICATE_RANK
torchrun_rank() {  # torchrun_rank r program [args...]
  local r=$1
  shift
  RANK=$((node * n + r)) WORLD_SIZE=$((nodes * n)) LOCAL_RANK=$r \
    LOCAL_WORLD_SIZE=$n GROUP_RANK=$node MASTER_ADDR=$master \
    MASTER_PORT=$port "$@" &
}
pids=()
status=0
for ((r = 0; r < n; r++)); do
  case $style in
    torchrun)
      if [[ -n $duplicate ]] && ((r == n - 1)); then
        torchrun_rank "$duplicate" "$@"
        pids+=($!)
        # One of the two with RANK=$duplicate ends first.
        wait -n -p ended "${pids[$duplicate]}" "${pids[-1]}"
        s=$?
        if [[ $s -ne 0 ]]; then status=$s; fi
        for i in "${!pids[@]}"; do
          if [[ ${pids[$i]} == "$ended" ]]; then unset 'pids[i]'; fi
        done
        pids=("${pids[@]}")
      fi
      torchrun_rank "$r" "$@"
      ;;
    slurm)
      # The store's port comes from the job id: 15000 + its last 4 digits.
      SLURM_PROCID=$((node * n + r)) SLURM_NTASKS=$((nodes * n)) \
        SLURM_STEP_NUM_TASKS=$((nodes * n)) SLURM_STEP_ID=0 \
        SLURM_LOCALID=$r SLURM_NODEID=$node \
        SLURM_STEP_TASKS_PER_NODE=$per_node \
        SLURM_STEP_NODELIST=$nodelist SLURM_JOB_ID=$job "$@" &
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
