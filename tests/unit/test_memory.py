"""The memory estimate (``flopsweep.memory``): each part's arithmetic, the layouts, offload, the GPU
``plan=true`` plans for, the record's ``metrics.predicted_peak_gib`` and the analysis' error column.

The estimate is a pure function of ``(cfg, layout)``, so layouts that validation may still refuse
(tensor and pipeline parallelism) are tested here directly."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from flopsweep.backends import CUDA_BUCKET, DeepSpeedConfig, FSDPConfig
from flopsweep.checkpointing import EveryNConfig
from flopsweep.config import (
    AttentionConfig,
    BackendConfig,
    CheckpointingConfig,
    ConfigError,
    PrecisionConfig,
    RunConfig,
)
from flopsweep.layout import Layout
from flopsweep.memory import (
    GIB,
    block_params,
    estimate,
    fsdp_gathered_bytes,
    fsdp_reduce_bytes,
    in_flight_microbatches,
    offload_host_bytes,
    planned_gpu_bytes,
    stage_params,
)
from flopsweep.models import family
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig
from flopsweep.zero_memory import zero3_buffer_bytes

H, L, NH, S, V = 2048, 24, 16, 2048, 50304


GPT_13B = GPT2Config(name="gpt-1.3b", n_layer=L, n_embd=H, n_head=NH, seq_len=S, vocab_size=V)


P = 1_315_819_520


BLOCK = 12 * H * H + 13 * H  # eq. of DESIGN.md: N = l (12 h^2 + 13 h) + V h + s h + 2 h


REST = V * H + S * H + 2 * H


MB = 8


TOKENS = MB * S


GATHERED = 2 * (REST + 2 * BLOCK)
"""FSDP2's bf16 all-gathered weights at the start of backward: the root's group, two blocks."""


CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


ZERO3_SMALL = L * 13 * H + 2 * H
"""gpt-1.3b's tensors of at most ``10 h`` elements (flopsweep's ZeRO-3 persistence threshold): per
block the two LayerNorms' weights and biases and the four linear biases, ``13 h``; ``ln_f``, ``2 h``."""


ZERO3_EXTRA = 2 * CUDA_BUCKET + 2 * ZERO3_SMALL + 2 * 10**9
"""ZeRO-3's buffers beyond DeepSpeed's estimator for gpt-1.3b on two GPUs at the CUDA defaults, bf16:
the 5e8-element reduce bucket, the persistent tensors and 1e9 retained parameters (max_live)."""


def _llama(name: str) -> LlamaConfig:
    """The config of ``conf/model/<name>.yaml`` (its keys over LlamaConfig's defaults)."""
    doc = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    doc.pop("defaults")
    return LlamaConfig(**doc)


def _cfg(backend=None, **kw) -> RunConfig:
    cfg = dataclasses.replace(
        RunConfig(), model=GPT_13B, backend=backend or BackendConfig(name="single"), **kw
    )
    cfg.batch.micro_batch_size = MB
    return cfg


@dataclasses.dataclass(kw_only=True)
class OffloadFSDP(FSDPConfig):
    """``backend.cpu_offload`` (the offload branch adds it to ``FSDPConfig``; the estimate reads it
    by name)."""

    cpu_offload: bool = True


@dataclasses.dataclass(kw_only=True)
class OffloadZero(DeepSpeedConfig):
    offload_optimizer: str = "cpu"
    offload_param: str = "none"


def test_gpt_counts_its_block_and_the_rest() -> None:
    assert block_params(GPT_13B) == BLOCK and L * BLOCK + REST == P


def test_single_bf16_eager_by_part() -> None:
    """gpt-1.3b, micro batch 8, bf16 on one GPU: 12 P weights and AdamW moments + 2 P autocast copies
    at the start of backward, 16 P at the optimizer step; per token and layer the fp32 residual
    stream (2h x 4 B), 14h bf16 elements and SDPA's fp32 logsumexp per head; 12 B per logit."""
    est = estimate(_cfg(), Layout())
    assert (est.model_states, est.step_states) == (14 * P, 16 * P)
    assert est.activations == TOKENS * L * (2 * H * 4 + 14 * H * 2 + 4 * NH)
    assert est.logits == 12 * TOKENS * V and est.attention_workspace == 0
    assert est.total == est.backward_start == 14 * P + est.activations + est.logits
    assert est.total_gib == pytest.approx(53.39, abs=0.01)  # measured on the H200: 53.64 GiB


def test_sdpa_in_fp32_with_gqa_on_cuda_keeps_the_scores_of_its_math_kernel() -> None:
    """SDPA has no fp32 flash kernel and no memory-efficient kernel with ``enable_gqa``: a Llama (GQA)
    in fp32 on CUDA runs the math kernel and keeps about 4 bytes a score (measured on the H200:
    Llama 3.2 1B fp32 single, micro batch 4, 81.7 GiB); GPT-2 (no GQA), bf16 and the CPU do not."""
    from flopsweep.memory import scores_kernel

    llama = LlamaConfig(name="l", n_layer=2, n_embd=256, n_head=8, n_kv_head=2, seq_len=512, vocab_size=1000)

    def cfg(model, precision, device="cuda"):
        return dataclasses.replace(
            _cfg(), model=model, precision=PrecisionConfig(name=precision), device=device
        )

    fp32 = cfg(llama, "fp32")
    assert scores_kernel(fp32) == "sdpa-math"
    assert [
        scores_kernel(c) for c in (cfg(llama, "bf16"), cfg(GPT_13B, "fp32"), cfg(llama, "fp32", "cpu"))
    ] == ["sdpa"] * 3
    scores = MB * 8 * 512**2 * 2  # two layers
    gained = estimate(fp32, Layout()).activations - estimate(cfg(llama, "fp32", "cpu"), Layout()).activations
    assert gained == 4 * scores - 4 * MB * 512 * 8 * 2  # the scores in place of the logsumexp


def test_ddp_adds_its_buckets_and_fsdp_shards_over_dp_shard_only() -> None:
    ddp = estimate(_cfg(BackendConfig(name="ddp")), Layout())
    assert (ddp.model_states, ddp.step_states) == (18 * P, 20 * P)
    fsdp = estimate(_cfg(FSDPConfig()), Layout(dp_shard=8))
    assert (fsdp.model_states, fsdp.step_states) == (12 * P // 8 + GATHERED, 16 * P // 8)
    hsdp = estimate(_cfg(FSDPConfig()), Layout(dp_replicate=2, dp_shard=4))  # replicas hold copies
    assert (hsdp.model_states, hsdp.step_states) == (12 * P // 4 + GATHERED, 16 * P // 4)
    # FSDP2's bf16 compute: the residual stream in bf16
    assert fsdp.activations == TOKENS * L * (2 * H * 2 + 14 * H * 2 + 4 * NH)


def test_in_backward_keeps_one_gradient_at_the_step_instead_of_all() -> None:
    """``optim.in_backward`` (gpt-1.3b, one GPU, micro batch 1, full checkpointing, so that the step
    is the peak): the step holds the 12 P states and the largest parameter's gradient, the tied
    ``V x h`` embedding, not 4 P; the start of backward is unchanged, and the end of forward (autocast's
    cache holds a bf16 copy of every weight, each block its input, the loss its 10 B a logit) becomes
    the peak. FSDP2: the largest unit's shard (the root's rest)."""
    full = CheckpointingConfig(name="full")
    cfg = _cfg(activation_checkpointing=full)
    cfg.optim.grad_clip, cfg.optim.in_backward = 0.0, True
    base_cfg = _cfg(activation_checkpointing=full)
    base_cfg.batch.micro_batch_size = cfg.batch.micro_batch_size = 1
    base, fused = estimate(base_cfg, Layout()), estimate(cfg, Layout())
    assert base.step_states - fused.step_states == 4 * P - 4 * V * H  # 4.90 GiB - 0.38 GiB
    assert fused.step_states == 12 * P + 4 * V * H and "largest parameter" in fused.method
    assert fused.backward_start == base.backward_start
    # the usual step peaks at the end of backward: 16 P and the lowest block's backward (its
    # activations, one sequence, and its bf16 gradients, less its fp32 gradients not made yet)
    layer = 2 * H * 4 + 14 * H * 2 + 4 * NH
    assert base.lowest_block == S * layer + 2 * BLOCK - 4 * BLOCK
    assert base.total == base.end_of_backward == 16 * P + base.lowest_block
    assert fused.backward_start == 12 * P + fused.activations + fused.logits
    assert fused.total == fused.forward_end == 14 * P + L * S * 4 * H + 10 * S * V > fused.backward_start
    assert base.total - fused.total == 2 * P + base.lowest_block - L * S * 4 * H - 10 * S * V
    assert (base.total - fused.total) / GIB == pytest.approx(1.16, abs=0.01)
    fsdp = _cfg(FSDPConfig(), activation_checkpointing=full)
    fsdp.optim.grad_clip, fsdp.optim.in_backward = 0.0, True
    sharded = estimate(fsdp, Layout(dp_shard=8))
    assert sharded.step_states == 12 * P // 8 + 4 * max(BLOCK, REST) // 8 and REST > BLOCK


def test_gradient_accumulation_keeps_the_gradients_at_the_start_of_backward() -> None:
    cfg = _cfg()
    cfg.batch.grad_accum = 4
    assert estimate(cfg, Layout()).model_states == 18 * P
    # FSDP2 without gradient sync keeps unsharded fp32 gradients (reduce_dtype): 4 P, not 4 P / W
    fsdp = _cfg(FSDPConfig())
    fsdp.batch.grad_accum = 4
    assert estimate(fsdp, Layout(dp_shard=4)).model_states == 12 * P // 4 + 4 * P + GATHERED


def test_fsdp_keeps_the_root_and_two_blocks_gathered_and_reduce_scatters_in_fp32() -> None:
    """The start of backward: the root's group (not resharded after forward) and two blocks in
    bf16. The end of backward: the root's fp32 reduce-scatter input (4 R) and, while its bf16
    gradients are copied in, those (2 R) less its own shard (4 R / W); a block's moment
    (10 B - 4 B / W) is smaller at gpt-1.3b's 50304 x 2048 embedding."""
    full = CheckpointingConfig(name="full")
    for w in (1, 2, 8):
        est = estimate(_cfg(FSDPConfig(), activation_checkpointing=full), Layout(dp_shard=w))
        assert fsdp_gathered_bytes(_cfg(FSDPConfig()), Layout(dp_shard=w)) == GATHERED
        root, block = 4 * REST + max(0, 2 * REST - 4 * REST / w), 10 * BLOCK - 4 * BLOCK / w
        assert root > block and est.reduce_buffers == int(root)
        # the lowest block's backward: its activations (8 sequences) and gradients, the block
        # above's reduce-scatter input, the root's weights and the head's (tied) gradient
        layer = 2 * H * 2 + 14 * H * 2 + 4 * NH
        lowest = TOKENS * layer + 2 * 2 * BLOCK + 4 * BLOCK + 2 * (REST + V * H) - 4 * (BLOCK + REST) // w
        assert est.lowest_block == lowest
        assert est.end_of_backward == 16 * P // w + max(int(root), lowest)
    # a small vocabulary: the block's moment is the larger
    small = dataclasses.replace(_cfg(FSDPConfig()), model=dataclasses.replace(GPT_13B, vocab_size=1024))
    rest = 1024 * H + S * H + 2 * H
    assert fsdp_reduce_bytes(small, Layout(dp_shard=2)) == int(max(4 * rest + 2 * rest - 2 * rest, 8 * BLOCK))
    assert fsdp_gathered_bytes(_cfg(), Layout()) == fsdp_reduce_bytes(_cfg(), Layout()) == 0  # not FSDP


def test_llama_8b_on_one_gpu_peaks_at_the_roots_reduce_scatter() -> None:
    """Llama 3.1 8B, bf16, compiled, micro batch 2 (benchmarks/results/h200/policies/llama3.1-8b):
    16 P + 4 R with R the embedding, output head and final norm: 123.57 GiB against 123.64 measured
    with FSDP2 (119.66 without the reduce-scatter input); single: 119.74 against 119.85."""
    m = _llama("llama3.1-8b")
    p, block = family(m).n_params(m), block_params(m)
    root = p - m.n_layer * block
    assert root == 2 * m.vocab_size * m.n_embd + m.n_embd
    for name in ("none", "selective", "full"):
        cfg = dataclasses.replace(
            RunConfig(), model=m, backend=FSDPConfig(), compile=True,
            activation_checkpointing=CheckpointingConfig(name=name),
        )  # fmt: skip
        cfg.batch.micro_batch_size = 2
        est = estimate(cfg, Layout())
        assert est.total == est.end_of_backward == 16 * p + 4 * root
        assert est.total_gib == pytest.approx(123.57, abs=0.01)
    # single: 16 P and the lowest block's backward (its activations, less its gradients' 2 B)
    single = estimate(dataclasses.replace(cfg, backend=BackendConfig(name="single")), Layout())
    assert single.total == 16 * p + single.lowest_block
    assert single.total_gib == pytest.approx(119.82, abs=0.01)


def test_every_n_lies_between_full_and_none_on_llama_tiny() -> None:
    """llama-tiny's two blocks with every_n (every 2: the top block checkpointed): its estimate is
    at most none's (it was above it by a block input and the autocast copies of every block)."""
    totals = {}
    for name, ac in (
        ("none", CheckpointingConfig(name="none")),
        ("full", CheckpointingConfig(name="full")),
        ("every_n", EveryNConfig(every=2)),
        ("every_1", EveryNConfig(every=1)),
    ):
        cfg = dataclasses.replace(RunConfig(), model=LlamaConfig(), activation_checkpointing=ac)
        totals[name] = estimate(cfg, Layout()).total
    assert totals["full"] < totals["every_n"] < totals["none"]
    assert totals["every_1"] == totals["full"]
    # the autocast copies of the checkpointed block are not kept: half of P_r
    every = dataclasses.replace(
        RunConfig(), model=LlamaConfig(), activation_checkpointing=EveryNConfig(every=2)
    )
    none = dataclasses.replace(every, activation_checkpointing=CheckpointingConfig(name="none"))
    p = family(LlamaConfig()).n_params(LlamaConfig())
    assert estimate(none, Layout()).model_states - estimate(every, Layout()).model_states == 2 * p - p


def test_deepspeed_model_to_params_counts_what_the_families_say() -> None:
    """DeepSpeed's ``estimate_zero3_model_states_mem_needs_all_live`` reads ``(total, largest layer)``
    from a built model (``model_to_params``); the estimate takes them from the family without
    building one: the same numbers for gpt and llama (tied and untied, a vocabulary smaller than
    the MLP)."""
    import contextlib
    import io

    from flopsweep.backends import make_model

    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed logs its accelerator
        from deepspeed.runtime.zero.stage3 import model_to_params

    for m in (
        RunConfig().model,
        LlamaConfig(),
        LlamaConfig(tie_embeddings=False),
        LlamaConfig(vocab_size=64),
    ):
        fam = family(m)
        built = make_model(dataclasses.replace(RunConfig(), model=m), None)
        assert model_to_params(built) == (fam.n_params(m), fam.memory(m)["largest_layer_params"]), m


def test_deepspeed_estimators_less_the_gradients_not_yet_made() -> None:
    largest = V * H
    zero2 = estimate(_cfg(DeepSpeedConfig(zero_stage=2)), Layout(dp_shard=4))
    estimator = 2 * P + int(18 * P / 4)
    assert zero2.model_states == estimator - 6 * P // 4 and "estimate_zero2" in zero2.method
    assert zero2.step_states == estimator + 2 * P // 4  # the step's flat bf16 gradient partition
    zero3 = estimate(_cfg(DeepSpeedConfig(zero_stage=3)), Layout(dp_shard=4))
    bucket_and_persistent = 2 * CUDA_BUCKET + 2 * ZERO3_SMALL  # zero3_buffer_bytes
    start = 4 * largest + int(18 * P / 4) - 2 * P // 4 + bucket_and_persistent + 2 * 10**9  # retained
    assert zero3.model_states == start and "estimate_zero3" in zero3.method
    # the step: 16 P / W and one sub-group of P / 4 elements (under 1e9), bf16 and fp32 gradients 6 S
    assert zero3.step_states == 16 * P // 4 + 6 * P // 4 + bucket_and_persistent


def _zero3(precision: str = "bf16", world: int = 2, **knobs):
    cfg = _cfg(DeepSpeedConfig(zero_stage=3, **knobs), precision=PrecisionConfig(name=precision))
    return zero3_buffer_bytes(cfg, Layout(dp_shard=world))


def test_zero3_knobs_size_its_buffers_as_deepspeed_allocates_them() -> None:
    """gpt-1.3b on two GPUs, bf16, at flopsweep's CUDA defaults (buckets 5e8, persistence 10 h) and
    DeepSpeed's (max_live and max_reuse 1e9), then one knob at a time: the amounts
    ``zero3_buffer_bytes`` documents, in bytes."""
    base = _zero3()
    assert (base.reduce_bucket, base.persistent, base.retained) == (
        2 * CUDA_BUCKET,
        2 * ZERO3_SMALL,
        2 * 10**9,
    )
    assert base.backward_start == ZERO3_EXTRA and base.step == ZERO3_EXTRA - 2 * 10**9
    # the reduce bucket: reduce_bucket_size bf16 elements; the prefetch bucket sizes no buffer
    bigger = _zero3(reduce_bucket_size=10**9, stage3_prefetch_bucket_size=10**9)
    assert bigger.backward_start - base.backward_start == 2 * (10**9 - CUDA_BUCKET)
    # persistence 2e7: every tensor but the V x h embedding stays gathered; forward keeps that too
    persist = _zero3(stage3_param_persistence_threshold=2 * 10**7)
    assert (persist.persistent, persist.retained) == (2 * (P - V * H), 2 * V * H)
    # max_live and max_reuse 3e9: every parameter is kept for backward, as with persistence
    live = _zero3(stage3_max_live_parameters=3 * 10**9, stage3_max_reuse_distance=3 * 10**9)
    assert live.persistent + live.retained == persist.persistent + persist.retained == 2 * P
    # the reuse distance counts the layers above twice (forward, then backward): half of it
    assert _zero3(stage3_max_reuse_distance=24 * 10**8).retained == 2 * 12 * 10**8
    # no prefetch bucket, no prefetcher: only the reuse distance keeps parameters
    assert _zero3(stage3_prefetch_bucket_size=0).retained == 2 * 5 * 10**8
    # ZeRO-3 has one reduce bucket with or without overlap_comm
    assert _zero3(overlap_comm=False).backward_start == base.backward_start
    # one rank: a gathered parameter is a view of the rank's own partition; the bucket stays
    one = _zero3(world=1)
    assert (one.reduce_bucket, one.persistent, one.retained) == (2 * CUDA_BUCKET, 0, 0)
    # fp32: 4 bytes per element
    assert _zero3("fp32").backward_start == 2 * base.backward_start


def test_zero3_buffers_move_the_estimate_by_what_they_add() -> None:
    """The estimate's ZeRO-3 model states are DeepSpeed's estimator's plus :func:`zero3_buffer_bytes`:
    a larger reduce bucket raises the peak by exactly its bytes, persistence by the parameters it
    adds to those gathered."""
    base = estimate(_cfg(DeepSpeedConfig(zero_stage=3)), Layout(dp_shard=2))
    assert base.model_states == 4 * V * H + int(18 * P / 2) - 2 * P // 2 + ZERO3_EXTRA
    assert "reduce bucket 500,000,000" in base.method
    bucket = estimate(_cfg(DeepSpeedConfig(zero_stage=3, reduce_bucket_size=10**9)), Layout(dp_shard=2))
    assert bucket.total - base.total == 2 * (10**9 - CUDA_BUCKET)
    persist = DeepSpeedConfig(zero_stage=3, stage3_param_persistence_threshold=2 * 10**7)
    gathered = estimate(_cfg(persist), Layout(dp_shard=2)).total - base.total
    assert gathered == 2 * P - 2 * (ZERO3_SMALL + 10**9)


def test_deepspeed_offload_uses_the_estimators_offload_arguments() -> None:
    # plus ZeRO-3's buffers (zero3_buffer_bytes): the retained parameters only before backward
    opt = estimate(_cfg(OffloadZero(zero_stage=3)), Layout(dp_shard=2))
    assert opt.model_states == 4 * V * H + int(2 * P / 2) + ZERO3_EXTRA
    assert opt.step_states == opt.model_states - 2 * 10**9
    assert "cpu_offload=True, cpu_offload_params=False" in opt.method
    both = estimate(_cfg(OffloadZero(zero_stage=3, offload_param="nvme")), Layout(dp_shard=2))
    assert both.model_states == 4 * V * H + ZERO3_EXTRA and "cpu_offload_params=True" in both.method
    zero2 = estimate(_cfg(OffloadZero(zero_stage=2)), Layout(dp_shard=2))
    assert zero2.model_states == zero2.step_states == 2 * P
    # parameters alone: the estimator knows no such case; counted as no offload, and said so
    params = estimate(
        _cfg(OffloadZero(zero_stage=3, offload_optimizer="none", offload_param="cpu")), Layout(dp_shard=2)
    )
    plain = estimate(_cfg(OffloadZero(zero_stage=3, offload_optimizer="none")), Layout(dp_shard=2))
    assert (
        params.model_states == plain.model_states
        and "counted as no offload (an upper bound)" in params.method
    )
    assert "an upper bound" not in plain.method
    # one GPU, ZeRO-3 with offload_optimizer=cpu: the GPU keeps the bf16 parameters (2 P) and the
    # 5e8-element reduce bucket beside the activations (the gathered parameters, the estimator's
    # 4 x largest layer among them, are views of its own partition); the host the fp32 master weights,
    # gradients and AdamW moments (16 P)
    one = estimate(_cfg(OffloadZero(zero_stage=3)), Layout())
    assert one.model_states == 2 * P + 2 * CUDA_BUCKET
    assert one.lowest_block == one.reduce_buffers == 0
    assert one.total == one.backward_start == one.model_states + one.activations + one.logits
    assert offload_host_bytes(_cfg(OffloadZero(zero_stage=3)), Layout()) == 16 * P


def test_fsdp_cpu_offload_keeps_only_the_blocks_in_flight() -> None:
    """The GPU: two all-gathered blocks and the root's group as bf16 weights, and at the end of
    backward the root's bf16 gradients and fp32 reduce-scatter input and output (the shards go to
    the host); the host: 16 P / W."""
    est = estimate(_cfg(OffloadFSDP()), Layout(dp_shard=2))
    assert est.model_states == GATHERED and est.step_states == 0
    assert est.reduce_buffers == max(2 * REST + 4 * REST, 4 * REST + 2 * REST) == 6 * REST
    assert "CPUOffloadPolicy" in est.method
    assert offload_host_bytes(_cfg(OffloadFSDP()), Layout(dp_shard=2)) == 16 * P // 2


def test_compile_keeps_the_compiled_shapes_and_fewer_logit_bytes() -> None:
    """gpt-1.3b compiled on one GPU: a block keeps its fp32 input and 15h bf16 elements a token (the
    compiled block's backward inputs, counted on the CPU) and the logsumexp; the loss's backward holds
    the bf16 logits (their gradient written in place) and, beside them, the head's fp32 gradient."""
    est = estimate(_cfg(compile=True), Layout())
    assert est.activations == TOKENS * L * (1 * H * 4 + 15 * H * 2 + 4 * NH)
    assert est.logits == 2 * TOKENS * V
    assert est.head_gradient == est.head_gradient_at_loss == 4 * V * H
    assert est.backward_start == est.model_states + est.activations + est.logits + est.head_gradient


@pytest.mark.parametrize("kernel, kept", [("standard", 6), ("sdpa-math", 4)])
def test_a_kernel_that_materialises_the_scores_keeps_them(kernel: str, kept: int) -> None:
    """B x h x s x s scores per layer: their bytes per token are h x s x the kept bytes; under
    ``full`` checkpointing the recomputed layer's scores (13 B each, the kept ones included) on top."""
    est = estimate(_cfg(attention=AttentionConfig(name=kernel)), Layout())
    assert est.activations == TOKENS * L * (2 * H * 4 + 14 * H * 2 + kept * NH * S)
    assert est.attention_workspace == 0
    assert est.total_gib == pytest.approx({"standard": 125.4, "sdpa-math": 101.4}[kernel], abs=0.1)
    full = CheckpointingConfig(name="full")
    ckpt = estimate(_cfg(attention=AttentionConfig(name=kernel), activation_checkpointing=full), Layout())
    assert ckpt.attention_workspace == (13 - kept) * MB * NH * S * S


def test_full_checkpointing_keeps_block_inputs_and_drops_the_autocast_copies() -> None:
    est = estimate(_cfg(activation_checkpointing=CheckpointingConfig(name="full")), Layout())
    layer = 2 * H * 4 + 14 * H * 2 + 4 * NH
    assert est.activations == TOKENS * ((L - 1) * H * 4 + layer)  # the rebuilt top block keeps its input
    assert est.model_states == 12 * P
    # selective's per-operator checkpoint recomputes the casts too: no copies either
    selective = estimate(_cfg(activation_checkpointing=CheckpointingConfig(name="selective")), Layout())
    assert selective.model_states == 12 * P


def test_tensor_parallel_divides_states_activations_and_logits() -> None:
    one = estimate(_cfg(FSDPConfig()), Layout(dp_shard=2))
    tp = estimate(_cfg(FSDPConfig()), Layout(dp_shard=2, tp=2))
    assert tp.model_states == 12 * math.ceil(P / 2) // 2 + 2 * (
        math.ceil(REST / 2) + 2 * math.ceil(BLOCK / 2)
    )
    assert tp.activations == one.activations // 2 and tp.logits == one.logits // 2


@pytest.mark.parametrize("schedule, in_flight", [("1F1B", 2), ("GPipe", 4)])
def test_the_first_pipeline_stage_keeps_the_in_flight_micro_batches(schedule: str, in_flight: int) -> None:
    """pp=2, 4 pipeline micro-batches of 2 sequences: 1F1B keeps up to pp of them, GPipe all; the
    first stage holds 12 of the 24 blocks and the tied embedding (the last stage keeps its copy)."""
    cfg = _cfg(FSDPConfig())
    cfg.parallel.pp_schedule, cfg.parallel.pp_microbatches = schedule, 4
    layout = Layout(dp_shard=2, pp=2)
    assert in_flight_microbatches(cfg, layout) == (in_flight, 2)
    assert stage_params(cfg, layout) == 12 * BLOCK + REST
    est = estimate(cfg, layout)
    layer = 2 * H * 2 + 14 * H * 2 + 4 * NH
    first = 2 * S * in_flight * 12 * layer
    last = 2 * S * 12 * layer + 12 * 2 * S * V
    assert est.activations + est.logits == max(first, last)
    assert est.model_states == 12 * (12 * BLOCK + REST) // 2 + GATHERED


def test_an_untied_pipeline_head_splits_the_rest_between_the_ends() -> None:
    llama = LlamaConfig(
        name="llama-test", n_layer=4, n_embd=256, n_head=4, n_kv_head=2, ffn_dim=512, seq_len=64,
        vocab_size=1000, tie_embeddings=False,
    )  # fmt: skip
    cfg = dataclasses.replace(_cfg(FSDPConfig()), model=llama)
    total = cfg.model.n_layer * block_params(llama)
    from flopsweep.models import family

    rest = family(llama).n_params(llama) - total
    assert stage_params(cfg, Layout(pp=2)) == 2 * block_params(llama) + math.ceil(rest / 2)


@pytest.mark.parametrize(
    "gpu, memory, gib, label",
    [
        ("H100-80GB", None, 79.6, "H100 SXM (79.6 GiB)"),  # nominal GB, not GiB: as plan_gpu=H100
        ("H100", None, 79.6, "H100 SXM (79.6 GiB)"),
        ("NVIDIA H100 80GB HBM3", None, 79.6, "H100 SXM (79.6 GiB)"),
        ("H100-NVL-94GB", None, 93.6, "H100 NVL (93.6 GiB)"),
        ("A100-40GB", None, 40, "A100 40 GB (40 GiB)"),
        ("NVIDIA A100-SXM4-80GB", None, 80, "A100 80 GB (80 GiB)"),
        ("Tesla V100-SXM2-32GB", None, 31.7, "V100 SXM2 32 GB (31.7 GiB)"),
        ("H200", None, 140.4, "H200 SXM (140.4 GiB)"),
        ("H200-141GB", None, 140.4, "H200 SXM (140.4 GiB)"),
        ("NVIDIA GH200 480GB", None, 94.5, "GH200 (94.5 GiB)"),  # the superchip's name, as torch gives it
        (None, 24, 24, "24 GiB"),
        (None, 80, 80, "80 GiB"),  # a bare memory stays as given
        ("H100", 94, 94, "H100 (94 GiB)"),
    ],
)
def test_plan_for_a_gpu_by_name_or_memory(gpu, memory, gib, label) -> None:
    """A name in the peak table plans for the memory the driver reports (:data:`GPU_MEMORY_GIB`):
    ``plan_gpu=H100`` and ``plan_gpu=H100-80GB`` planned 79.6 and 80 GiB (a trial), since the size in
    the name was read as GiB where vendors give nominal GB; a size picks one of the sizes a device is
    sold in. ``plan_gpu_memory_gib`` stays as given."""
    assert planned_gpu_bytes(gpu, memory) == (int(gib * GIB), label)


def test_every_gpu_of_the_peak_table_has_its_memory() -> None:
    """Each GPU row carries its memory (one row per GPU: adding one is one edit)."""
    from flopsweep.peaks import PEAK_TABLE

    for row in PEAK_TABLE:  # the driver's memory is a little below the name's
        sizes = row.memory_gib
        assert sizes, row.name
        assert all(0.9 * gb < gib <= gb for gb, gib in sizes.items() if gb != 480), (row.name, sizes)


@pytest.mark.parametrize(
    "gpu, memory, words",
    [
        (
            "A100",
            None,
            "A100 comes in more than one memory size (40 GB (40 GiB) or 80 GB (80 GiB)). Fix: name the size, "
            "e.g. plan_gpu=A100-80GB",
        ),
        ("H1000", None, "plan_gpu='H1000': is no device of the peak table (H100, H100-80GB, H100-PCIe"),
        ("80", None, "Fix: use one of those, or plan_gpu_memory_gib=80 for a memory size in GiB"),
        ("80GB", None, "or plan_gpu_memory_gib=80 for a memory size in GiB"),
        (
            "H100-94GB",
            None,
            "plan_gpu='H100-94GB': names 94 GB; the H100 SXM has 80 GB (79.6 GiB). Fix: drop the size "
            "(plan_gpu=H100-SXM), plan_gpu=H100-NVL (94 GB), or set plan_gpu_memory_gib=",
        ),
        ("A100-48GB", None, "names 48 GB; the A100 is sold with 40 GB (40 GiB) or 80 GB (80 GiB). Fix: "),
        ("V100-SXM2", None, "e.g. plan_gpu=V100-SXM2-32GB"),  # a name the peak table knows
        (None, 0, "plan_gpu_memory_gib=0: must be a positive number of GiB"),
        (None, float("nan"), "plan_gpu_memory_gib=nan: must be a positive number of GiB"),  # was a traceback
        (None, float("inf"), "plan_gpu_memory_gib=inf: must be a positive number of GiB"),
        ("H100", 1e300, "at most 1048576. Fix: set e.g. plan_gpu_memory_gib=80"),
    ],
)
def test_a_gpu_plan_cannot_plan_for_is_refused_in_one_line(gpu, memory, words) -> None:
    with pytest.raises(ConfigError) as exc:
        planned_gpu_bytes(gpu, memory)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    assert planned_gpu_bytes(None, None) is None


def test_plan_says_whether_llama_8b_fits_an_h100_from_a_machine_without_one(tmp_path: Path) -> None:
    """``plan=true plan_gpu=H100-80GB`` on this CPU machine: the job is placed as on a GPU, and
    ``fits`` compares the estimate with the H100's 79.6 GiB: Llama 3.1 8B on one GPU needs 14 P =
    105 GiB of weights, AdamW moments and autocast copies before any activation, so it does not
    fit; on 8 FSDP2 ranks it does."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.models.llama import LlamaConfig as Llama8B

    llama = Llama8B(
        name="llama3.1-8b", n_layer=32, n_embd=4096, n_head=32, n_kv_head=8, ffn_dim=14336,
        seq_len=2048, vocab_size=128256, tie_embeddings=False,
    )  # fmt: skip
    base = dataclasses.replace(RunConfig(), model=llama, plan=True, plan_gpu="H100-80GB")
    base.batch.micro_batch_size = 1
    for job in ("one", "eight"):
        (tmp_path / job).mkdir()
    one = plan_job(base, JobInfo(job_dir=tmp_path / "one", overrides=["plan_gpu=H100-80GB"]))["plan"]
    assert (one["status"], one["fits"], one["fits_on"]) == ("ok", False, "H100 SXM (79.6 GiB)")
    assert float(one["est_peak_gib_per_rank"]) > 14 * 8_030_261_248 / GIB
    eight = dataclasses.replace(base, backend=FSDPConfig(), nproc_per_node="8")
    row = plan_job(eight, JobInfo(job_dir=tmp_path / "eight", overrides=[]))["plan"]
    assert (row["status"], row["fits"]) == ("ok", True), row["note"]
    header = (tmp_path / "eight" / "plan.csv").read_text().splitlines()[0].split(",")
    assert header[header.index("fits") + 1] == "fits_on"


def test_the_analysis_shows_the_memory_error_in_every_format(tmp_path: Path, capsys) -> None:
    """A record with ``metrics.predicted_peak_gib`` gets ``peak_memory_error`` = (predicted -
    measured) / measured; a CPU record (no measured peak) leaves it blank, and a table of CPU
    records only does not show it."""
    from analysis.__main__ import main
    from analysis.load import load

    fixture = Path(__file__).parents[1] / "fixtures" / "records" / "v2-ok" / "metrics.json"
    rec = json.loads(fixture.read_text())
    gpu = json.loads(json.dumps(rec))
    gpu["run"]["id"] = "run-gpu"
    gpu["metrics"].update(predicted_peak_gib=55.0, peak_cuda_allocated_bytes=50 * GIB)
    cpu = json.loads(json.dumps(rec))
    cpu["run"]["id"] = "run-cpu"
    cpu["metrics"].update(predicted_peak_gib=0.5, peak_cuda_allocated_bytes=None)
    for name, r in (("gpu", gpu), ("cpu", cpu)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(r))
    df = load(tmp_path).set_index("run_id")
    assert df.loc["run-gpu", "peak_memory_error"] == pytest.approx(0.1)
    assert math.isnan(df.loc["run-cpu", "peak_memory_error"])
    assert df.loc["run-cpu", "predicted_peak_gib"] == 0.5
    for fmt, shown in (("markdown", "10.0%"), ("csv", "0.1"), ("html", "10.0%"), ("json", "0.1")):
        assert main([str(tmp_path), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "mem_err" in out or "peak_memory_error" in out, fmt
        assert shown in out, fmt
    assert main([str(tmp_path / "cpu"), "--format", "markdown"]) == 0
    assert "mem_err" not in capsys.readouterr().out
