#!/usr/bin/env bash
# Open MPI's rsh agent for the simulated cluster (plm_rsh_agent): where
# mpirun would ssh to a node, this enters the node's namespaces instead.
#   rsh-agent.sh <node> <command...>   (DISTTEST_CLUSTER_ID names the cluster)
set -euo pipefail
host=$1
shift
[[ $host =~ ^node([0-9]+)$ ]] || { echo "rsh-agent.sh: unknown host '$host'" >&2; exit 255; }
exec "$(dirname "$0")/cluster.sh" exec "${DISTTEST_CLUSTER_ID:?}" "${BASH_REMATCH[1]}" sh -c "$*"
