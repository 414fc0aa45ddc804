#!/usr/bin/env bash
# Start a one-node Slurm on this machine for the slurm-marked tests (needs root and Debian's packages).
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge (22.05 on bookworm) when they are
# missing, writes /etc/slurm/slurm.conf for one node named `hostname -s` (its CPUs, 90% of its
# memory), then starts munged as the munge user (it refuses root) and `slurmctld -D`, `slurmd -D`
# in the background. No systemd is needed. Their PIDs go to $FLOPSWEEP_SLURM_DIR/pids, which
# .ci/slurm-down.sh reads to stop them. There is no accounting database: the tests bound every
# Slurm call with a timeout instead (tests/test_slurm.py).
#   bash .ci/slurm-up.sh && python -m pytest -m slurm && bash .ci/slurm-down.sh
set -euo pipefail
state=${FLOPSWEEP_SLURM_DIR:-/tmp/flopsweep-slurm}
conf=/etc/slurm/slurm.conf
marker="# written by flopsweep .ci/slurm-up.sh"

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
     && command -v munged >/dev/null; then
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "munged is already running; using it"
    return
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 0400 /etc/munge/munge.key
  # setpriv execs munged, so $! is munged's own PID.
  setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
    >"$state/munged.out" 2>&1 &
  echo "munged $!" >>"$state/pids"
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "munged did not come up:" >&2; cat "$state/munged.out" >&2; exit 1
}

write_conf() {
  if [ -e "$conf" ] && ! grep -qF "$marker" "$conf"; then
    echo "$conf exists and was not written by this script; refusing to overwrite it" >&2
    exit 1
  fi
  local host node mem_mb cpus
  host=$(hostname -s)
  # slurmd -C prints this machine's topology (CPUs, sockets, cores, threads, RealMemory).
  node=$(slurmd -C | head -n 1)
  cpus=$(sed -E 's/.* CPUs=([0-9]+).*/\1/' <<<"$node")
  mem_mb=$(( $(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$node") * 9 / 10 ))
  node=$(sed -E "s/RealMemory=[0-9]+/RealMemory=$mem_mb/" <<<"$node")
  mkdir -p "$(dirname "$conf")" "$state/ctld" "$state/d"
  cat >"$conf" <<EOF
$marker: a one-node test cluster
ClusterName=flopsweep-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# Without DefMemPerCPU a job gets all of the node's memory and jobs run one at a time.
DefMemPerCPU=$(( mem_mb / cpus ))
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
  for _ in $(seq 150); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; then
      sinfo
      return
    fi
    sleep 0.2
  done
  echo "the Slurm node did not become idle within 30 s:" >&2
  sinfo -N -l >&2 || true
  tail -n 20 "$state/slurmctld.log" "$state/slurmd.log" >&2 || true
  exit 1
}

if [ -s "$state/pids" ]; then
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then
      echo "$name ($pid) from an earlier start is still running: run .ci/slurm-down.sh first" >&2
      exit 1
    fi
  done <"$state/pids"
  rm -f "$state/pids"  # left by a machine that stopped without slurm-down.sh
fi
start=$(date +%s.%N)
install_packages
mkdir -p "$state"
: >"$state/pids"
start_munge
write_conf
slurmctld -D -c >"$state/slurmctld.out" 2>&1 &
echo "slurmctld $!" >>"$state/pids"
slurmd -D >"$state/slurmd.out" 2>&1 &
echo "slurmd $!" >>"$state/pids"
wait_idle
echo "Slurm is up after $(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $start}") s (PIDs in $state/pids)"
