"""``resume=true`` runs again an ``ok`` record that fails the analysis' checks (reliability #410): a tiny
CPU sweep of one job through run.py, its record edited, resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import read_record, run_py

from flopsweep.plausible import usable_problems

TINY = ["device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=2"]


@pytest.mark.slow
def test_resume_runs_an_edited_ok_record_again(tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    first = run_py("-m", *TINY, "seed=0", f"hydra.sweep.dir={sweep}", timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    path = sweep / "0" / "metrics.json"
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and usable_problems(record) == []
    record["metrics"]["model_tflops_per_device"] = 99
    path.write_text(json.dumps(record))
    again = run_py("-m", *TINY, "seed=0", f"hydra.sweep.dir={sweep}", "resume=true", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    said = [
        line for line in (again.stdout + again.stderr).splitlines() if "resume=true: running again" in line
    ]
    assert len(said) == 1 and f"{path} fails its checks: " in said[0], said
    new = read_record(path)
    assert new["run"]["id"] != record["run"]["id"] and usable_problems(new) == []
    assert (sweep / "0" / f"metrics.ok-{record['run']['id']}.json").exists()  # the edited one set aside
