"""The sweep's progress line (:func:`progress_line`), printed by
:meth:`flopsweep.callbacks.SweepSummary.job_done` as each job ends: the jobs done, the one that ended
and its status, the time elapsed and an estimate of the time left from the jobs that ran. Torch-free."""

from __future__ import annotations


def progress_line(
    done: int,
    total: int | None,
    elapsed_s: float,
    *,
    status: str | None = None,
    bar: bool = False,
    job: int | None = None,
    ran: int | None = None,
) -> str:
    """``flopsweep: 3 of 12 jobs done (job 7): ok, 2:31 elapsed, about 7:33 left`` (the estimate: the
    elapsed time per job that ran, times the jobs left). ``ran``: how many of the ``done`` jobs ran (None:
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

    line = _progress(done, total, elapsed_s, status, bar, job, ran)
    if status and len(line) > MAX_LINE:
        line = _progress(
            done, total, elapsed_s, shorten(status, len(status) - len(line) + MAX_LINE), bar, job, ran
        )
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
        f", about {_clock(elapsed_s / ran * (total - done))} left" if ran > 0 else ""
    )
    jobs = f"{done} of {total} job{'' if total == 1 else 's'}"
    return f"flopsweep: {jobs} done{shown}{drawn + ' ' if drawn else after}{times}"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
