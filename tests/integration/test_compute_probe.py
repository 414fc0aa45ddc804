"""The compute probe (``flopsweep.compute_probe``, ``predict.probe=true``) and the step-time model's
composition of its pieces (``flopsweep.steptime.compute_from_probe``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "ranks"), [("single", 1), ("fsdp", 2)])
def test_a_run_with_the_probe_records_a_probe_prediction(tmp_path: Path, backend: str, ranks: int) -> None:
    """A real CPU run (one rank, and two gloo ranks of FSDP2) with ``predict.probe=true``: its
    prediction's compute comes from the probe (``compute_source: probe``, the pieces kept under
    ``metrics.predicted.probe``); its error against the measured step is recorded, whatever it is."""
    proc = run_py(
        "device=cpu", "model=llama-tiny", f"backend={backend}", f"nproc_per_node={ranks}",
        "steps.warmup=1", "steps.measure=2", "predict.probe=true",
        f"hydra.run.dir={tmp_path}", timeout=600, env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "ok", record.get("error")
    predicted = record["metrics"]["predicted"]
    assert predicted["compute_source"] == "probe", predicted["source"]
    assert predicted["source"].startswith("probe: 2 x block")
    probe = predicted["probe"]
    assert probe["fallback"] is None and probe["block_s"] > 0 and probe["wall_s"] > 0
    assert predicted["compute_s"] == pytest.approx(2 * probe["block_s"] + probe["head_s"])
    measured = record["metrics"]["iteration_time_s"]["mean"]
    error = (predicted["iteration_time_s"] - measured) / measured
    print(f"{backend} x {ranks}: probe prediction error {error:+.1%}")  # recorded, whatever it is
