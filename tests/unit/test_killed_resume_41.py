"""Session 41 (docs/reliability-12.md #824): ``resume=true`` after a sweep whose round the OOM killer ended
keeps that round's record (and its later rounds', ``KilledInEarlierRound``) and runs none of them again, in
one line for the set-up. Through the job's own step before any worker
(:func:`flopsweep.job.lifecycle.planned`), records written as the sweep wrote them; no rank, no subprocess."""

from __future__ import annotations

import json
import logging

from helpers import left_record, resumed_job

from flopsweep.job.killed_rounds import ERROR_TYPE, kept_on_resume

KILLED = {
    "type": "WorkerKilled",
    "message": "rank 0 was killed by SIGKILL (often the kernel's OOM killer: check host memory)",
    "phase": "warmup",
}
TINY = ["model=gpt-tiny", "device=cpu", "steps.warmup=1", "steps.measure=1"]


def test_resume_keeps_the_killed_round_and_its_later_round_in_one_line(
    hydra_compose, tmp_path, caplog
) -> None:
    """Was: ``resume=true`` set the killed round's record aside and ran it again (400 steps, 50 s here;
    about 4 minutes before the OOM killer on the trial's machine), then skipped round 1. Now both records
    stay as they were, neither round runs, and one line says why, for the set-up."""
    rounds = [*TINY, "repeats=2"]
    killed = left_record(hydra_compose, tmp_path / "0", [*rounds, "repeat=0"], KILLED, "error")
    skipped = {"type": ERROR_TYPE, "message": "round 1 of this set-up is not run: ...", "phase": "config"}
    later = left_record(hydra_compose, tmp_path / "1", [*rounds, "repeat=1"], skipped, "invalid")
    before = {p: p.read_bytes() for p in (killed, later)}
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        kept0, job0 = resumed_job(hydra_compose, tmp_path / "0", [*rounds, "repeat=0"], tmp_path)
        kept1, job1 = resumed_job(hydra_compose, tmp_path / "1", [*rounds, "repeat=1"], tmp_path)
    assert kept0["error"]["type"] == "WorkerKilled" and kept1["error"]["type"] == ERROR_TYPE
    assert job0.layout is None and job1.layout is None  # neither launched
    assert {p: p.read_bytes() for p in (killed, later)} == before  # nothing set aside
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["metrics.json", "metrics.json"]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"skipped: round 0 of this set-up is not run again (resume=true): its record ({killed})"
    )
    assert "its later rounds are not run either. Fix: run a smaller model" in lines[0]


def test_an_injected_kill_or_another_config_runs_again_as_before(hydra_compose, tmp_path) -> None:
    """An injected ``fault.kind=kill`` and another config's record are not kept: ``resume=true`` runs them
    as it runs any failed job (a job killed outside rounds: ``tests/unit/test_resume_killed_job_41.py``)."""
    rounds = [*TINY, "repeats=2", "repeat=0"]
    injected = [*rounds, "fault.kind=kill"]
    path = left_record(hydra_compose, tmp_path / "injected", injected, KILLED, "error")
    assert kept_on_resume(path, json.loads(path.read_text())["config"]) is None
    other = left_record(hydra_compose, tmp_path / "other", rounds, KILLED, "error")
    theirs = json.loads(other.read_text())["config"]
    assert kept_on_resume(other, theirs) is not None
    assert kept_on_resume(other, {**theirs, "seed": 7}) is None
