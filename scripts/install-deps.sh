#!/usr/bin/env bash
# Installs what disttest needs to build and test on Debian 12 (bookworm).
# Run as root, or as a user with sudo. Safe to run again.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libgtest-dev libgmock-dev
  libfmt-dev libboost-dev libgloo-dev nlohmann-json3-dev
  clang-format
  elfutils gdb   # eu-stack or gdb: stacks of hung ranks
  openmpi-bin    # mpirun: launch_from_env under a real launcher
  libopenmpi-dev # disttest::mpi (mpi_comm()) and its tests under mpirun
  iproute2 nftables  # tests/cluster: nodes as network namespaces, a firewall
  slurm-wlm munge    # tests/cluster: real Slurm on those nodes (srun, scancel)
  python3        # scripts/check-doc-links.py: the docs' links (ctest docs.*)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "disttest: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
# On a machine run by systemd, munge's package starts the machine's own
# munged; the cluster tests run a munged of their own (tests/cluster), so the
# one installed here is stopped and left disabled. (slurmd and slurmctld do
# not start without /etc/slurm/slurm.conf.)
if [[ " ${missing[*]} " == *" munge "* && -d /run/systemd/system ]] &&
    command -v systemctl >/dev/null; then
  "${sudo[@]}" systemctl disable --now munge.service >/dev/null 2>&1 || true
fi
