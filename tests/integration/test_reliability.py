"""Issue 14's classes that had no test of their own: resume among hostile files (5), a legal
micro batch above 256 (10), an environment value in a tag (16), the load average of each job (17).
The README's reliability table maps every class to its test."""

from __future__ import annotations

import json
from pathlib import Path

from flopsweep.config import RunConfig, StepsConfig
from flopsweep.job import JobInfo, run_job


def test_a_record_keeps_the_load_average_at_the_start_and_end_of_its_job(tmp_path: Path) -> None:
    """Class 17: ``system.loadavg`` shows whether the host was busy while the job ran."""
    record = run_job(
        RunConfig(device="cpu", steps=StepsConfig(measure=0)),
        JobInfo(job_dir=tmp_path, overrides=[], job_num=0),  # a sweep's job: its refusal is recorded
    )
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "invalid" and written["system"]["loadavg"] == record["system"]["loadavg"]
    load = written["system"]["loadavg"]
    assert set(load) == {"start", "end"}
    for when in ("start", "end"):
        assert len(load[when]) == 3 and all(isinstance(x, float) and x >= 0 for x in load[when]), load
