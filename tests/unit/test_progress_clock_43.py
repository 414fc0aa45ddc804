"""The sweep's estimate of the time left counts the jobs' time only, not the composing before the first job
(docs/reliability-14.md #1060)."""

from __future__ import annotations

import os
import re
import time

from flopsweep.callbacks import SweepSummary
from flopsweep.progress import job_seconds, jobs_began, progress_line, sweep_starting
from flopsweep.signals import jobs_starting


def test_the_estimate_divides_the_time_since_the_first_job_started() -> None:
    """199 jobs, 48 s composing before job 0, job 0 took 4 s: about 198 x 4 s left, not 198 x 52 s."""
    sweep_starting()
    jobs_began(now=1048.0)  # the sweep started at 1000.0
    jobs_began(now=1050.0)  # a later job's start: the first one counts
    assert job_seconds(1000.0, now=1052.0) == 4.0
    line = progress_line(1, 199, 52.0, status="ok", job=0, ran=1, job_s=job_seconds(1000.0, now=1052.0))
    assert line == "flopsweep: 1 of 199 jobs done (job 0): ok, 0:52 elapsed, about 13:12 left"
    sweep_starting()  # a new sweep: no job started yet, the sweep's own start counts
    assert job_seconds(1000.0, now=1052.0) == 52.0


def test_the_sweep_s_progress_line_starts_its_estimate_at_the_first_job(capsys) -> None:
    """The callback, with the launcher's real ``jobs_starting``: the line said ``about 2:38:24 left`` for a
    sweep of 199 jobs that had spent 48 s before its first job started."""
    summary = SweepSummary()
    summary.pid, summary.total, summary.done, summary.skipped, summary.kept = os.getpid(), 199, 0, 0, {}
    summary.started = time.monotonic() - 48.0
    sweep_starting()
    jobs_starting()  # the first job starts now (stop_before_jobs is not in place: it only marks)
    capsys.readouterr()
    summary.job_done(None, num=0)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "(job 0), 0:48 elapsed, about " in line
    h_m_s = re.search(r"about (\S+) left", line).group(1).split(":")
    assert len(h_m_s) == 2 and int(h_m_s[0]) < 5, line  # was 2:38:24: 48 s x 198
