"""Session 39 (docs/reliability-10.md #672): after ``resume=true`` a sweep's progress line counted the
skipped jobs in its mean time per job (``2 of 4 jobs done (job 1): skipped, 0:02 elapsed, about 0:02
left``, the two skipped jobs taking no time). Now the time left is the elapsed time per job that ran,
times the jobs left, and nothing is said about it until one job has run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flopsweep.callbacks import SweepSummary, ok_run_ids
from flopsweep.progress import progress_line


def test_the_time_left_comes_from_the_jobs_that_ran_only():
    assert progress_line(2, 4, 2, status="skipped", job=1, ran=0) == (
        "flopsweep: 2 of 4 jobs done (job 1): skipped, 0:02 elapsed"
    )
    assert progress_line(3, 4, 62, status="ok", job=2, ran=1) == (
        "flopsweep: 3 of 4 jobs done (job 2): ok, 1:02 elapsed, about 1:02 left"
    )
    assert progress_line(3, 12, 151) == "flopsweep: 3 of 12 jobs done, 2:31 elapsed, about 7:33 left"


def test_a_resumed_sweep_counts_its_skipped_jobs_in_no_estimate(tmp_path: Path, capsys):
    for name in ("0", "1"):  # the jobs resume=true keeps: ok records already there
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps({"status": "ok", "run": {"id": f"r{name}"}}))
    summary = SweepSummary()
    summary.kept, summary.total = ok_run_ids(tmp_path), 4
    summary.started, summary.pid = time.monotonic() - 2, os.getpid()
    capsys.readouterr()
    summary.job_done(tmp_path / "0", num=0)
    summary.job_done(tmp_path / "1", num=1)
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "metrics.json").write_text(json.dumps({"status": "ok", "run": {"id": "r2"}}))
    summary.job_done(tmp_path / "2", num=2)
    lines = [line.split(", 0:0", 1) for line in capsys.readouterr().out.splitlines()]
    assert [head for head, _ in lines] == [
        "flopsweep: 1 of 4 jobs done (job 0): skipped",
        "flopsweep: 2 of 4 jobs done (job 1): skipped",
        "flopsweep: 3 of 4 jobs done (job 2): ok",
    ]
    assert [tail.endswith(" elapsed") for _, tail in lines] == [True, True, False]
    assert lines[2][1].endswith(" left")  # one job ran: the estimate from it
    assert summary.skipped == 2
