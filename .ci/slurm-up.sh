#!/usr/bin/env bash
# Start a private two-node Slurm on this machine for the slurm-marked tests (root, Debian's packages).
#
# Two nodes on one host: two slurmd (`slurmd -N NODE`), each with its own port, spool, PID file and log
# (Slurm's %n), named by two host names that resolve here (this host's short name and `localhost`),
# so a job's first node name is a usable MASTER_ADDR. Each node offers the whole machine's CPUs and
# memory: the tests' gloo ranks share the cores, as they do outside Slurm.
#
# Private: everything lives in $FLOPSWEEP_SLURM_DIR (default /tmp/flopsweep-slurm): its own
# slurm.conf, munged with its own key and socket (given to Slurm as AuthInfo=socket=...), state,
# spool, logs and PIDs, and its own free TCP ports (never 6817/6818). A system Slurm, its munged and
# /etc/slurm/slurm.conf are never used, written or stopped (the file is only read for the marker
# line of an older version of this script, which wrote it). Slurm's commands reach this cluster only
# with SLURM_CONF=$FLOPSWEEP_SLURM_DIR/slurm.conf: the script prints that export line, and the
# slurm tests (tests/integration/test_slurm.py) set it themselves when that file exists, so that submitit's
# sbatch/squeue/scancel calls inherit it. .ci/slurm-down.sh stops the daemons and removes that file.
#
# Everything is checked before any daemon starts: root, no earlier start still running, the
# packages (slurmctld, slurmd, slurm-client, munge; installed with apt-get when missing), the munge
# user, a short hostname that resolves (the job's MASTER_ADDR) and three free ports.
#   bash .ci/slurm-up.sh && python -m pytest -m slurm; bash .ci/slurm-down.sh $?
set -euo pipefail
state=${FLOPSWEEP_SLURM_DIR:-/tmp/flopsweep-slurm}
conf=$state/slurm.conf
munge_dir=$state/munge
socket=$munge_dir/munge.socket
started=()

fail() {  # one line, then stop whatever this script started
  echo "slurm-up: $*" >&2
  exit 1
}

stop_started() {
  [ "${#started[@]}" -eq 0 ] && return
  echo "slurm-up: stopping what it started" >&2
  bash "$(dirname "$0")/slurm-down.sh" >&2 || true
}
trap 'rc=$?; [ $rc -ne 0 ] && stop_started; exit $rc' EXIT

check_earlier_start() {
  [ -s "$state/pids" ] || return 0
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then
      fail "$name ($pid) from an earlier start is still running. Fix: run bash .ci/slurm-down.sh first"
    fi
  done <"$state/pids"
  rm -f "$state/pids" "$conf"  # left by a machine that stopped without slurm-down.sh
}

have_packages() {
  command -v slurmctld && command -v slurmd && command -v sbatch && command -v munged && command -v mungekey
} >/dev/null

install_packages() {
  have_packages && return
  command -v apt-get >/dev/null || fail "slurmctld, slurmd, sbatch or munged is missing and there is no apt-get. Fix: install Slurm and MUNGE"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed. Fix: check the package sources, or install slurmctld slurmd slurm-client munge"
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || fail "apt-get install slurmctld slurmd slurm-client munge failed. Fix: install them by hand"
  have_packages || fail "the packages are installed but a command is still missing (slurmctld, slurmd, sbatch, munged, mungekey)"
}

check_host() {
  host=$(hostname -s)
  [[ $host =~ ^[A-Za-z0-9][A-Za-z0-9-]*$ ]] || fail "hostname -s gives '$host', not a Slurm node name. Fix: set a plain host name"
  getent hosts "$host" >/dev/null || fail "the host name $host does not resolve (each job's MASTER_ADDR). Fix: add '127.0.1.1 $host' to /etc/hosts"
  [ "$host" != localhost ] || fail "the host is named localhost, and the second node takes that name. Fix: set another host name"
  getent hosts localhost >/dev/null || fail "localhost does not resolve (the second node's name). Fix: add '127.0.0.1 localhost' to /etc/hosts"
  id munge >/dev/null 2>&1 || fail "no user munge (munged must not run as root). Fix: apt-get install --reinstall munge"
}

free_ports() {  # prints three free TCP ports of 16817-16999, for slurmctld and the two slurmd
  python3 - <<'EOF'
import socket
found = []
for port in range(16817, 17000):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
    found.append(port)
    if len(found) == 3:
        break
print(*found)
EOF
}

start_munge() {
  mkdir -p "$munge_dir"
  chown munge:munge "$munge_dir"
  chmod 0755 "$munge_dir"  # munged: the socket directory must be searchable by all
  rm -f "$munge_dir/munge.key"
  mungekey --create --keyfile="$munge_dir/munge.key" >/dev/null
  chown munge:munge "$munge_dir/munge.key"
  chmod 0400 "$munge_dir/munge.key"
  # setpriv execs munged, so $! is munged's own PID.
  setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground --socket="$socket" \
    --key-file="$munge_dir/munge.key" --pid-file="$munge_dir/munged.pid" --log-file="$munge_dir/munged.log" \
    --seed-file="$munge_dir/munged.seed" >"$state/munged.out" 2>&1 &
  started+=(munged)
  echo "munged $!" >>"$state/pids"
  for _ in $(seq 50); do
    munge -S "$socket" -n </dev/null 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1 && return
    sleep 0.1
  done
  fail "munged did not come up: $(tail -n 3 "$state/munged.out" "$munge_dir/munged.log" 2>/dev/null | tr '\n' ' ')"
}

write_conf() {  # ctld_port d_port d2_port
  local node mem_mb cpus
  # slurmd -C prints this machine's topology (CPUs, sockets, cores, threads, RealMemory); it needs
  # no config, and SLURM_CONF keeps it away from the system's.
  node=$(SLURM_CONF=$conf slurmd -C | head -n 1)
  cpus=$(sed -E 's/.* CPUs=([0-9]+).*/\1/' <<<"$node")
  mem_mb=$(( $(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$node") * 9 / 10 ))
  node=$(sed -E "s/RealMemory=[0-9]+/RealMemory=$mem_mb/" <<<"$node")
  mkdir -p "$state/ctld" "$state/d/$host" "$state/d/localhost"
  cat >"$conf" <<EOF
# flopsweep .ci/slurm-up.sh: a private two-node test cluster on one host (SLURM_CONF=$conf)
ClusterName=flopsweep-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
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
# A job that loses a node ends NODE_FAIL; it is not requeued (flopsweep's launcher submits --no-requeue).
$(sed -E "s/NodeName=[^ ]+/NodeName=$host/" <<<"$node") NodeHostname=$host NodeAddr=127.0.0.1 Port=$2 State=UNKNOWN
$(sed -E "s/NodeName=[^ ]+/NodeName=localhost/" <<<"$node") NodeHostname=$host NodeAddr=127.0.0.1 Port=$3 State=UNKNOWN
PartitionName=debug Nodes=$host,localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
  for _ in $(seq 150); do
    if [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cx idle)" -eq 2 ]; then
      sinfo
      return
    fi
    sleep 0.2
  done
  echo "slurm-up: the two Slurm nodes did not become idle within 30 s:" >&2
  sinfo -N -l >&2 || true
  tail -n 20 "$state/slurmctld.log" "$state"/slurmd-*.log >&2 || true
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (slurmd runs the jobs; munged runs as the munge user). Fix: sudo bash $0"
start=$(date +%s.%N)
mkdir -p "$state"
check_earlier_start
install_packages
check_host
read -r ctld_port d_port d2_port <<<"$(free_ports)"
[ -n "${d2_port:-}" ] || fail "no three free TCP ports in 16817-16999. Fix: free some, or stop other test clusters"
# Checked; now start: munged, the config, slurmctld, slurmd (each PID to $state/pids).
: >"$state/pids"
start_munge
write_conf "$ctld_port" "$d_port" "$d2_port"
export SLURM_CONF=$conf
slurmctld -D -c -f "$conf" >"$state/slurmctld.out" 2>&1 &
started+=(slurmctld)
echo "slurmctld $!" >>"$state/pids"
for node_name in "$host" localhost; do
  slurmd -D -N "$node_name" -f "$conf" >"$state/slurmd-$node_name.out" 2>&1 &
  started+=(slurmd)
  echo "slurmd-$node_name $!" >>"$state/pids"
done
wait_idle
if grep -qF "# written by flopsweep .ci/slurm-up.sh" /etc/slurm/slurm.conf 2>/dev/null; then
  echo "note: /etc/slurm/slurm.conf was written by an older .ci/slurm-up.sh; nothing uses it now"
fi
echo "Slurm is up after $(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $start}") s" \
  "(nodes $host and localhost; slurmctld port $ctld_port, slurmd ports $d_port and $d2_port; PIDs in $state/pids)." \
  "For Slurm commands by hand:"
echo "export SLURM_CONF=$conf"
