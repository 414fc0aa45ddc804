#!/usr/bin/env bash
# Run flopsweep sweeps on a GPU machine whose image lacks hydra/deepspeed, and pack the
# metrics.json files. Each argument is one sweep: "[LABEL@]NAME [extra overrides...]", NAME a
# file in sweep/ (LABEL names the result folder; default NAME).
#   bash benchmarks/h200.sh "backends" "seed-deepspeed nproc_per_node=1"
#   bash benchmarks/h200.sh "ds-tuning@backends backend=zero3 ..."
# Run it from the repository root. Exits 1 when any sweep's run.py did not exit 0.
# Wheels come from .whl/ (see benchmarks/README.md). Each sweep's log is $SWEEP_ROOT/<label>.log;
# after each sweep the metrics.json files, tracebacks and logs of every sweep so far are packed into
# one $OUT/sweeps-<CUDA_VISIBLE_DEVICES or all>.tgz (the device tool brings back few files).
# Copies may run in parallel, one per GPU, under CUDA_VISIBLE_DEVICES: give each its own
# SWEEP_ROOT, or each tarball also packs the other's sweeps.
set -uo pipefail
source "$(dirname "$0")/device_env.sh" || exit 1
out=${OUT:-/tmp/flopsweep-out}; root=${SWEEP_ROOT:-/tmp/flopsweep-sweeps}
mkdir -p "$out" "$root"
rc=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for spec in "$@"; do
  read -r name extra <<<"$spec"
  label=${name%@*}; name=${name#*@}
  echo "=== $label: python run.py -m +sweep=$name $extra"
  # shellcheck disable=SC2086
  python3 run.py -m +sweep="$name" $extra hydra.sweep.dir="$root/$label" 2>&1 \
    | grep --line-buffered -vE "measured step|FutureWarning|return func" | tee "$root/$label.log" | tail -n 25
  code=${PIPESTATUS[0]}
  [ "$code" -eq 0 ] || { echo "=== $label: run.py exited $code"; rc=1; }
  # After each sweep, so that a call cut short by its time limit still brings back the rest.
  (cd "$root" && find . -name metrics.json -o -name 'traceback_rank*.txt' -o -name multirun.yaml \
     -o -name '*.log' ! -name run.log | tar czf "$out/sweeps-${CUDA_VISIBLE_DEVICES:-all}.tgz" -T -)
done
exit $rc
