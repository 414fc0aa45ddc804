#!/usr/bin/env bash
# Stop the one-node Slurm that .ci/slurm-up.sh started: cancel what is still queued, then stop
# slurmd, slurmctld and munged by the PIDs in $FLOPSWEEP_SLURM_DIR/pids (SIGTERM, then SIGKILL
# after 10 s). Daemons it did not start are left alone.
set -uo pipefail
state=${FLOPSWEEP_SLURM_DIR:-/tmp/flopsweep-slurm}
pids=$state/pids
if [ ! -s "$pids" ]; then
  echo "no $pids: nothing to stop"
  exit 0
fi
if command -v squeue >/dev/null && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
  timeout 10 scancel --full $(squeue -h -o %i) || true
  for _ in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
fi
stop() {  # name pid
  kill -0 "$2" 2>/dev/null || { echo "$1 ($2) was not running"; return; }
  kill -TERM "$2"
  for _ in $(seq 100); do kill -0 "$2" 2>/dev/null || { echo "stopped $1 ($2)"; return; }; sleep 0.1; done
  kill -KILL "$2" 2>/dev/null && echo "killed $1 ($2)"
}
# Reverse start order: slurmd, slurmctld, then munged.
tac "$pids" | while read -r name pid; do stop "$name" "$pid"; done
rm -f "$pids"
