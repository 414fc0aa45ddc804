"""Session 40: a signal after the ranks ended waits for the record (docs/reliability-11.md #800). The
signal is real (``os.kill`` of this process, from inside the step named), the record written as a job
writes it (its git state: a subprocess); under 2 s of CPU."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest
from helpers import make_plan

from flopsweep import record as rec
from flopsweep.config import RunConfig
from flopsweep.job import lifecycle
from flopsweep.job.lifecycle import measured_and_recorded
from flopsweep.job.result import JobResult
from flopsweep.launch import Terminated, raise_terminated
from flopsweep.outcome import Outcome
from flopsweep.safe_read import read_json
from flopsweep.signals import signals_deferred


def _job(tmp_path: Path) -> JobResult:
    plan = make_plan(dataclasses.replace(RunConfig(), device="cpu"))
    (tmp_path / "job").mkdir()
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": 0}
    job = JobResult(path=tmp_path / "job" / "metrics.json", cfg=plan.cfg, run=run, plan=plan)
    job.outcome = Outcome("error", error=rec.error("InjectedFault", "injected fault: raise", "measure", 0))
    return job


def test_a_ctrl_c_after_the_ranks_ended_waits_for_the_record(tmp_path: Path, monkeypatch) -> None:
    """Was: a Ctrl-C 0.3 s after the last step (the ranks gone, the metrics being computed) raised there:
    exit 130, no ``metrics.json``, "no run had been recorded yet". Now it is raised once the record is
    on disk (the run's own outcome), as ``run_job`` holds it from the ranks' end."""
    job = _job(tmp_path)
    real = lifecycle.measured

    def measured_then_sigint(job: JobResult) -> JobResult:  # the Ctrl-C lands as the metrics are computed
        os.kill(os.getpid(), signal.SIGINT)
        return real(job)

    monkeypatch.setattr(lifecycle, "measured", measured_then_sigint)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), signals_deferred() as pending:
            measured_and_recorded(job, pending)
    finally:
        signal.signal(signal.SIGINT, previous)
    record = read_json(job.path)
    assert record["status"] == "error" and record["error"]["message"] == "injected fault: raise"
    assert record["warnings"] == []  # the run's own outcome: no teardown note on an error


def test_a_sigterm_after_the_ranks_ended_keeps_the_ok_record_with_its_note(
    tmp_path: Path, monkeypatch
) -> None:
    """The ok case of #800: the figures kept, the warning says the signal came after the ranks ended; then
    ``Terminated`` (exit 143)."""
    job = _job(tmp_path)
    steps = job.cfg.steps.measure
    ranks = [
        {"rank": r, "device": "cpu", "step_times_s": [0.05] * steps, "losses": [10.0] * (steps + 1)}
        | dict.fromkeys(("peak_cuda_allocated_bytes", "peak_cuda_reserved_bytes"), 0)
        | {"peak_host_rss_bytes": 2**30}
        for r in range(job.plan.layout.world_size)
    ]
    job.outcome, job.layout = Outcome("ok", ranks=ranks), job.plan.layout
    real = lifecycle.measured

    def measured_then_sigterm(job: JobResult) -> JobResult:
        os.kill(os.getpid(), signal.SIGTERM)
        return real(job)

    monkeypatch.setattr(lifecycle, "measured", measured_then_sigterm)
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with pytest.raises(Terminated), signals_deferred() as pending:
            measured_and_recorded(job, pending)
    finally:
        signal.signal(signal.SIGTERM, previous)
    record = read_json(job.path)
    assert record["status"] == "ok" and record["metrics"]["tokens_per_s"] > 0
    assert record["warnings"][0] == (
        "teardown_signal: interrupted by SIGTERM after the ranks ended, while the run was recorded; "
        "the measurement is whole"
    )
