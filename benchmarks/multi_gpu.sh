#!/usr/bin/env bash
# Issue 29 on a machine with N GPUs (2, 4 or 8; the largest lent first), from the repository root,
# carrying .whl (benchmarks/README.md): every layout the world size allows for Llama 3.1 8B and
# Llama 3.2 3B (bf16, compiled, full checkpointing, micro batch 2, global batch 32), each predicted
# before it runs from the committed one-GPU records (predict.calibration), then DeepSpeed ZeRO-3
# with and without ZeRO++'s hpZ, then the seeds' set-ups at 8 GPUs. Records and logs are packed
# into $OUT/multi-<N>.tgz after each sweep, so a call cut by its time limit keeps what ran.
#   bash benchmarks/multi_gpu.sh 8        # then: python -m analysis <unpacked dir> --predict
set -uo pipefail
n=${1:?usage: bash benchmarks/multi_gpu.sh NGPUS (2, 4 or 8)}
case $n in 2 | 4 | 8) ;; *) echo "multi_gpu.sh: NGPUS must be 2, 4 or 8, not $n" >&2; exit 2 ;; esac
source benchmarks/device_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp}/multi-$n
mkdir -p "$out"
pack() { tar -czf "${OUT:-/tmp}/multi-$n.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
# The layouts of n GPUs (each a parallel={...} point; dp_shard=-1 takes the rest of the world).
layouts="{dp_shard:-1},{tp:2},{pp:2,pp_schedule:1F1B,pp_microbatches:4},{pp:2,pp_schedule:Interleaved1F1B,pp_microbatches:4}"
[ "$n" -ge 4 ] && layouts+=",{dp_replicate:2,dp_shard:$((n / 2))},{tp:4},{pp:2,tp:2,pp_schedule:1F1B,pp_microbatches:4}"
[ "$n" -ge 8 ] && layouts+=",{tp:8},{pp:4,pp_schedule:1F1B,pp_microbatches:4},{dp_replicate:4,dp_shard:2}"
common=(device=cuda nproc_per_node="$n" precision=bf16 attention=sdpa compile=true activation_checkpointing=full
  model.seq_len=2048 batch.micro_batch_size=2 batch.global_batch_size=32 steps.warmup=3 steps.measure=10
  timeout_s=400 predict.calibration=benchmarks/results/h200)
for model in llama3.1-8b llama3.2-3b; do
  timeout 3000 python3 run.py -m model=$model backend=fsdp "${common[@]}" "parallel=$layouts" \
    hydra.sweep.dir="$out/layouts-$model" >"$out/layouts-$model.log" 2>&1
  echo "layouts $model: rc=$?"; pack
  timeout 1200 python3 run.py -m model=$model backend=zero3 "${common[@]}" \
    backend.zero_hpz_partition_size=1,$n hydra.sweep.dir="$out/zero3-$model" >"$out/zero3-$model.log" 2>&1
  echo "zero3 $model: rc=$?"; pack
done
if [ "$n" -eq 8 ]; then  # the seeds at their own scale, beside 124.49 and 24.49 TFLOPs per A100
  for seed in seed-deepspeed seed-fsdp; do
    timeout 1800 python3 run.py -m +sweep=$seed nproc_per_node=8 hydra.sweep.dir="$out/$seed" >"$out/$seed.log" 2>&1
    echo "$seed: rc=$?"; pack
  done
fi
python3 -m analysis "$out" --predict --columns model,backend,layout,zero_hpz_partition_size,status,tokens_per_s_per_device,mfu,predicted_iteration_time_s,prediction_error,peak_cuda_allocated_gib
