"""ZeRO's optimizer step in the memory estimate (``flopsweep.zero_memory``): ZeRO-3's sub-groups as DeepSpeed
0.19.8 cuts them, the fp32 gradients and temporaries of the largest one, ``16 P / W`` through the step, no
largest-layer copy on one rank, and ZeRO-1/2's flattened gradient partition beside its fp32 copy. Every
figure is a hand count of gpt-tiny's or gpt-1.3b's tensors."""

from __future__ import annotations

import dataclasses

from flopsweep.backends import CUDA_BUCKET, DeepSpeedConfig
from flopsweep.config import PrecisionConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import estimate
from flopsweep.models import family
from flopsweep.zero_memory import zero3_step_bytes, zero3_sub_groups

TINY_P = 65536 + 16384 + 2 * (12 * 128 * 128 + 13 * 128) + 2 * 128
"""gpt-tiny (h 128, 2 blocks, V 512, s 128): wte, wpe, two blocks of ``12 h^2 + 13 h``, ln_f: 478,720."""

SUB_GROUPS = [131_328, 148_736, 132_224, 66_432]
"""gpt-tiny's tensors in ``named_parameters`` order cut at 100,000 elements: wte and wpe (81,920), block 0's
ln_1 and c_attn (to 131,328); its c_attn bias, c_proj, ln_2, c_fc and c_fc bias (17,152 + 65,536 + 512),
then c_proj's weight (148,736); its c_proj bias, block 1 to its c_fc weight (132,224); the rest (66,432)."""


def _tiny(device: str = "cuda", precision: str = "bf16", **knobs) -> RunConfig:
    backend = DeepSpeedConfig(**{"zero_stage": 3, "sub_group_size": 100_000, **knobs})
    precision_cfg = PrecisionConfig(name=precision)
    return dataclasses.replace(RunConfig(), backend=backend, device=device, precision=precision_cfg)


def test_zero3_sub_groups_are_cut_as_deepspeed_cuts_them() -> None:
    cfg = _tiny()
    assert family(cfg.model).n_params(cfg.model) == TINY_P == sum(SUB_GROUPS)
    assert zero3_sub_groups(cfg, Layout()) == SUB_GROUPS
    # DeepSpeed's own default (1e9) covers the whole group: one sub-group of the rank's partitions
    whole = dataclasses.replace(cfg, backend=DeepSpeedConfig(zero_stage=3))
    assert zero3_sub_groups(whole, Layout(dp_shard=2)) == [TINY_P // 2]


def test_zero3_step_holds_the_largest_sub_groups_gradients_and_adamw_temporaries() -> None:
    """bf16 with FusedAdam: the flattened bf16 gradients beside their fp32 copy, ``6 S``; torch's AdamW
    (``optimizer_impl=torch``): the fp32 gradients and foreach's ``sqrt(v)``, ``8 S`` (on the CPU the
    for-loop's two temporaries, ``12 S``); fp32: the flat fp32 gradients are the copy, ``4 S``."""
    s = max(SUB_GROUPS)
    assert zero3_step_bytes(_tiny(), Layout()).bytes == 6 * s == 892_416
    assert zero3_step_bytes(_tiny(optimizer_impl="torch"), Layout()).bytes == 8 * s
    # the CPU: torch's for-loop AdamW (no foreach kernels there), v.sqrt() and its quotient at once
    assert zero3_step_bytes(_tiny(device="cpu"), Layout()).bytes == 12 * s
    assert zero3_step_bytes(_tiny(precision="fp32"), Layout()).bytes == 4 * s
    # sub-groups of one tensor each (sub_group_size 1): flattening one tensor is a view of it, so bf16 keeps
    # only the fp32 copy of the largest (wte, 65,536), fp32 nothing new but the AdamW
    # temporaries (foreach on CUDA, the for-loop's two on the CPU)
    one = 65536
    assert zero3_step_bytes(_tiny(sub_group_size=1), Layout()).bytes == 4 * one
    assert zero3_step_bytes(_tiny(sub_group_size=1, optimizer_impl="torch"), Layout()).bytes == 8 * one
    assert zero3_step_bytes(_tiny(sub_group_size=1, precision="fp32"), Layout()).bytes == 0
    on_cpu = _tiny(sub_group_size=1, precision="fp32", device="cpu")
    assert zero3_step_bytes(on_cpu, Layout()).bytes == 8 * one


def test_zero3_on_one_rank_steps_with_16_bytes_and_no_largest_layer_copy() -> None:
    """One rank, bf16, CUDA: at the start of backward the estimator's 18 P less the 2 P of fp32
    gradients' share not made yet, and the reduce bucket (the largest layer's gathered copy is a view of
    the rank's own partition); at the step 16 P, the largest sub-group's 6 S and the bucket."""
    est = estimate(_tiny(), Layout())
    bucket = 2 * CUDA_BUCKET
    assert est.model_states == 16 * TINY_P + bucket
    assert est.step_states == 16 * TINY_P + 6 * max(SUB_GROUPS) + bucket
    assert "16 P / W" in est.method and "FusedAdam" in est.method
    # two ranks: the estimator's 4 x largest layer (a c_fc with its bias, 66,048: the gathered copy and its
    # gradient) stays,
    # and every parameter is gathered (13 h a block and ln_f persistent, the rest retained: 2 P)
    two = estimate(dataclasses.replace(_tiny(), backend=DeepSpeedConfig(zero_stage=3)), Layout(dp_shard=2))
    persistent = 2 * 13 * 128 + 2 * 128
    assert two.model_states == 4 * 66048 + 18 * TINY_P // 2 - 2 * TINY_P // 2 + bucket + 2 * TINY_P
    # at the step DeepSpeed's 1e9 covers all: one sub-group of P / 2 elements (6 S = 3 P), and the
    # persistent parameters
    assert two.step_states == 16 * TINY_P // 2 + 3 * TINY_P + bucket + 2 * persistent


def test_zero2_step_adds_the_flattened_gradient_partition() -> None:
    """ZeRO-1 and -2, bf16: ``self.flatten(averaged_gradients).to(fp32)`` holds the flat bf16 partition
    beside the fp32 copy the estimator counts, ``2 P / W`` more at the step; fp32 and offload add none."""
    for stage in (1, 2):
        cfg = dataclasses.replace(_tiny(), backend=DeepSpeedConfig(zero_stage=stage))
        est = estimate(cfg, Layout(dp_shard=4))
        assert est.step_states == 2 * TINY_P + 18 * TINY_P // 4 + 2 * TINY_P // 4
        assert est.model_states == 2 * TINY_P + 18 * TINY_P // 4 - 6 * TINY_P // 4
    fp32 = dataclasses.replace(_tiny(precision="fp32"), backend=DeepSpeedConfig(zero_stage=2))
    assert estimate(fp32, Layout(dp_shard=4)).step_states == 2 * TINY_P + 18 * TINY_P // 4
    off = dataclasses.replace(_tiny(), backend=DeepSpeedConfig(zero_stage=2, offload_optimizer="cpu"))
    assert estimate(off, Layout(dp_shard=4)).step_states == 2 * TINY_P
