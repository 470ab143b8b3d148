#!/usr/bin/env bash
# A simulated cluster for the tests: N "nodes", each a network namespace
# with its own hostname (node1, node2, ...), an address in 198.18.0.0/24
# (RFC 2544's range for network test equipment) on eth0, and the others'
# names in its /etc/hosts; their links meet in a bridge that lives in a
# namespace of its own. No namespace has a route out of the machine, and
# the host's own interfaces are never touched.
#
#   cluster.sh check                       # exit 0 if namespaces can be made
#   cluster.sh up <id> <nodes> [bridge|switch <netem_switch>]
#   cluster.sh exec <id> <node> <command...>   # in node <node> (1, 2, ...)
#   cluster.sh link <id> <node> up|down        # the node's eth0
#   cluster.sh impair <id> <delay ms> <loss %> # every node's egress
#   cluster.sh drop-port <id> <node> <port>    # drop TCP from other nodes to
#                                              # <port> on <node> (nftables)
#   cluster.sh slurm <id>                      # Slurm on it (see below)
#   cluster.sh down <id>                       # end its processes, remove it
#   cluster.sh sweep                           # remove clusters of dead owners
#
# The links are veth pairs into a kernel bridge ("bridge", the default), or
# TAP devices of a user-space hub (tests/cluster/netem_switch.cc, "switch")
# where the kernel has no netem: `impair` then sets the hub's delay and loss.
# Each node has its own temporary directory (as nodes have their own /tmp):
# TMPDIR is /run/disttest-cluster/<id>/tmp-node<k>, and the other nodes'
# are hidden from it; /run/disttest-cluster/<id>/shared is the directory
# every node sees, as an NFS mount would be.
# `slurm` runs Slurm on the cluster with Debian's own binaries: munged
# (its key and socket in the cluster's state), slurmctld on node1, a
# slurmd on every node, each in the node's namespaces (so `down` ends them
# with the rest); commands that `exec` runs find it through SLURM_CONF.
# Tasks get their node's TMPDIR (a TaskProlog), as `exec` gives; the first
# job's id is 4242 (as the Slurm-style launcher's). No cgroups are made: processes are tracked by their parents.
# Names: namespaces disttest-<id>-br and disttest-<id>-n<k>, state in
# /run/disttest-cluster/<id> (the owner's pid: `up` sweeps clusters whose
# owner is gone, as after a killed test run).
set -euo pipefail

state_root=/run/disttest-cluster
subnet=198.18.0

ns_of() { echo "disttest-$1-n$2"; }
br_of() { echo "disttest-$1-br"; }
die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

check() {
  [[ $(id -u) -eq 0 ]] || die "not root: network namespaces need CAP_NET_ADMIN"
  command -v ip >/dev/null || die "ip (iproute2) is not installed"
  command -v unshare >/dev/null || die "unshare (util-linux) is not installed"
  local probe="disttest-probe-$$"
  ip netns add "$probe" 2>/dev/null || die "cannot make a network namespace (ip netns add): no CAP_NET_ADMIN?"
  ip netns del "$probe"
}

# Every process in the cluster's namespaces, then the namespaces, the hosts
# files and the state. Safe to run again, and on a half-made cluster.
down() {
  local id=$1 ns pid
  local all=()
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^disttest-$id-(br|n[0-9]+)$" || true); do
    all+=("$ns")
  done
  # The processes started in them (mpirun, ranks, launchers): ours.
  for round in 1 2 3 4 5 6 7 8 9 10; do
    local pids=()
    for ns in "${all[@]}"; do
      for pid in $(ip netns pids "$ns" 2>/dev/null || true); do pids+=("$pid"); done
    done
    [[ ${#pids[@]} -eq 0 ]] && break
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.1
  done
  for ns in "${all[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "${state_root:?}/$id"
  rmdir "$state_root" /etc/netns 2>/dev/null || true
}

valid_id() {
  [[ $1 =~ ^[a-z0-9]{1,12}$ ]] || die "cluster id '$1': 1 to 12 of [a-z0-9]"
}

sweep() {
  local id
  for id in $(ip netns list | awk '{print $1}' | sed -nE 's/^disttest-([a-z0-9]+)-(br|n[0-9]+)$/\1/p' | sort -u); do
    local owner
    owner=$(cat "$state_root/$id/owner" 2>/dev/null || echo 0)
    if [[ $owner -eq 0 ]] || ! kill -0 "$owner" 2>/dev/null; then
      echo "cluster.sh: removing cluster $id, left by a run that ended (owner $owner)" >&2
      down "$id"
    fi
  done
}

up() {
  local id=$1 n=$2 mode=${3:-bridge} switch=${4:-}
  valid_id "$id"
  [[ $n =~ ^[0-9]+$ && $n -ge 2 && $n -le 8 ]] || die "nodes '$n': 2 to 8"
  check
  sweep
  local br
  br=$(br_of "$id")
  mkdir -p "$state_root/$id"
  echo "${DISTTEST_CLUSTER_OWNER:-$PPID}" >"$state_root/$id/owner"
  echo "$n" >"$state_root/$id/nodes"
  echo "$mode" >"$state_root/$id/mode"
  # Whatever stops `up` half-way (a failed command, die) removes what it made.
  trap 'down "$id"' EXIT
  ip netns add "$br"
  ip -n "$br" link set lo up
  case $mode in
    bridge)
      ip -n "$br" link add br0 type bridge
      ip -n "$br" link set br0 up
      ;;
    switch)
      [[ -x $switch ]] || die "switch mode needs the netem_switch binary, not '$switch'"
      mkfifo "$state_root/$id/control"
      # The hub runs in the bridge's namespace, where it makes its TAPs.
      ip netns exec "$br" "$switch" "$n" t "$state_root/$id/control" \
        "$(cat "$state_root/$id/owner")" >"$state_root/$id/switch.out" 2>&1 &
      echo $! >"$state_root/$id/switch.pid"
      for _ in $(seq 100); do
        grep -q ready "$state_root/$id/switch.out" 2>/dev/null && break
        kill -0 "$(cat "$state_root/$id/switch.pid")" 2>/dev/null || die "netem_switch failed: $(cat "$state_root/$id/switch.out")"
        sleep 0.05
      done
      grep -q ready "$state_root/$id/switch.out" || die "netem_switch did not start"
      ;;
    *) die "mode '$mode': bridge or switch" ;;
  esac
  local hosts="127.0.0.1 localhost"$'\n'
  for ((k = 1; k <= n; k++)); do hosts+="$subnet.$((10 + k)) node$k"$'\n'; done
  for ((k = 1; k <= n; k++)); do
    local ns
    ns=$(ns_of "$id" "$k")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    if [[ $mode == bridge ]]; then
      ip -n "$br" link add "p$k" type veth peer name eth0 netns "$ns"
      ip -n "$br" link set "p$k" master br0 up
    else
      ip -n "$br" link set "t$k" netns "$ns"
      ip -n "$ns" link set "t$k" name eth0
    fi
    ip -n "$ns" addr add "$subnet.$((10 + k))/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$hosts" >"/etc/netns/$ns/hosts"
    install -d -m 1777 "$state_root/$id/tmp-node$k"
  done
  install -d -m 1777 "$state_root/$id/shared"
  trap - EXIT
}

node_ns() {
  local id=$1 k=$2
  valid_id "$id"
  [[ -f $state_root/$id/nodes ]] || die "no cluster '$id'"
  [[ $k =~ ^[0-9]+$ && $k -ge 1 && $k -le $(cat "$state_root/$id/nodes") ]] || die "cluster '$id' has no node '$k'"
  ns_of "$id" "$k"
}

# Slurm on cluster <id>: the configuration, munged, slurmctld on node1 and a
# slurmd on each node, then waits until every node is idle (at most 30 s;
# else says what the daemons logged).
slurm() {
  local id=$1 k n state
  valid_id "$id"
  state=$state_root/$id
  [[ -f $state/nodes ]] || die "no cluster '$id'"
  n=$(cat "$state/nodes")
  local missing=()
  for c in munged slurmctld slurmd srun scancel sinfo; do
    command -v "$c" >/dev/null || missing+=("$c")
  done
  ((${#missing[@]} == 0)) || die "Slurm is not installed (no ${missing[*]}): apt-get install slurm-wlm munge"
  local s=$state/slurm m=$state/munge
  mkdir -p "$s" "$m"
  chmod 700 "$m"
  head -c 1024 /dev/urandom >"$m/munge.key"
  chmod 400 "$m/munge.key"
  "$0" exec "$id" 1 munged --force --socket="$m/socket" --key-file="$m/munge.key" \
    --log-file="$m/log" --pid-file="$m/pid" --seed-file="$m/seed" ||
    die "munged did not start: $(tail -n 5 "$m/log" 2>/dev/null)"
  local nodes="" names=""
  for ((k = 1; k <= n; k++)); do
    nodes+="NodeName=node$k NodeAddr=$subnet.$((10 + k)) CPUs=4 State=UNKNOWN"$'\n'
    names+="${names:+,}node$k"
    mkdir -p "$s/spool-node$k"
  done
  # (KillWait, from a step's SIGTERM to its SIGKILL, is Slurm's 30 s.)
  # SlurmdTimeout: a node not heard from this long is DOWN, its jobs ended.
  cat >"$s/slurm.conf" <<CONF
ClusterName=disttest$id
SlurmctldHost=node1($subnet.11)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/socket
StateSaveLocation=$s/ctld
SlurmdSpoolDir=$s/spool-%n
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd-%n.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$s/task-prolog.sh
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
FirstJobId=4242
SlurmdTimeout=10
MessageTimeout=5
${nodes}PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP
CONF
  # The machine's cgroups are never touched (nothing uses them here), but
  # slurmd loads the plugin and finds no unified mount at /sys/fs/cgroup.
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nIgnoreSystemd=yes\n' >"$s/cgroup.conf"
  # (Unless the task's TMPDIR is the directory every node shares, as `exec`.)
  cat >"$s/task-prolog.sh" <<PROLOG
#!/bin/sh
case \${TMPDIR:-} in
  $state/shared | $state/shared/*) ;;
  *) echo "export TMPDIR=$state/tmp-\$(hostname)" ;;
esac
PROLOG
  chmod 755 "$s/task-prolog.sh"
  export SLURM_CONF=$s/slurm.conf
  "$0" exec "$id" 1 slurmctld -i || die "slurmctld did not start: $(tail -n 5 "$s/slurmctld.log" 2>/dev/null)"
  for ((k = 1; k <= n; k++)); do
    "$0" exec "$id" "$k" slurmd -N "node$k" ||
      die "slurmd on node$k did not start: $(tail -n 5 "$s/slurmd-node$k.log" 2>/dev/null)"
  done
  local states="" deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    states=$("$0" exec "$id" 1 sinfo -h -N -o '%N %t' 2>&1 || true)
    [[ $(grep -c ' idle$' <<<"$states") -eq $n ]] && return 0
    sleep 0.1
  done
  die "Slurm's nodes are not idle after 30 s: ${states//$'\n'/; }; slurmctld: $(tail -n 3 "$s/slurmctld.log" 2>/dev/null)"
}

cmd=${1:-}
shift || true
case $cmd in
  check) check ;;
  up) up "$@" ;;
  down)
    valid_id "${1:-}"
    down "$1"
    ;;
  sweep) sweep ;;
  slurm) slurm "$@" ;;
  exec)
    ns=$(node_ns "$1" "$2")
    node=node$2
    state=$state_root/$1
    shift 2
    if [[ -f $state/slurm/slurm.conf ]]; then export SLURM_CONF=$state/slurm/slurm.conf; fi
    # Its own hostname (a UTS namespace) and temporary directory: TMPDIR is
    # the node's tmp-node<k> (unless the command's TMPDIR is the cluster's
    # shared directory), and the other nodes' are hidden under empty,
    # read-only tmpfs mounts. (ip netns exec gives each command a mount
    # namespace of its own, where the mounts stay. /tmp itself is left
    # alone: a checkout under /tmp stays visible.) A command started from
    # another node (by mpirun's rsh agent) brings that node's mounts along,
    # this node's own directory hidden among them: they come off first.
    exec ip netns exec "$ns" unshare --uts -- sh -c '
      node=$1 state=$2 && shift 2 && hostname "$node" || exit 1
      own=$state/tmp-$node
      while umount "$own" 2>/dev/null; do :; done
      for d in "$state"/tmp-node*; do
        [ "$d" = "$own" ] && continue
        mount -t tmpfs -o ro,size=1m disttest-hidden "$d" || exit 1
      done
      case ${TMPDIR:-} in
        "$state"/shared | "$state"/shared/*) ;;
        *) TMPDIR=$own && export TMPDIR ;;
      esac
      exec "$@"' sh "$node" "$state" "$@"
    ;;
  link)
    ns=$(node_ns "$1" "$2")
    ip -n "$ns" link set eth0 "$3"
    ;;
  impair)
    id=$1 delay=$2 loss=$3
    valid_id "$id"
    mode=$(cat "$state_root/$id/mode")
    if [[ $mode == switch ]]; then
      printf 'delay %s\nloss %s\n' "$delay" "$loss" >"$state_root/$id/control"
    else
      for ((k = 1; k <= $(cat "$state_root/$id/nodes"); k++)); do
        tc -n "$(ns_of "$id" "$k")" qdisc replace dev eth0 root netem delay "${delay}ms" loss "${loss}%"
      done
    fi
    ;;
  drop-port)
    ns=$(node_ns "$1" "$2")
    command -v nft >/dev/null || die "nft (nftables) is not installed"
    ip netns exec "$ns" nft add table inet disttest
    ip netns exec "$ns" nft add chain inet disttest input '{ type filter hook input priority 0; }'
    # From other nodes only: the node's own ranks reach it over lo.
    ip netns exec "$ns" nft add rule inet disttest input iifname eth0 tcp dport "$3" drop
    ;;
  *)
    sed -n '2,32p' "$0" >&2
    exit 2
    ;;
esac
