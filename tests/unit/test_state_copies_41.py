"""FSDP2 ``cpu_offload``'s host-device copies of the states in a probe-predicted step (issue 41, session 41;
docs/prediction-host-optimizer.md "FSDP2's `cpu_offload` copies", :mod:`flopsweep.state_copies`; a model
change, no reliability row). The compute probe times one block under autocast on the GPU and the AdamW on
the host, so the 4-byte shard copied to the GPU at each all-gather (twice a step with
``reshard_after_forward``) and the 4-byte gradient copied back were in no piece: Llama 3.2 1B FSDP2
``cpu_offload`` on one H100 (``h100/session39/check/v2/0``) was predicted 1.995 s against 2.460 s measured
(-18.9%); with 14.8 GB of copies at 0.8 x PCIe Gen5's 64 GB/s, 2.285 s (-7.1%)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flopsweep import forecast, state_copies
from flopsweep.layout import Layout
from flopsweep.predict import workload_from_record
from flopsweep.workload import Compute

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "benchmarks/results/h100/session39/check/v2/0/metrics.json"
H100 = "NVIDIA H100 80GB HBM3"
P_1B = 1_235_814_400


def _record() -> dict:
    return json.loads(RECORD.read_text())


def _probe(kind: str = "probe") -> Compute:
    return Compute(compute_s=0.16, optimizer_s=1.83, source="probe: ...", kind=kind)


def test_the_bytes_are_three_fp32_copies_a_parameter_a_step() -> None:
    rec = _record()
    w = workload_from_record(rec)
    to_gpu, to_host = state_copies.step_bytes(rec["config"]["backend"], w)
    assert (to_gpu, to_host) == (8 * P_1B, 4 * P_1B)  # 9.89 GB (two all-gathers) and 4.94 GB
    rec["config"]["backend"]["reshard_after_forward"] = False
    assert state_copies.step_bytes(rec["config"]["backend"], workload_from_record(rec))[0] == 4 * P_1B
    rec["config"]["batch"]["grad_accum"] = 3  # one gather a micro batch, one gradient a step
    assert state_copies.step_bytes(rec["config"]["backend"], workload_from_record(rec)) == (
        12 * P_1B,
        4 * P_1B,
    )


def test_the_copies_are_added_to_a_probe_or_flops_step_only() -> None:
    rec = _record()
    w, backend = workload_from_record(rec), rec["config"]["backend"]
    made = state_copies.with_state_copies(backend, w, _probe(), H100)
    assert made.compute_s == pytest.approx(0.16 + 12 * P_1B / 51.2e9)  # + 0.2896 s
    assert made.optimizer_s == 1.83
    assert made.source.endswith(
        "backend.cpu_offload=true: + 0.2896 s of state copies, 9.21 GiB of fp32 shards to the GPU and "
        "4.6 GiB of gradients back at 0.8 x PCIe Gen5 x16 64 GB/s, serial (docs/prediction-host-optimizer.md)"
    )
    for kind in ("calibration", "nearest", "layers"):  # a record or the layer probe ran them
        assert state_copies.with_state_copies(backend, w, _probe(kind), H100) == _probe(kind)
    assert state_copies.with_state_copies(backend, w, _probe(), H100, device="cpu") == _probe()
    assert state_copies.with_state_copies({**backend, "cpu_offload": False}, w, _probe(), H100) == _probe()


def test_the_committed_record_is_predicted_within_ten_percent() -> None:
    """``benchmarks/probe_recompute.py`` over the record: -18.9% before, -7.1% now."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import probe_recompute
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rec = _record()
    measured = rec["metrics"]["iteration_time_s"]["mean"]
    assert rec["metrics"]["predicted"]["iteration_time_s"] / measured - 1 == pytest.approx(-0.189, abs=1e-3)
    assert probe_recompute.recomputed(rec) / measured - 1 == pytest.approx(-0.0711, abs=1e-3)


def test_the_job_adds_them_to_its_probed_step(hydra_compose) -> None:
    """:func:`flopsweep.forecast.prediction`, the job's and the plan's path, with the record's probe."""
    cfg = hydra_compose(
        [
            "model=llama3.2-1b",
            "backend=fsdp",
            "backend.cpu_offload=true",
            "batch.micro_batch_size=4",
            "predict.probe=true",
            "device=cuda",
        ]
    )
    pieces = _record()["metrics"]["predicted"]["probe"]
    made = forecast.prediction(
        cfg, Layout.data_parallel(1), [], gpus_per_node=1, device_name=H100, compute_probe=pieces
    )
    assert made["compute_source"] == "probe"
    assert made["iteration_time_s"] == pytest.approx(2.2846, abs=2e-4)  # 1.995 s before
    assert "backend.cpu_offload=true: + 0.2896 s of state copies" in made["source"]
