"""The attention square is read alike for every record and target whose sequence lengths differ
(docs/reliability-12.md, row 950): the nearest set-up's rate is carried on executed FLOPs, both sides
(:func:`flopsweep.nearest_measured.executed_reason`, :func:`flopsweep.nearest.transfer`), so a one-GPU
``single`` plan at a long sequence, from a short-sequence record, is no longer read on a count whose skipped
share grows with the sequence while FSDP2's, from a long-sequence record, is read on what runs."""

from __future__ import annotations

import pytest

from flopsweep import forecast, nearest, nearest_measured, shipped
from flopsweep.layout import Layout

H200 = "NVIDIA H200"
SHORT_11B = "h200x2/seed-fsdp-x2/0/metrics.json"
"""A 2,048-token record whose rate on hardware FLOPs is under its GEMM rate."""


def _llama8b(hydra_compose, seq_len: int, backend: str = "fsdp"):
    return hydra_compose(
        [
            "device=cuda",
            "model=llama3.1-8b",
            f"model.seq_len={seq_len}",
            "batch.micro_batch_size=1",
            "activation_checkpointing=full",
            f"backend={backend}",
            "nproc_per_node=1",
        ]
    )


def _target(cfg) -> nearest_measured.Measured:
    work = forecast.workload(cfg, Layout.data_parallel(1))
    stub = {"config": forecast._config_dict(cfg), "system": {"device_name": H200}}
    return nearest_measured.describe("(this run)", stub, work, device_name=H200)


def test_executed_reason_says_why_or_nothing() -> None:
    assert nearest_measured.executed_reason(True, 2048, 2048) == nearest_measured.EXECUTED_WORDS
    assert nearest_measured.executed_reason(True, 8192, 2048) == nearest_measured.EXECUTED_WORDS
    assert nearest_measured.executed_reason(False, 8192, 2048) == nearest_measured.SEQ_WORDS
    assert nearest_measured.executed_reason(False, 2048, 2048) == ""


def test_another_sequence_length_carries_executed_flops_both_sides(hydra_compose) -> None:
    target = _target(_llama8b(hydra_compose, 32768))
    m = nearest_measured.describe(SHORT_11B, dict(shipped.records())[SHORT_11B])
    assert m.workload.seq_len == 2048
    done = nearest.transfer(target, m, rates={})
    assert done is not None and done.executed == nearest_measured.SEQ_WORDS
    assert nearest_measured.hardware_flops(m) / done.own_s < nearest_measured.gemm_rate(m)  # not the GEMM cap
    assert done.rate_tflops * 1e12 == pytest.approx(nearest_measured.executed_flops(m) / done.own_s)
    executed = nearest_measured.executed_flops(target)
    assert executed < 0.9 * nearest_measured.hardware_flops(
        target
    )  # at 32,768 tokens the square is a large share
    assert done.compute_s == pytest.approx(executed / (done.rate_tflops * 1e12))


def test_single_mfu_rises_with_the_sequence_as_fsdp2s_does(hydra_compose) -> None:
    """The user's case: Llama 3.1 8B ``full``, micro batch 1, one GPU: ``single`` stayed at 0.36-0.37 MFU from
    8,192 to 131,072 tokens (a 2,048-token record on hardware FLOPs) while FSDP2 rose 0.37 -> 0.65."""
    mfu = {}
    for seq_len in (8192, 32768):
        cfg = _llama8b(hydra_compose, seq_len, backend="single")
        made = forecast.prediction(
            cfg, Layout.data_parallel(1), shipped.records(), gpus_per_node=1, device_name=H200
        )
        assert "executed FLOPs per rank" in made["source"]
        mfu[seq_len] = made["mfu"]
    assert mfu[32768] > 1.1 * mfu[8192]
