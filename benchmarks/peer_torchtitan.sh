#!/usr/bin/env bash
# flopsweep next to torchtitan 0.2.2 on the same GPU, in one device call per group:
#   source benchmarks/device_env.sh && bash benchmarks/peer_torchtitan.sh 1b [BUDGET_S]
#   source benchmarks/device_env.sh && bash benchmarks/peer_torchtitan.sh 8b [BUDGET_S]
# Run it from the repository root on the GPU machine, with the torchtitan kit copied into
# .peer/torchtitan/ (carry .peer and .whl). GROUP 1b: Llama-3 1B shape (untied), micro batch 8,
# seq 2048, {eager, compiled} x {no AC, full AC}; GROUP 8b: Llama 3.1 8B, batch 2, full AC,
# {eager, compiled} (batch 1 when batch 2 runs out of memory, as run_tt.sh does).
# First the kit's own run_tt.sh GROUP (its wheels in /tmp/tt_site, not in flopsweep's /tmp/site,
# and with TensorBoard on: torchtitan reports its data-loading time only there), then the
# matching flopsweep runs one after the other, each its own run.py with its own timeout_s.
# BUDGET_S (default 540; the device call also spends ~10-30 s on the wheel install before it) bounds the whole script: torchtitan gets what the flopsweep runs do not
# need (run_tt.sh's TT_BUDGET_S), each flopsweep run is skipped when too little time is left and
# its timeout_s is cut to what is left. After each stage everything so far is packed into ONE
# $OUT/peer-torchtitan-GROUP.tgz; unpack it into benchmarks/results/h200/peer-torchtitan/ and run
# python3 benchmarks/peer_table.py. The table of this call is also printed at the end.
# Knobs: TT_STEPS, TT_WARMUP, TT_BS_8B, ... (run_tt.sh's), PEER_TT_TB=0 (no TensorBoard),
#   FS_WARMUP (3), FS_MEASURE (10), FS_EXTRA (more run.py overrides), PEER_KIT, PEER_WORK.
set -uo pipefail
group=${1:-}; budget=${2:-540}
case "$group" in 1b|8b) ;; *) echo "usage: $0 1b|8b [BUDGET_S]"; exit 2 ;; esac
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[peer $(elapsed)s] $*"; }

source "$(dirname "$0")/device_env.sh" || exit 1
# torchtitan sees the machine's packages and its own wheels, not flopsweep's (/tmp/site, the repo).
tt_pythonpath() {
  local IFS=: p; local keep=()
  for p in ${PYTHONPATH-}; do [[ -z $p || $p == /tmp/site || $p == "$PWD" ]] || keep+=("$p"); done
  echo "${keep[*]}"
}
kit=${PEER_KIT:-.peer/torchtitan}
work=${PEER_WORK:-/tmp/peer-torchtitan}
out=${OUT:-/tmp/peer-out}
stage=$work/stage
tt_stage=$stage/torchtitan/$group
fs_stage=$stage/flopsweep/$group
tt_logdir=$work/tt/$group
fs_root=$work/fs/$group
tarball=$out/peer-torchtitan-$group.tgz
[ -f "$kit/run_tt.sh" ] || { echo "no torchtitan kit at $kit (copy it, carry .peer)"; exit 1; }
rm -rf "$tt_stage" "$fs_stage" "$tt_logdir" "$fs_root"
mkdir -p "$out" "$tt_stage/logs" "$fs_stage" "$tt_logdir" "$fs_root"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

pack() {
  # torchtitan: its runs.tsv, summary, per-run logs and TensorBoard event files; flopsweep: the
  # records, tracebacks, sweep configs and logs (not .hydra/ or caches).
  [ -f "$tt_logdir/runs.tsv" ] && cp "$tt_logdir/runs.tsv" "$tt_stage/"
  for f in "$tt_logdir"/*.log; do [ -f "$f" ] && cp "$f" "$tt_stage/logs/"; done
  [ -d "$tt_logdir/dump/tb" ] && (cd "$tt_logdir/dump" && find tb -name 'events.out.tfevents.*' \
      -exec cp --parents {} "$tt_stage" \;)
  (cd "$fs_root" && find . \( -name metrics.json -o -name 'traceback_rank*.txt' -o -name multirun.yaml \
      -o -name '*.log' \) -exec cp --parents {} "$fs_stage" \;)
  tar czf "$tarball.tmp" -C "$stage" "torchtitan/$group" "flopsweep/$group" && mv "$tarball.tmp" "$tarball"
}

# ---- flopsweep plan: NAME EST_S CAP_S overrides (EST: least time to start it, CAP: its timeout_s) --
common=(backend=single attention=sdpa precision=bf16 batch=fixed batch.grad_accum=1 device=cuda
        nproc_per_node=1 model.seq_len=2048 "steps.warmup=${FS_WARMUP:-3}" "steps.measure=${FS_MEASURE:-10}"
        tag=peer-torchtitan)
if [ "$group" = 1b ]; then
  model=(model=llama3.2-1b model.tie_embeddings=false batch.micro_batch_size=8)
  fs_reserve=${PEER_FS_RESERVE:-180}   # 4 runs: ~20-25 s eager, ~35-50 s compiled on an H200
else
  model=(model=llama3.1-8b)
  fs_reserve=${PEER_FS_RESERVE:-190}   # 2 runs (+2 at batch 1 after an OOM): ~45 s eager, ~80 s compiled
fi

fs_ok=1
if ! python3 -c "import hydra, omegaconf, flopsweep" 2>/dev/null; then
  say "flopsweep cannot be imported (hydra/omegaconf missing from .whl?): flopsweep runs skipped"; fs_ok=0
elif [ ! -f "conf/model/${model[0]#model=}.yaml" ]; then
  say "conf/model/${model[0]#model=}.yaml does not exist yet: flopsweep runs skipped"; fs_ok=0
fi

# ---- 1. torchtitan -------------------------------------------------------------------------------
tt_budget=$(( budget - fs_reserve - 25 - $(elapsed) ))   # run_tt.sh stops its runs 25 s after TT_BUDGET_S
(( fs_ok )) || tt_budget=$(( budget - 25 - $(elapsed) ))
tb_arg="--metrics.enable_tensorboard"; [ "${PEER_TT_TB:-1}" = 0 ] && tb_arg=""
say "torchtitan: run_tt.sh $group, TT_BUDGET_S=$tt_budget, extra args: ${tb_arg:-none} ${TT_EXTRA_ARGS:-}"
env PYTHONPATH="$(tt_pythonpath)" TT_SITE="${TT_SITE:-/tmp/tt_site}" TT_LOG_DIR="$tt_logdir" OUT="$tt_stage" \
    TT_BUDGET_S="$tt_budget" TT_EXTRA_ARGS="$tb_arg ${TT_EXTRA_ARGS:-}" \
    bash "$kit/run_tt.sh" "$group" > "$tt_stage/run_tt.out" 2>&1
say "torchtitan: run_tt.sh exited $? (full output in torchtitan/$group/run_tt.out)"
grep -E "^\[run_tt|^(python|GPU:|C compiler)|ERROR|Error|Traceback|OutOfMemory" "$tt_stage/run_tt.out" | tail -n 30
[ -f "$tt_stage/tt_summary.txt" ] && cat "$tt_stage/tt_summary.txt"
rm -f "$tt_stage/tt_logs.txt"   # the same logs as logs/*.log
pack
leftover=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null)
[ -n "$leftover" ] && say "processes still on the GPU after torchtitan: $leftover"

# ---- 2. flopsweep --------------------------------------------------------------------------------
rc=0
fs_run() {  # NAME EST_S CAP_S overrides...
  local name=$1 est=$2 cap=$3; shift 3
  local left=$(( budget - $(elapsed) - 10 ))   # 10 s for the last pack and the table
  if (( !fs_ok || left < est )); then say "SKIP flopsweep $name (${left}s left, needs ~${est}s)"; return 0; fi
  local tmo=$(( cap < left - 25 ? cap : left - 25 ))
  say "=== flopsweep $name: timeout_s=$tmo $*"
  # shellcheck disable=SC2086
  timeout -k 10 $(( tmo + 20 )) python3 run.py -m "${common[@]}" "${model[@]}" "$@" timeout_s="$tmo" \
      hydra.sweep.dir="$fs_root/$name" ${FS_EXTRA:-} 2>&1 \
    | grep -vE "measured step|FutureWarning|return func" > "$fs_root/$name.log"
  local code=${PIPESTATUS[0]}
  tail -n 4 "$fs_root/$name.log"
  [ "$code" -eq 0 ] || { say "flopsweep $name: run.py exited $code"; rc=1; }
  pack
}
fs_status() {  # NAME -> the status of its record, or "none"
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$fs_root/$1/0/metrics.json" \
    2>/dev/null || echo none
}
if [ "$group" = 1b ]; then
  fs_run 1b_eager_noac     25  90 activation_checkpointing=false compile=false
  fs_run 1b_compile_noac   45 150 activation_checkpointing=false compile=true
  fs_run 1b_eager_fullac   25  90 activation_checkpointing=true  compile=false
  fs_run 1b_compile_fullac 45 150 activation_checkpointing=true  compile=true
else
  bs=${TT_BS_8B:-2}
  # run_tt.sh retries at batch 1 after an OOM at batch 2: then flopsweep runs at batch 1 too.
  awk -F'\t' '$1 == "8b_eager_fullac_bs1" {f = 1} END {exit !f}' "$tt_logdir/runs.tsv" 2>/dev/null && bs=1
  fs_run "8b_eager_fullac_bs$bs"   45 150 activation_checkpointing=true compile=false batch.micro_batch_size=$bs
  fs_run "8b_compile_fullac_bs$bs" 70 240 activation_checkpointing=true compile=true  batch.micro_batch_size=$bs
  # flopsweep's own OOM at batch 2 (time permitting): the same run at batch 1, unmatched in the table.
  for mode in eager compile; do
    if [ "$bs" -gt 1 ] && [ "$(fs_status "8b_${mode}_fullac_bs$bs")" = oom ]; then
      [ $mode = eager ] && comp=false est=45 cap=150 || comp=true est=70 cap=240
      fs_run "8b_${mode}_fullac_bs1" $est $cap activation_checkpointing=true compile=$comp batch.micro_batch_size=1
    fi
  done
fi

pack
say "packed $tarball"
python3 "$(dirname "$0")/peer_table.py" "$stage" || true
exit $rc
