#!/usr/bin/env bash
# torchtitan 0.2.2 and flopsweep on the same set-up and GPU, run in a chosen order, with the
# GPU's clocks, power and temperature logged, and (by default) one profiled step of each and a
# table of their GPU time by kernel family (benchmarks/kernel_table.py): where a throughput gap
# between the two comes from.
#   source benchmarks/device_env.sh && bash benchmarks/peer_profile.sh [8b|1b] [COMPILE] [AC] [BS]
# Defaults: 8b true full 2 (Llama 3.1 8B, compiled, full activation checkpointing, local batch 2,
# seq 2048: the row of the side-by-side where flopsweep trailed). Run from the repository root on
# the GPU machine with the kit in .peer/torchtitan/ (carry .peer and .whl), as peer_torchtitan.sh.
# Knobs:
#   PEER_ORDER   the runs, in order, each tt or fs (default "tt fs"; "fs tt fs" tells a GPU that
#                slows as it warms from a gap between the two programs)
#   PEER_PROFILE 1 (default): torchtitan runs 10 steps with its profiler on (warm-up 3, the trace
#                of step 10) and flopsweep adds one profiled step (profile=true); 0: no profiler,
#                torchtitan runs TT_STEPS (20) steps, as run_tt.sh
# Everything lands in $OUT/peer-profile-GROUP.tgz: per run its log (torchtitan-<i>.log,
# flopsweep-<i>.log), flopsweep's records (flopsweep-<i>.json), the traces (gzipped),
# nvidia-smi.csv (clocks, power, temperature each second) and, with traces, kernel_table.md.
set -uo pipefail
group=${1:-8b}; compile=${2:-true}; ac=${3:-full}; bs=${4:-2}
case "$group" in 1b|8b) ;; *) echo "usage: $0 [8b|1b] [true|false] [full|none] [BS]"; exit 2 ;; esac
source "$(dirname "$0")/device_env.sh" || exit 1
kit=$(cd "${PEER_KIT:-.peer/torchtitan}" 2>/dev/null && pwd) || { echo "no torchtitan kit (copy it to .peer/torchtitan)"; exit 1; }
repo=$PWD order=${PEER_ORDER:-tt fs} prof=${PEER_PROFILE:-1}
work=${PEER_WORK:-/tmp/peer-profile}/$group
out=$work/out
tarball=${OUT:-/tmp/peer-out}/peer-profile-$group.tgz
rm -rf "$work"; mkdir -p "$work" "$out" "$(dirname "$tarball")"
say() { echo "[peer-profile ${SECONDS}s] $*"; }
pack() { tar czf "$tarball" -C "$work" out; }

# torchtitan's packages go to their own site dir; it must not see flopsweep's (/tmp/site, the repo).
tt_site=${TT_SITE:-/tmp/tt_site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$tt_site" \
  "$kit"/wheels/*.whl || exit 1
if [ "$group" = 8b ]; then cfg=configs/llama3_8b.toml; fs_model=(model=llama3.1-8b)
else cfg=configs/llama3_1b.toml; fs_model=(model=llama3.2-1b model.tie_embeddings=false); fi
[ "$compile" = true ] && tt_compile=--compile.enable || tt_compile=--compile.no-enable
[ "$ac" = full ] && fs_ac=true || fs_ac=false
if [ "$prof" = 1 ]; then
  tt_prof=(--training.steps 10 --profiling.enable_profiling --profiling.profile_freq 10
           --profiling.save_traces_folder profile_traces)
  fs_prof=profile=true
else tt_prof=(--training.steps "${TT_STEPS:-20}"); fs_prof=profile=false; fi

nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -l 1 -i "${CUDA_VISIBLE_DEVICES:-0}" > "$out/nvidia-smi.csv" 2>&1 &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT

i=0
for side in $order; do
  i=$((i + 1))
  if [ "$side" = tt ]; then
    say "run $i torchtitan: $cfg, compile=$compile, AC=$ac, local batch $bs, profiler=$prof"
    (cd "$kit" && env PYTHONPATH="$tt_site:$kit" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
       HF_DATASETS_CACHE="$work/hf_cache" TRITON_CACHE_DIR="$work/triton_cache" \
       PYTORCH_ALLOC_CONF=expandable_segments:True \
       timeout -k 15 300 python3 -m torch.distributed.run --standalone --nproc_per_node=1 \
         --local-ranks-filter 0 --role rank --tee 3 -m torchtitan.train --job.config_file "$cfg" \
         --job.dump_folder "$work/tt-$i" --activation_checkpoint.mode "$ac" "$tt_compile" \
         --training.local_batch_size "$bs" "${tt_prof[@]}") > "$out/torchtitan-$i.log" 2>&1
    say "torchtitan exited $?"; grep -E "step: |Error|OutOfMemory" "$out/torchtitan-$i.log" | tail -n 3 | cut -c1-200
    trace=$(find "$work/tt-$i" -name 'rank0_trace.json' 2>/dev/null | sort | tail -n 1)
    [ -n "$trace" ] && gzip -c "$trace" > "$out/torchtitan-$i.trace.json.gz"
  elif [ "$side" = fs ]; then
    say "run $i flopsweep: the same set-up, $fs_prof"
    timeout -k 10 300 python3 run.py -m backend=single attention=sdpa precision=bf16 batch=fixed batch.grad_accum=1 \
      device=cuda nproc_per_node=1 model.seq_len=2048 "${fs_model[@]}" batch.micro_batch_size="$bs" \
      activation_checkpointing="$fs_ac" compile="$compile" steps.warmup=3 steps.measure=10 "$fs_prof" \
      tag=peer-torchtitan timeout_s=240 hydra.sweep.dir="$work/fs-$i" > "$out/flopsweep-$i.log" 2>&1
    say "flopsweep exited $?"; grep -E " ok: |error" "$out/flopsweep-$i.log" | tail -n 2
    cp "$work/fs-$i/0/metrics.json" "$out/flopsweep-$i.json" 2>/dev/null
    cp "$work/fs-$i/0/profile/rank0.trace.json.gz" "$out/flopsweep-$i.trace.json.gz" 2>/dev/null
  else
    say "PEER_ORDER: $side is neither tt nor fs"; exit 2
  fi
  pack
done

args=()
for t in "$out"/*.trace.json.gz; do [ -f "$t" ] && args+=("$(basename "$t" .trace.json.gz)=$t"); done
if [ ${#args[@]} -gt 0 ]; then
  python3 "$repo/benchmarks/kernel_table.py" "${args[@]}" --top 15 --out "$out/kernel_table.md" | head -n 16
fi
pack
say "packed $tarball"
