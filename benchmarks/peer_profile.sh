#!/usr/bin/env bash
# One profiled step of torchtitan 0.2.2 and one of flopsweep on the same set-up and GPU, and a
# table of their GPU time by kernel family (benchmarks/kernel_table.py): where a throughput gap
# between the two comes from.
#   source benchmarks/device_env.sh && bash benchmarks/peer_profile.sh [8b|1b] [COMPILE] [AC] [BS]
# Defaults: 8b true full 2 (Llama 3.1 8B, compiled, full activation checkpointing, local batch 2,
# seq 2048: the row of the side-by-side where flopsweep trailed). Run from the repository root on
# the GPU machine with the kit in .peer/torchtitan/ (carry .peer and .whl), as peer_torchtitan.sh.
# torchtitan runs 10 steps with its own profiler on (--profiling.enable_profiling, warm-up 3, the
# trace of step 10); flopsweep runs its measured steps and then one profiled step (profile=true).
# Everything lands in $OUT/peer-profile-GROUP/: both traces (gzipped), torchtitan's log,
# flopsweep's record and log, and kernel_table.md. Copy that folder to
# benchmarks/results/<machine>/peer-profile/.
set -uo pipefail
group=${1:-8b}; compile=${2:-true}; ac=${3:-full}; bs=${4:-2}
case "$group" in 1b|8b) ;; *) echo "usage: $0 [8b|1b] [true|false] [full|none] [BS]"; exit 2 ;; esac
source "$(dirname "$0")/device_env.sh" || exit 1
kit=$(cd "${PEER_KIT:-.peer/torchtitan}" 2>/dev/null && pwd) || { echo "no torchtitan kit (copy it to .peer/torchtitan)"; exit 1; }
repo=$PWD
work=${PEER_WORK:-/tmp/peer-profile}/$group
out=${OUT:-/tmp/peer-out}/peer-profile-$group
rm -rf "$work" "$out"; mkdir -p "$work" "$out"
say() { echo "[peer-profile $SECONDS s] $*"; }

# torchtitan's packages go to their own site dir; it must not see flopsweep's (/tmp/site, the repo).
tt_site=${TT_SITE:-/tmp/tt_site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$tt_site" \
  "$kit"/wheels/*.whl || exit 1
if [ "$group" = 8b ]; then cfg=configs/llama3_8b.toml; fs_model=(model=llama3.1-8b)
else cfg=configs/llama3_1b.toml; fs_model=(model=llama3.2-1b model.tie_embeddings=false); fi
[ "$compile" = true ] && tt_compile=--compile.enable || tt_compile=--compile.no-enable
[ "$ac" = full ] && fs_ac=true || fs_ac=false

say "torchtitan: $cfg, compile=$compile, AC=$ac, local batch $bs, 10 steps, profiling step 10"
(cd "$kit" && env PYTHONPATH="$tt_site:$kit" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
   HF_DATASETS_CACHE="$work/hf_cache" TRITON_CACHE_DIR="$work/triton_cache" \
   PYTORCH_ALLOC_CONF=expandable_segments:True \
   timeout -k 15 300 python3 -m torch.distributed.run --standalone --nproc_per_node=1 \
     --local-ranks-filter 0 --role rank --tee 3 -m torchtitan.train --job.config_file "$cfg" \
     --training.steps 10 --job.dump_folder "$work/tt" --activation_checkpoint.mode "$ac" "$tt_compile" \
     --training.local_batch_size "$bs" --profiling.enable_profiling --profiling.profile_freq 10 \
     --profiling.save_traces_folder profile_traces) > "$out/torchtitan.log" 2>&1
say "torchtitan exited $?"; grep -E "step: |Error|OutOfMemory" "$out/torchtitan.log" | tail -n 5
tt_trace=$(find "$work/tt" -name 'rank0_trace.json' | sort | tail -n 1)
[ -n "$tt_trace" ] && gzip -c "$tt_trace" > "$out/torchtitan.rank0.trace.json.gz"

say "flopsweep: the same set-up, profile=true"
timeout -k 10 300 python3 run.py -m backend=single attention=sdpa precision=bf16 batch=fixed batch.grad_accum=1 \
  device=cuda nproc_per_node=1 model.seq_len=2048 "${fs_model[@]}" batch.micro_batch_size="$bs" \
  activation_checkpointing="$fs_ac" compile="$compile" steps.warmup=3 steps.measure=10 profile=true \
  tag=peer-profile timeout_s=240 hydra.sweep.dir="$work/fs" > "$out/flopsweep.log" 2>&1
say "flopsweep exited $?"; tail -n 3 "$out/flopsweep.log"
cp "$work/fs/0/metrics.json" "$out/" 2>/dev/null
cp "$work/fs/0/profile/rank0.trace.json.gz" "$out/flopsweep.rank0.trace.json.gz" 2>/dev/null

args=()
[ -f "$out/torchtitan.rank0.trace.json.gz" ] && args+=("torchtitan=$out/torchtitan.rank0.trace.json.gz")
[ -f "$out/flopsweep.rank0.trace.json.gz" ] && args+=("flopsweep=$out/flopsweep.rank0.trace.json.gz")
if [ ${#args[@]} -gt 0 ]; then
  python3 "$repo/benchmarks/kernel_table.py" "${args[@]}" --top 15 --out "$out/kernel_table.md"
else
  say "no trace came out of either side"; exit 1
fi
