"""Session 40's signals while a run tears down (docs/reliability-11.md #740-#741): a second signal while
the launcher stops the ranks waits until every rank is reaped and cuts the grace short (#740), and a
signal while an interrupt is recorded waits for the record (#741). The signals are real (``os.kill`` of
this process), the worker a real process, the record written as a job writes it (its git state: a
subprocess); both tests take under 2 s of CPU."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from helpers import make_plan

from flopsweep.config import RunConfig
from flopsweep.job import lifecycle
from flopsweep.job.lifecycle import failures_recorded
from flopsweep.job.result import JobResult
from flopsweep.launch import Terminated, raise_terminated, stop_all
from flopsweep.safe_read import read_json


def _stubborn(folder: str) -> None:
    """A worker tearing down as a hung rank does: SIGINT ignored (as every rank), SIGTERM only noted."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: Path(folder, "term").touch())
    Path(folder, "ready").touch()
    while True:
        time.sleep(0.05)


def _when(path: Path, then: callable) -> threading.Thread:
    """A thread that runs ``then`` once ``path`` exists (at most 60 s)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_second_signal_while_the_ranks_are_stopped_waits_until_each_is_reaped(tmp_path: Path) -> None:
    """Was: the second Ctrl-C raised inside ``stop_all`` and left the rank running (the job process then
    waited on it at its exit, both signals ignored: only SIGKILL ended it). Now the signal is raised once
    the rank is gone, and it ends the grace (120 s here) at once."""
    worker = multiprocessing.get_context("fork").Process(target=_stubborn, args=(str(tmp_path),))
    worker.start()
    try:
        watcher = _when(tmp_path / "ready", lambda: None)
        watcher.join()
        sender = _when(tmp_path / "term", lambda: os.kill(os.getpid(), signal.SIGINT))  # the second Ctrl-C
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            stop_all([worker], grace_s=120)
        sender.join()
        assert not psutil.pid_exists(worker.pid)  # reaped before the signal was raised
        assert (tmp_path / "term").exists()  # it had its SIGTERM first
        assert time.monotonic() - start < 60  # the grace (120 s) was cut short by the signal
    finally:
        if psutil.pid_exists(worker.pid):  # pragma: no cover - only where the rank was left running
            os.kill(worker.pid, signal.SIGKILL)
            worker.join(5)


def _job(tmp_path: Path) -> JobResult:
    plan = make_plan(dataclasses.replace(RunConfig(), device="cpu"))
    (tmp_path / "job").mkdir()
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": 0}
    return JobResult(path=tmp_path / "job" / "metrics.json", cfg=plan.cfg, run=run, plan=plan)


def test_a_sigterm_while_an_interrupt_is_recorded_waits_for_the_record(tmp_path: Path, monkeypatch) -> None:
    """Was: a SIGTERM after the Ctrl-C, landing while the interrupt was being recorded (the estimate at the
    sizes measured comes first), left the folder without a record. Now it is raised once the record is
    written: ``Terminated`` (exit 143), the Ctrl-C's record on disk."""
    job = _job(tmp_path)
    estimate = lifecycle.estimate_at_sizes

    def estimate_then_sigterm(job: JobResult) -> None:  # the SIGTERM lands as the interrupt is recorded
        os.kill(os.getpid(), signal.SIGTERM)
        estimate(job)

    monkeypatch.setattr(lifecycle, "estimate_at_sizes", estimate_then_sigterm)
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with pytest.raises(Terminated), failures_recorded(job):
            raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGTERM, previous)
    record = read_json(job.path)
    assert record["status"] == "error" and record["error"]["type"] == "KeyboardInterrupt"
    assert record["error"]["message"] == "interrupted by Ctrl-C (SIGINT); every worker was stopped"
