"""Numbers that cannot mislead: strict records for a diverged loss, steady steps only,
plausibility against the measured GEMM rate, sweep values that are the values run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.slow
def test_nan_loss_gives_a_strict_record_with_timings(tmp_path: Path) -> None:
    proc = run_py(
        "device=cpu", "fault.kind=nan_loss", "fault.phase=measure", f"hydra.run.dir={tmp_path}", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (tmp_path / "metrics.json").read_text()
    record = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a strict record"))
    m = record["metrics"]
    assert record["status"] == "ok"
    assert m["loss_finite"] is False and m["loss_last"] is None and m["loss_first"] is not None
    assert len(m["iteration_time_s"]["values"]) == 5 and m["tokens_per_s"] > 0
    assert any(w.startswith("loss_not_finite") for w in record["warnings"])
