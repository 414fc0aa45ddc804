"""A nearest set-up's rate never runs over its GPU's measured GEMM rate (docs/reliability-12.md, row 861):
a record whose rate on hardware FLOPs does (the causal square counted whole, where the kernel skips its
masked half) is carried on executed FLOPs, both sides, at most that rate (:func:`flopsweep.nearest.transfer`,
:func:`flopsweep.nearest_measured.executed_flops`, :func:`flopsweep.nearest_measured.gemm_rate`), so that a
longer sequence is never predicted to train faster."""

from __future__ import annotations

import pytest

from flopsweep import forecast, nearest, nearest_measured, shipped
from flopsweep.layout import Layout

H200 = "NVIDIA H200"
LONG_3B = "h200/session20/seq-frontier/seq128k-3b/0/metrics.json"
"""Llama 3.2 3B FSDP2 at 131,072 tokens, full checkpointing: 887 TFLOP/s on hardware FLOPs, GEMMs at 699."""
SHORT_11B = "h200x2/seed-fsdp-x2/0/metrics.json"
"""A 2,048-token record whose rate on hardware FLOPs is under its GEMM rate."""


def _llama8b(hydra_compose, seq_len: int):
    return hydra_compose(
        [
            "device=cuda",
            "model=llama3.1-8b",
            f"model.seq_len={seq_len}",
            "batch.micro_batch_size=1",
            "activation_checkpointing=full",
            "backend=fsdp",
            "nproc_per_node=2",
        ]
    )


def _target(cfg) -> nearest_measured.Measured:
    work = forecast.workload(cfg, Layout.data_parallel(2))
    stub = {"config": forecast._config_dict(cfg), "system": {"device_name": H200}}
    return nearest_measured.describe("(this run)", stub, work, device_name=H200)


def _transferred(target, name: str) -> tuple[nearest.Transferred, nearest_measured.Measured]:
    m = nearest_measured.describe(name, dict(shipped.records())[name])
    done = nearest.transfer(target, m, rates={})
    assert done is not None
    return done, m


def test_a_record_over_its_gemm_rate_carries_executed_flops_at_most_that_rate(hydra_compose) -> None:
    target = _target(_llama8b(hydra_compose, 32768))
    done, m = _transferred(target, LONG_3B)
    gemm = nearest_measured.gemm_rate(m)
    assert nearest_measured.hardware_flops(m) / done.own_s > gemm  # the count it was carried on before
    assert done.executed and done.rate_tflops * 1e12 <= gemm
    assert done.rate_tflops == pytest.approx(nearest_measured.executed_flops(m) / done.own_s / 1e12)
    executed = nearest_measured.executed_flops(target)
    assert executed < nearest_measured.hardware_flops(target)  # the causal square halved
    assert done.compute_s == pytest.approx(executed / (done.rate_tflops * 1e12))


def test_a_record_under_its_gemm_rate_carries_hardware_flops_as_before(hydra_compose) -> None:
    target = _target(_llama8b(hydra_compose, 8192))
    done, m = _transferred(target, SHORT_11B)
    assert not done.executed
    assert done.rate_tflops * 1e12 == pytest.approx(nearest_measured.hardware_flops(m) / done.own_s)
    assert done.rate_tflops * 1e12 <= nearest_measured.gemm_rate(m)


def test_four_times_the_sequence_is_predicted_slower_per_token(hydra_compose) -> None:
    """The user's case: Llama 3.1 8B FSDP2 on two H200s, full checkpointing, micro batch 1: 32,768 tokens
    predicted 7,074 tokens/s/GPU (69% MFU) against 6,763 at 8,192; now fewer."""
    made = {}
    for seq_len in (8192, 32768):
        cfg = _llama8b(hydra_compose, seq_len)
        made[seq_len] = forecast.prediction(
            cfg, Layout.data_parallel(2), shipped.records(), gpus_per_node=2, device_name=H200
        )
    assert LONG_3B in made[32768]["source"] and "on executed FLOPs per rank" in made[32768]["source"]
    assert made[32768]["tokens_per_s"] < made[8192]["tokens_per_s"]
