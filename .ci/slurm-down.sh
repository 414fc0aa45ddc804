#!/usr/bin/env bash
# Stop the private Slurm that .ci/slurm-up.sh started: cancel what is still queued on it, then stop
# slurmd, slurmctld and munged by the PIDs in $FLOPSWEEP_SLURM_DIR/pids (SIGTERM, then SIGKILL after
# 10 s), and remove its slurm.conf, so that the slurm tests no longer find it. Daemons it did not
# start (a system Slurm, a system munged) are left alone.
#
# An optional argument is an exit status to pass on: `...; bash .ci/slurm-down.sh $?` stops the
# cluster and then exits with the status of the command before it (when that is not 0).
set -uo pipefail
passed=${1:-0}
state=${FLOPSWEEP_SLURM_DIR:-/tmp/flopsweep-slurm}
pids=$state/pids
conf=$state/slurm.conf
if [ ! -s "$pids" ]; then
  echo "no $pids: nothing to stop"
  rm -f "$conf"
  exit "$passed"
fi
if [ -f "$conf" ] && command -v squeue >/dev/null; then
  export SLURM_CONF=$conf
  queued=$(timeout 10 squeue -h -o %i 2>/dev/null)
  if [ -n "$queued" ]; then
    # shellcheck disable=SC2086
    timeout 10 scancel --full $queued || true
    for _ in $(seq 50); do [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi
stop() {  # name pid
  kill -0 "$2" 2>/dev/null || { echo "$1 ($2) was not running"; return; }
  kill -TERM "$2"
  for _ in $(seq 100); do kill -0 "$2" 2>/dev/null || { echo "stopped $1 ($2)"; return; }; sleep 0.1; done
  kill -KILL "$2" 2>/dev/null && echo "killed $1 ($2)"
}
# Reverse start order: slurmd, slurmctld, then munged.
tac "$pids" | while read -r name pid; do stop "$name" "$pid"; done
rm -f "$pids" "$conf"
exit "$passed"
