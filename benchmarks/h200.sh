#!/usr/bin/env bash
# Run flopsweep sweeps on a GPU machine whose image lacks hydra/deepspeed, and pack the
# metrics.json files. Each argument is one sweep: "[LABEL@]NAME [extra overrides...]", NAME a
# file in sweep/ (LABEL names the result folder; default NAME).
#   bash benchmarks/h200.sh "backends" "seed-deepspeed nproc_per_node=1"
#   bash benchmarks/h200.sh "ds-tuning@backends backend=zero3 ..."
# Wheels come from .whl/ (see benchmarks/README.md); results land in $OUT/<label>.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh" || exit 1
out=${OUT:-/tmp/flopsweep-out}; root=${SWEEP_ROOT:-/tmp/flopsweep-sweeps}
mkdir -p "$out" "$root"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for spec in "$@"; do
  read -r name extra <<<"$spec"
  label=${name%@*}; name=${name#*@}
  echo "=== $label: python run.py -m +sweep=$name $extra"
  # shellcheck disable=SC2086
  python run.py -m +sweep="$name" $extra hydra.sweep.dir="$root/$label" 2>&1 \
    | grep -vE "measured step|FutureWarning|return func" | tee "$out/$label.log" | tail -n 25
  (cd "$root" && find "$label" -name metrics.json -o -name 'traceback_rank*.txt' -o -name multirun.yaml \
     | tar czf "$out/$label.tgz" -T -)
done
