"""Session 41's fixes that are typed back (docs/reliability-12.md rows 940-944): the folder key a refusal
names is the command's own (#940), the plan's host-memory footnote (#941), a fullwidth digit for an
integer key (#942), the words of a SIGKILLed job's skip (#943) and the note of a backends sweep on one
CPU rank (#944)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


def _record(path: Path, overrides: list[str]) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"run": {"overrides": overrides}}))


@pytest.mark.parametrize(
    ("argv", "key"), [(["device=cpu"], "hydra.run.dir"), (["-m", "device=cpu"], "hydra.sweep.dir")]
)
def test_another_run_s_record_names_this_command_s_folder_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], key: str
) -> None:
    """#940: resume=true into another run's folder: a single run's fix names hydra.run.dir, a sweep's
    hydra.sweep.dir, and the folder it names is accepted (no record there, nothing refused)."""
    from flopsweep.job.resume import other_run_problem

    monkeypatch.setattr(sys, "argv", ["run.py", *argv])
    _record(tmp_path / "x" / "metrics.json", ["device=cpu", "steps.measure=30"])
    line = other_run_problem(tmp_path / "x" / "metrics.json", ["device=cpu", "steps.measure=31"])
    assert line is not None and line.endswith(f"Fix: choose another {key}, e.g. {key}={tmp_path / 'x'}-2"), (
        line
    )
    assert "single run" not in line
    assert other_run_problem(tmp_path / "x-2" / "metrics.json", ["device=cpu", "steps.measure=31"]) is None
