"""A job ``resume=true`` keeps after SIGKILL ended it is said as what it is (docs/reliability-13.md #972): its
own line said ``skipped: this job is not run again``, and the progress line and the summary counted it
``error`` (``0 ok, 0 oom, 2 error, 0 invalid, 0 skipped`` after a resume that ran nothing). Now a record
that was not ``ok`` and still holds its run id is counted among the skipped, its status said."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flopsweep.callbacks import SweepSummary, count_statuses, recorded_runs, summary_line


def _record(folder: Path, status: str, run: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps({"status": status, "run": {"id": run}}))


def test_a_kept_error_record_counts_as_skipped_with_its_status(tmp_path: Path, capsys) -> None:
    _record(tmp_path / "0", "error", "killed-0")  # SIGKILL ended it: resume=true keeps it
    _record(tmp_path / "1", "ok", "ok-1")  # ok: resume=true skips it
    _record(tmp_path / "2", "error", "old-2")  # another error: resume=true runs it again
    summary = SweepSummary()
    summary.kept, summary.total = recorded_runs(tmp_path), 3
    summary.started, summary.pid = time.monotonic() - 1, os.getpid()
    _record(tmp_path / "2", "error", "new-2")  # ran again and failed again: a new run id
    capsys.readouterr()
    for num in range(3):
        summary.job_done(tmp_path / str(num), num=num)
    heads = [line.split(", 0:0", 1)[0] for line in capsys.readouterr().out.splitlines()]
    assert heads == [
        "flopsweep: 1 of 3 jobs done (job 0): skipped (killed before: its error record kept)",
        "flopsweep: 2 of 3 jobs done (job 1): skipped",
        "flopsweep: 3 of 3 jobs done (job 2): error",
    ]
    assert summary.skipped == 2  # neither took time: no estimate from them
    assert summary_line(count_statuses(tmp_path, summary.kept)) == (
        "0 ok, 0 oom, 1 error, 0 invalid, 2 skipped (1 killed before: its error record kept)"
    )


def test_without_a_kept_record_the_summary_is_as_before(tmp_path: Path) -> None:
    _record(tmp_path / "0", "ok", "a")
    _record(tmp_path / "1", "oom", "b")
    assert summary_line(count_statuses(tmp_path)) == "1 ok, 1 oom, 0 error, 0 invalid, 0 skipped"
    kept = recorded_runs(tmp_path)
    assert summary_line(count_statuses(tmp_path, kept)) == (
        "0 ok, 0 oom, 0 error, 0 invalid, 2 skipped (1 killed before: its error record kept)"
    )
