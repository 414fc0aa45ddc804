"""One sweep job, from its config to ``metrics.json``: a package of one part per concern.

- :mod:`~flopsweep.job.lifecycle`: :func:`run_job`, the steps planned -> sized -> launched ->
  measured -> recorded, passing one :class:`~flopsweep.job.result.JobResult`;
- :mod:`~flopsweep.job.records`: the record assembly (every outcome's record, a lost Slurm job's);
- :mod:`~flopsweep.job.resume`: ``resume=true`` (which record is kept, which set aside);
- :mod:`~flopsweep.job.dryrun`, :mod:`~flopsweep.job.placement`, :mod:`~flopsweep.job.plantable`:
  ``plan=true``, where it places a job, and its ``plan.csv``; :mod:`~flopsweep.job.planprint`: what a
  plan of one row per job prints;
- :mod:`~flopsweep.job.hostcheck`: the launch's checks of the host.
- :mod:`~flopsweep.job.killed_rounds`: a later round of a set-up that SIGKILL ended, not run again.

The searches of ``batch=auto`` and ``search.model=largest`` are one :mod:`flopsweep.sizesearch`.

The names below are importable from ``flopsweep.job`` itself, each loaded from its part on first
use (PEP 562), so that the sweep process (the callback, the Slurm launcher) imports the part it
needs (``flopsweep.job.records``, ``flopsweep.job.plantable``) without the run path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flopsweep import lazy

if TYPE_CHECKING:
    from flopsweep.job.dryrun import plan_estimate, plan_job
    from flopsweep.job.hostcheck import check_free_host_memory
    from flopsweep.job.lifecycle import run_job, search_cut_short
    from flopsweep.job.placement import NO_GPU_NOTE, job_libraries, plan_environment, warn_plan_gpu
    from flopsweep.job.planprint import plan_invalid_line, plan_table
    from flopsweep.job.plantable import start_plan_file
    from flopsweep.job.records import LAST_RECORD, failure_line, record_lost_job
    from flopsweep.job.result import JobInfo, JobResult
    from flopsweep.job.resume import (
        comparable_config,
        ok_record,
        other_run_problem,
        resumed_record,
        set_aside,
    )

PARTS = {
    "run_job": "lifecycle",
    "search_cut_short": "lifecycle",
    "JobInfo": "result",
    "JobResult": "result",
    "LAST_RECORD": "records",
    "failure_line": "records",
    "record_lost_job": "records",
    "comparable_config": "resume",
    "ok_record": "resume",
    "other_run_problem": "resume",
    "resumed_record": "resume",
    "set_aside": "resume",
    "plan_job": "dryrun",
    "plan_estimate": "dryrun",
    "NO_GPU_NOTE": "placement",
    "plan_environment": "placement",
    "job_libraries": "placement",
    "warn_plan_gpu": "placement",
    "plan_table": "planprint",
    "plan_invalid_line": "planprint",
    "start_plan_file": "plantable",
    "check_free_host_memory": "hostcheck",
}
"""Each name ``flopsweep.job`` hands on, and the part that defines it."""

__all__ = [
    "JobInfo",
    "JobResult",
    "LAST_RECORD",
    "NO_GPU_NOTE",
    "check_free_host_memory",
    "comparable_config",
    "failure_line",
    "job_libraries",
    "ok_record",
    "other_run_problem",
    "resumed_record",
    "plan_environment",
    "plan_estimate",
    "plan_invalid_line",
    "plan_job",
    "plan_table",
    "record_lost_job",
    "run_job",
    "search_cut_short",
    "set_aside",
    "start_plan_file",
    "warn_plan_gpu",
]


def __getattr__(name: str) -> Any:
    part = PARTS.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(lazy.module(f"{__name__}.{part}"), name)
