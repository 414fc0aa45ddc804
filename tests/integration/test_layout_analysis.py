"""Issue 23, item 11: the ready layout sweep, the analysis' layout columns, the layout in plot legends,
and the scaling efficiency of a set-up that has no one-rank run of its own."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.slow
def test_plan_true_lists_every_layout_before_any_run(tmp_path: Path) -> None:
    """``plan=true`` over the layout sweep: one row per layout, each estimated with its layout label,
    or refused in one line with its reason (the degrees not built yet on this branch); no record."""
    proc = run_py(
        "-m", "+sweep=layouts-8gpu-llama8b", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert len(rows) == 11 and not list(tmp_path.rglob("metrics.json"))
    for row in rows:
        assert row["model"] == "llama3.1-8b" and row["overrides"].startswith("parallel={")
        if row["status"] == "ok":
            assert row["layout"] and float(row["est_peak_gib_per_rank"]) > 0
        else:
            assert row["status"] == "invalid" and "Fix:" in row["reason"] and "\n" not in row["reason"]
    assert rows[0]["status"] == "ok" and rows[0]["layout"] == "dp8"
