"""Session 39 (docs/reliability-10.md #552): a sweep folder that holds its ``multirun.yaml`` and job folders
but no record yet (the first job still running, or the sweep killed before one ended) said ``the folder
exists, with none in it or below. Fix: name a sweep folder ...``: the user had named one. Now the line
says what the folder is and what to do (``analysis.discover.no_records``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.discover import SWEEP_FILE
from flopsweep.hydrafiles import MULTIRUN_FILE


def test_a_sweep_folder_without_records_says_to_wait_or_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert SWEEP_FILE == MULTIRUN_FILE  # the analysis does not import the sweep's side
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0" / "run.log").write_text("launching 1 rank on cpu\n")
    (sweep / SWEEP_FILE).write_text("hydra: {}\n")
    assert main([str(sweep)]) == 2
    line = capsys.readouterr().err.strip()
    said = f"no metrics.json under {sweep} (0 runs): {sweep} holds a sweep's multirun.yaml but no record"
    assert said in line
    assert "Fix: wait for a job to end, or run the sweep again with resume=true" in line
    (tmp_path / "plain").mkdir()  # a folder that is no sweep: as before
    assert main([str(tmp_path / "plain")]) == 2
    assert "the folder exists, with none in it or below). Fix: name a sweep folder" in capsys.readouterr().err
