"""FLOPs, parameter count and peak table of flopsweep.flops (DESIGN.md, "FLOPs")."""

from __future__ import annotations

import math

import pytest

from flopsweep.flops import flops_per_iteration, n_params, peak_tflops, tflops_per_device


def test_published_deepspeed_run_124_45_tflops():
    # hidden 2304, 24 layers, seq 2048, vocab 65, 36 seqs/GPU x 8 GPUs, checkpointing, 8.32 s/iter
    world, per_gpu = 8, 36
    f = flops_per_iteration(24, 2304, 2048, 65, per_gpu * world, activation_checkpointing=True)
    assert tflops_per_device(f, 8.32, world) == pytest.approx(124.45, abs=0.05)


def test_published_run_without_checkpointing_factor_is_lower():
    # The published figure needs f = 4; with f = 3 it would be 3/4 of it (~93.3).
    f = flops_per_iteration(24, 2304, 2048, 65, 288, activation_checkpointing=False)
    assert tflops_per_device(f, 8.32, 8) == pytest.approx(124.45 * 3 / 4, abs=0.05)


def test_n_params_gpt_1_3b():
    n = n_params(24, 2048, 2048, 50304)
    assert n == 1_315_819_520
    assert isinstance(n, int)


def test_n_params_formula_small():
    # N = l (12 h^2 + 13 h) + V h + s h + 2 h, with hand-computed values
    assert n_params(1, 4, 3, 5) == 1 * (12 * 16 + 13 * 4) + 5 * 4 + 3 * 4 + 2 * 4  # 284
    assert n_params(1, 4, 3, 5) == 284
    assert n_params(0, 8, 10, 7) == 7 * 8 + 10 * 8 + 16


def test_small_model_tflops_and_not_parenthesis_bug():
    # l=6, h=512, V=50304, s=2048, global batch 32 over 8 ranks, no AC, 0.020 s/iter
    f = flops_per_iteration(6, 512, 2048, 50304, 32, activation_checkpointing=False)
    t = tflops_per_device(f, 0.020, 8)
    assert t == pytest.approx(124.78, abs=0.01)
    # ~77.3 is what a misplaced parenthesis in the V / (16 l h) term gives.
    assert abs(t - 77.3) > 1.0


def test_flops_formula_value_exact():
    # F = 24 f B s l h^2 (1 + s/(6h) + V/(16 l h)) with simple numbers:
    # l=1, h=6, s=6, V=96, B=1, f=3: 24*3*1*6*1*36 * (1 + 6/36 + 96/96) = 15552 * 13/6
    assert flops_per_iteration(1, 6, 6, 96, 1) == pytest.approx(15552 * 13 / 6, rel=1e-12)


def test_doubling_global_batch_at_double_time_keeps_tflops():
    args = (24, 2048, 2048, 50304)
    world = 8
    b1 = 4 * 1 * world  # micro 4, grad_accum 1
    b2 = 4 * 2 * world  # grad_accum 2
    f1 = flops_per_iteration(*args, b1)
    f2 = flops_per_iteration(*args, b2)
    assert f2 == pytest.approx(2 * f1, rel=1e-12)
    t1 = tflops_per_device(f1, 0.5, world)
    t2 = tflops_per_device(f2, 1.0, world)
    assert t2 == pytest.approx(t1, rel=1e-12)
    # and at the same time, twice the batch is twice the throughput
    assert tflops_per_device(f2, 0.5, world) == pytest.approx(2 * t1, rel=1e-12)


@pytest.mark.parametrize(
    "shape", [(24, 2304, 2048, 65, 288), (2, 128, 128, 512, 4), (6, 512, 2048, 50304, 32)]
)
def test_checkpointing_factor_is_four_thirds(shape):
    with_ac = flops_per_iteration(*shape, activation_checkpointing=True)
    without = flops_per_iteration(*shape, activation_checkpointing=False)
    assert with_ac == pytest.approx(without * 4 / 3, rel=1e-12)


def test_tflops_per_device_divides_by_world_and_1e12():
    assert tflops_per_device(8e12, 1.0, 8) == pytest.approx(1.0)
    assert tflops_per_device(3e12, 0.5, 2) == pytest.approx(3.0)


def test_peak_h200_bf16():
    peak, source = peak_tflops("NVIDIA H200", "bf16")
    assert peak == 989.4
    assert isinstance(source, str) and source


def test_peak_a100_bf16_dense_not_sparse():
    peak, source = peak_tflops("NVIDIA A100-SXM4-80GB", "bf16")
    assert peak == 312.0
    assert isinstance(source, str) and source


def test_peak_h100_sxm_bf16_dense():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16")[0] == 989.4


def test_peak_cpu_is_unknown():
    peak, source = peak_tflops("cpu", "bf16")
    assert peak is None
    assert isinstance(source, str) and source


@pytest.mark.parametrize("bad_time", [0, 0.0, -1.0])
def test_tflops_per_device_rejects_nonpositive_time(bad_time):
    with pytest.raises(ValueError):
        tflops_per_device(1e12, bad_time, 1)


def test_tflops_per_device_rejects_zero_world():
    with pytest.raises(ValueError):
        tflops_per_device(1e12, 1.0, 0)


def test_results_are_finite():
    assert math.isfinite(flops_per_iteration(40, 5120, 2048, 50304, 1024, True))


def test_attention_density_scales_only_the_attention_term():
    # l=1, h=6, s=6, V=96, B=1, f=3: 15552 * (1 + rho * 6/36 + 96/96)
    assert flops_per_iteration(1, 6, 6, 96, 1, attention_density=0.5) == pytest.approx(
        15552 * (2 + 0.5 / 6), rel=1e-12
    )
    # the attention-score term is 4 f B s^2 l h: QK^T and AV, forward and backward
    shape = (24, 2048, 8192, 50304, 2)
    dense = flops_per_iteration(*shape)
    for rho in (0.0, 0.25, 136 / 256):
        sparse = flops_per_iteration(*shape, attention_density=rho)
        assert dense - sparse == pytest.approx((1 - rho) * 4 * 3 * 2 * 8192**2 * 24 * 2048, rel=1e-12)
    assert flops_per_iteration(*shape, attention_density=1.0) == dense


@pytest.mark.parametrize("rho", [-0.1, 1.5])
def test_attention_density_out_of_range(rho):
    with pytest.raises(ValueError, match="attention_density"):
        flops_per_iteration(1, 6, 6, 96, 1, attention_density=rho)
