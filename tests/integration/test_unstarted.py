"""Session 25: an interrupt that lands in a job's checks, before any worker starts, is the job's ``error``
record (:func:`flopsweep.job.lifecycle.start_recorded`); it had left the folder without one. In process (the
record assembly runs ``git``); the folder's removal before that: tests/unit/test_unstarted.py."""

from __future__ import annotations

import json

import pytest

from flopsweep import unstarted
from flopsweep.config import RunConfig
from flopsweep.job.lifecycle import new_run, start_recorded
from flopsweep.job.result import JobInfo, JobResult
from flopsweep.launch import Terminated


@pytest.mark.slow
@pytest.mark.parametrize(
    ("exc", "said"),
    [(KeyboardInterrupt(), "Ctrl-C (SIGINT)"), (Terminated(), "SIGTERM")],
)
def test_an_interrupt_in_the_jobs_checks_is_its_error_record(tmp_path, exc, said):
    """After :func:`flopsweep.unstarted.job_started` the folder is the job's: the interrupt that landed
    in its checks (the plan, the host's memory) had left it without a record."""
    unstarted.expect(tmp_path)
    (tmp_path / "job").mkdir()
    unstarted.job_folder_made(tmp_path / "job")
    cfg, info = RunConfig(), JobInfo(job_dir=str(tmp_path / "job"), overrides=["seed=1"])
    job = JobResult(path=tmp_path / "job" / "metrics.json", cfg=cfg, run=new_run(cfg, info))
    with pytest.raises(type(exc)), start_recorded(job):
        assert unstarted.PENDING["folder"] is None  # started: an interrupt no longer removes the folder
        raise exc
    record = json.loads(job.path.read_text())
    assert record["status"] == "error"
    assert record["error"]["type"] == type(exc).__name__ and record["error"]["phase"] == "launch"
    assert record["error"]["message"] == f"interrupted by {said} before any worker started"
    assert unstarted.remove_unstarted() is None and job.path.exists()
    unstarted.PENDING.update(folder=None, keep=None, lock=None)
