"""Session 41 (docs/reliability-12.md #921): ``resume=true`` after a job outside ``repeats=`` rounds that
SIGKILL ended (the OOM killer's) keeps its record and does not run it again, in one line naming the
folder to remove to run it as it is; a job killed before it wrote a record runs again as before. Through
the job's own step before any worker (:func:`flopsweep.job.lifecycle.planned`); no rank, no subprocess."""

from __future__ import annotations

import json
import logging

from helpers import left_record, resumed_job

from flopsweep.job.killed_rounds import kept_on_resume

KILLED = {
    "type": "WorkerKilled",
    "message": "rank 0 was killed by SIGKILL (often the kernel's OOM killer: check host memory)",
    "phase": "measure",
}
TINY = ["model=gpt-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1"]


def test_a_job_killed_outside_rounds_is_kept_with_one_line(hydra_compose, tmp_path, caplog) -> None:
    """Was: its record set aside and the job run again, to meet the same OOM killer after the same wait.
    Now the record stays as it was, the job does not launch, and one line says why and which folder to
    remove to run it as it is."""
    killed = left_record(hydra_compose, tmp_path / "3", TINY, KILLED, "error")
    before = killed.read_bytes()
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        kept, job = resumed_job(hydra_compose, tmp_path / "3", TINY, tmp_path)
    assert kept["error"]["type"] == "WorkerKilled" and job.layout is None  # not launched
    assert killed.read_bytes() == before and sorted(p.name for p in tmp_path.rglob("*.json")) == [
        "metrics.json"
    ]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [
        f"skipped: this job is not run again (resume=true): its record ({killed}) says its rank 0 was killed "
        "by SIGKILL (often the kernel's OOM killer: check host memory; a kill -9 reads the same, the record "
        "cannot tell them apart); if it was the OOM killer, the same set-up here meets it again after the "
        "same wait. Fix: run a smaller model or batch.micro_batch_size in a "
        f"new hydra.run.dir (plan=true shows its estimate first), or to run it as it is: rm -r "  # no -m
        f"{tmp_path / '3'} and resume=true again"
    ]


def test_the_fix_removing_the_folder_runs_the_job_again(hydra_compose, tmp_path) -> None:
    """The line's fix is accepted: with the folder removed, ``resume=true`` plans the job to launch."""
    import shutil

    left_record(hydra_compose, tmp_path / "0", TINY, KILLED, "error")
    shutil.rmtree(tmp_path / "0")
    kept, job = resumed_job(hydra_compose, tmp_path / "0", TINY, tmp_path)
    assert kept is None and job.status is None  # planned, ready to launch


def test_a_failed_job_or_a_changed_set_up_runs_again_as_before(hydra_compose, tmp_path) -> None:
    """A failed (not killed) job, and a killed one whose set-up changed (``batch.micro_batch_size``), are run
    again as ``resume=true`` runs any failed job; so is one killed before it wrote a record (none here)."""
    raised = {"type": "RuntimeError", "message": "boom", "phase": "measure"}
    failed = left_record(hydra_compose, tmp_path / "0", TINY, raised, "error")
    assert kept_on_resume(failed, json.loads(failed.read_text())["config"]) is None
    killed = left_record(hydra_compose, tmp_path / "1", TINY, KILLED, "error")
    theirs = json.loads(killed.read_text())["config"]
    assert kept_on_resume(killed, theirs) is not None
    changed = {
        **theirs,
        "batch": {**theirs["batch"], "micro_batch_size": theirs["batch"]["micro_batch_size"] + 1},
    }
    assert kept_on_resume(killed, changed) is None
    assert kept_on_resume(tmp_path / "2" / "metrics.json", theirs) is None  # no record: runs again
    kept, job = resumed_job(hydra_compose, tmp_path / "0", TINY, tmp_path)
    assert kept is None and job.status is None and len(list((tmp_path / "0").glob("metrics.*.json"))) == 1
