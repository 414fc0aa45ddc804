"""``activation_checkpointing=offload``'s step: its sibling ``none``'s plus the host copies of every block's
saved activations (:mod:`flopsweep.offload_time`), for every backend that takes the policy. Before session
33 the plan predicted it as ``none`` (Llama 3.2 1B FSDP2 on one H200: 0.1599 s against ``none``'s 0.1612 s,
from a ``none`` record as its nearest); the other policies' steps and every policy's memory are as they
were (the table of ``plan=true model=llama3.2-1b plan_gpu=H200``, pinned below)."""

from __future__ import annotations

import pytest

from flopsweep import forecast, offload_time
from flopsweep import plan_space as ps
from flopsweep.activation_memory import activation_host_bytes
from flopsweep.clusters import parse_cluster
from flopsweep.layout import Layout


@pytest.mark.parametrize(
    ("name", "gbps", "link", "assumed"),
    [
        ("NVIDIA H200", 64.0, "PCIe Gen5 x16", False),
        ("NVIDIA H100 80GB HBM3", 64.0, "PCIe Gen5 x16", False),
        ("NVIDIA A100-SXM4-80GB", 32.0, "PCIe Gen4 x16", False),
        ("Tesla V100-SXM2-32GB", 16.0, "PCIe Gen3 x16", False),
        ("NVIDIA GH200 480GB", 450.0, "NVLink-C2C", False),  # not the H200's: GH200 is matched first
        (None, 64.0, "PCIe Gen5 x16", True),
        ("Some GPU", 64.0, "PCIe Gen5 x16", True),
    ],
)
def test_the_host_link_is_the_gpu_kind_s_per_direction(name, gbps, link, assumed) -> None:
    got, guessed = offload_time.host_link(name)
    assert (got.gbps, got.name, guessed) == (gbps, link, assumed)


def test_the_copies_are_the_host_bytes_each_way_at_the_link_s_share(hydra_compose) -> None:
    cfg = hydra_compose(["model=llama3.2-1b", "backend=fsdp", "activation_checkpointing=offload"])
    held = activation_host_bytes(cfg, Layout())
    assert held == 13_170_114_560  # 12.27 GiB: the plan's "offload needs at least 12.27 GiB of host memory"
    got = offload_time.transfer(cfg, Layout(), 1, "NVIDIA H200")
    assert got is not None and got.bytes == held
    assert got.seconds == pytest.approx(2 * held / (0.8 * 64e9))  # 0.51446 s, not overlapped
    assert "12.3 GiB each way at 0.8 x PCIe Gen5 x16 64 GB/s" in got.said
    assert offload_time.transfer(cfg, Layout(), 4, "NVIDIA H200").bytes == 4 * held  # each micro batch
    none = hydra_compose(["model=llama3.2-1b", "backend=fsdp", "activation_checkpointing=none"])
    assert offload_time.transfer(none, Layout(), 1, "NVIDIA H200") is None


BEFORE = {  # plan=true model=llama3.2-1b backend=B activation_checkpointing=P plan_gpu=H200: (GiB, s)
    ("single", "none"): (42.1, 0.1644),
    ("single", "full"): (27.4, 0.195),
    ("ddp", "none"): (46.7, 0.166),
    ("ddp", "selective"): (35.4, 0.179),
    ("fsdp", "none"): (38.5, 0.1589),
    ("fsdp", "full"): (27.5, 0.1885),
    ("fsdp", "selective"): (30.9, 0.1713),
    ("deepspeed", "none"): (43.4, 0.2469),
}
"""The other policies' rows, before and after session 33 (the offload rows' peaks too: 28.7, 33.4, 27.0
and 31.9 GiB); session 39's eager ``selective`` term (``activation_memory.selective_eager_bytes``) moved the
``selective`` peaks from 38.2 and 33.0 GiB, their times unchanged. Session 41's order of a set-up's records
(row #860: the latest started of the same set-up, no longer the first name) moved the times by -1.6% to +0.8%,
ZeRO-3's +11% (session 23's 0.2469 s record of the set-up in place of session 16's 0.2223 s)."""


def _row(hydra_compose, backend: str, policy: str) -> ps.Row:
    cfg = hydra_compose(["model=llama3.2-1b"])
    setup = ps.Setup(backend=backend, layout="dp", checkpointing=policy, precision="bf16", micro_batch=4)
    row = ps.evaluate(cfg, setup, parse_cluster("H200:1"), forecast.prediction_records(cfg))
    assert row is not None and row.status == "ok", row and row.reason
    return row


@pytest.mark.parametrize("backend", ["single", "ddp", "fsdp", "deepspeed"])
def test_offload_is_none_s_step_plus_its_host_copies(hydra_compose, backend: str) -> None:
    none, offload = _row(hydra_compose, backend, "none"), _row(hydra_compose, backend, "offload")
    cfg = hydra_compose(["model=llama3.2-1b", f"backend={backend}", "activation_checkpointing=offload"])
    copies = offload_time.transfer(cfg, Layout(), 1, "NVIDIA H200")
    assert copies is not None and copies.seconds > 0.5  # 12.3 GiB (FSDP2, ZeRO) or 14.3 (fp32 norms) each way
    added = offload.predicted_iteration_time_s - none.predicted_iteration_time_s
    assert added == pytest.approx(copies.seconds, rel=1e-6), (
        none.prediction_source,
        offload.prediction_source,
    )
    assert "policy sibling none's calibration" in offload.prediction_source
    assert "s of host copies" in offload.prediction_source and "host copies" not in none.prediction_source
    assert (
        offload.est_peak_gib_per_rank < none.est_peak_gib_per_rank
    )  # the activations on the host (unchanged by session 33)


@pytest.mark.parametrize(("backend", "policy"), sorted(BEFORE))
def test_the_other_policies_are_as_they_were(hydra_compose, backend: str, policy: str) -> None:
    row = _row(hydra_compose, backend, policy)
    assert "host copies" not in row.prediction_source
    assert (round(row.est_peak_gib_per_rank, 1), round(row.predicted_iteration_time_s, 4)) == BEFORE[
        backend, policy
    ]


def test_no_copies_are_added_on_the_cpu_or_to_a_step_that_ran_them(hydra_compose) -> None:
    """``device=cpu``: the saved tensors stay in host memory; a base of the policy itself (its record, a
    probe: ``None``) holds its copies already."""
    from flopsweep.predict import Compute

    step = Compute(compute_s=1.0, optimizer_s=0.0, source="x")
    gpu = hydra_compose(["model=llama3.2-1b", "backend=fsdp", "activation_checkpointing=offload"])
    added = offload_time.with_host_copies(gpu, Layout(), 1, step, "none", "NVIDIA H200")
    assert (
        added.compute_s == pytest.approx(1.0 + 2 * 13_170_114_560 / 51.2e9) and "host copies" in added.source
    )
    for base in ("offload", None):
        assert offload_time.with_host_copies(gpu, Layout(), 1, step, base, "NVIDIA H200") is step
    cpu = hydra_compose(
        ["model=llama3.2-1b", "backend=fsdp", "activation_checkpointing=offload", "device=cpu"]
    )
    assert offload_time.with_host_copies(cpu, Layout(), 1, step, "", None) is step
