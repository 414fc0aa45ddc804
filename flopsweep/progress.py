"""The sweep's progress line (:func:`progress_line`), printed by
:meth:`flopsweep.callbacks.SweepSummary.job_done` as each job ends: the jobs done, the one that ended
and its status, the time elapsed and an estimate of the time left from the jobs that ran. Torch-free.

The estimate's clock starts when the sweep's first job starts (:func:`jobs_began`, from
:func:`flopsweep.signals.jobs_starting`, which every launcher calls in the sweep process), not when the sweep
does: Hydra's composition of every job's config before the first one (about 48 s for 199 jobs) was counted as
job 0's time (``1 of 199 jobs done (job 0): ok, 0:52 elapsed, about 2:50:48 left`` of a sweep that took 1:31).
"""

from __future__ import annotations

import time

_JOBS_BEGAN: list[float] = []
"""``time.monotonic()`` when the sweep's first job started (:func:`jobs_began`); empty before."""


def sweep_starting() -> None:
    """A sweep starts in this process (:meth:`flopsweep.callbacks.SweepSummary.on_multirun_start`): no job of
    it has started yet (an earlier sweep's start, in a test's process, is forgotten)."""
    _JOBS_BEGAN.clear()


def jobs_began(now: float | None = None) -> None:
    """A job (or a launcher's batch of them) starts now, ``now`` a ``time.monotonic()`` (None: read it); only
    the sweep's first call counts (:func:`job_seconds`)."""
    if not _JOBS_BEGAN:
        _JOBS_BEGAN.append(time.monotonic() if now is None else now)


def job_seconds(started: float, now: float | None = None) -> float:
    """Seconds the sweep's jobs have taken by ``now`` (``time.monotonic()``; None: read it): since its first
    job started (:func:`jobs_began`), or since ``started`` (the sweep's start, the same clock) when no start
    was seen in this process. The time before the first job (Hydra composing each job's config, the sweep's
    checks) is no job's."""
    now = time.monotonic() if now is None else now
    began = max(_JOBS_BEGAN[0], started) if _JOBS_BEGAN else started
    return max(0.0, now - began)


def progress_line(
    done: int,
    total: int | None,
    elapsed_s: float,
    *,
    status: str | None = None,
    bar: bool = False,
    job: int | None = None,
    ran: int | None = None,
    job_s: float | None = None,
) -> str:
    """``flopsweep: 3 of 12 jobs done (job 7): ok, 2:31 elapsed, about 7:33 left`` (the estimate: the
    elapsed time per job that ran, times the jobs left). ``elapsed_s``: seconds since the sweep started;
    ``job_s``: seconds since its first job started (:func:`job_seconds`; None: ``elapsed_s``), the time the
    estimate divides among the jobs that ran. ``ran``: how many of the ``done`` jobs ran (None:
    all); a job ``resume=true`` skipped takes no time and counts in no mean, and until one job has run the
    line says nothing about the time left (``2 of 4 jobs done (job 1): skipped, 0:02 elapsed``).
    ``done``: a count of the sweep's jobs ended, from 1; ``job``: the one that just ended, by Hydra's number
    (``hydra.job.num``, from 0: its folder ``7/``, Hydra's ``#7``, plan.csv's ``job``), which
    under a launcher that runs jobs side by side need not be ``done - 1``; None leaves out `` (job N)``.
    ``total`` None (not known): ``flopsweep: 2 jobs done (job 1): ok, 1:05 elapsed``. ``status``: the job's
    record's (:func:`flopsweep.callbacks.job_status`); None leaves out ``: <status>``.

    With ``bar`` (a terminal), tqdm draws a 20-character bar after the status:
    ``flopsweep: 3 of 12 jobs done (job 2): ok |█████               | 2:31 elapsed, about 7:33 left``.

    A status that carries a refusal's reason (:data:`REFUSED`: a plan job's ``invalid: KEY=VALUE: why.
    Fix: ...``, :func:`flopsweep.job.planoutcome.plan_outcome`) is shown whole, then ``; `` before the times
    (its own commas never run into them); a line over :data:`flopsweep.reference_text.MAX_LINE` characters
    has its status cut at a word, ending `` ...`` (:func:`flopsweep.reference_text.shorten`).
    """
    from flopsweep.reference_text import MAX_LINE, shorten

    line = _progress(done, total, elapsed_s, status, bar, job, ran, job_s)
    if status and len(line) > MAX_LINE:
        short = shorten(status, len(status) - len(line) + MAX_LINE)
        line = _progress(done, total, elapsed_s, short, bar, job, ran, job_s)
    return line


REFUSED = "invalid: "
"""How a status that carries a refusal's reason begins (:func:`flopsweep.job.planoutcome.plan_outcome`)."""


def _progress(
    done: int,
    total: int | None,
    elapsed_s: float,
    status: str | None,
    bar: bool,
    job: int | None,
    ran: int | None = None,
    job_s: float | None = None,
) -> str:
    """:func:`progress_line` with ``status`` as given."""
    shown = (f" (job {job})" if job is not None else "") + (f": {status}" if status else "")
    after = "; " if status and status.startswith(REFUSED) else ", "  # a reason's commas: not the times
    if total is None or total < done:
        return (
            f"flopsweep: {done} job{'' if done == 1 else 's'} done{shown}{after}{_clock(elapsed_s)} elapsed"
        )
    ran = done if ran is None else ran
    drawn = ""
    if bar:
        from tqdm import tqdm

        drawn = f" |{tqdm.format_meter(done, total, elapsed_s, bar_format='{bar:20}')}|"
    times = f"{_clock(elapsed_s)} elapsed" + (
        f", about {_clock((elapsed_s if job_s is None else job_s) / ran * (total - done))} left"
        if ran > 0
        else ""
    )
    jobs = f"{done} of {total} job{'' if total == 1 else 's'}"
    return f"flopsweep: {jobs} done{shown}{drawn + ' ' if drawn else after}{times}"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
