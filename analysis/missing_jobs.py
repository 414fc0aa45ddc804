"""The jobs of a sweep folder named to the analysis that left no record (docs/analysis.md, "A sweep cut
short"): a sweep killed after its first record (SIGKILL, a lost node) was read as a sweep of that one run,
``1 run (1 ok)``, the others unsaid. Torch-free.

The sweep's jobs are counted from its ``multirun.yaml`` as Hydra's basic sweeper expands them
(:func:`flopsweep.sweep_jobs.job_sequence`), ``repeats=`` rounds each; a job has a record when its folder
(``S/N``, Hydra's default ``hydra.sweep.subdir``) holds a regular ``metrics.json``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flopsweep.record import METRICS_FILE

__all__ = ["MAX_NAMED", "missing_lines"]

MAX_NAMED = 10
"""The most job numbers a line lists (then how many more)."""


def _hydra(sweep: Path) -> dict[str, Any] | None:
    """The ``hydra`` node of ``sweep``'s ``multirun.yaml`` (read bounded, no link followed), else None."""
    import yaml

    from flopsweep.safe_read import RecordError, read_regular
    from flopsweep.sweep_jobs import MAX_MULTIRUN_BYTES

    try:
        node = yaml.safe_load(read_regular(sweep / "multirun.yaml", MAX_MULTIRUN_BYTES)) or {}
    except (RecordError, OSError, yaml.YAMLError):
        return None
    hydra = node.get("hydra") if isinstance(node, dict) else None
    return hydra if isinstance(hydra, dict) else None


def _rounds(hydra: dict[str, Any]) -> int:
    """The ``repeats=`` of the sweep's command line or its sweep file's axes (1 when not given)."""
    from flopsweep.override_parsing import set_key, split_override

    lines = [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    lines += [f"{k}={v}" for k, v in dict((hydra.get("sweeper") or {}).get("params") or {}).items()]
    for line in reversed(lines):
        if set_key(line) == "repeats" and (value := split_override(line)[2].strip()).isdigit():
            return max(1, int(value))
    return 1


def _resume_command(sweep: Path, hydra: dict[str, Any]) -> str:
    """``flopsweep -m TASK... hydra.sweep.dir=S resume=true``: the sweep's own command line, resumed, its
    own ``resume`` (``resume=false``, ``++resume=false``) left out."""
    from flopsweep.override_parsing import override_key

    task = [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    # its resume in any spelling (++resume=false too: given twice, the fix was refused); no hydra.* is in it
    task = [o for o in task if override_key(o) != "resume"]
    task.append(f"hydra.sweep.dir={os.path.abspath(sweep)}")
    return " ".join(["flopsweep", "-m", *(shlex.quote(o) for o in task), "resume=true"])


def missing_lines(paths: Iterable[str]) -> list[str]:
    """One line for each folder of ``paths`` that holds a sweep's ``multirun.yaml`` and whose jobs did not
    all leave a record: ``2 of 4 jobs of S have no record (jobs 2, 3): the sweep stopped before them (killed,
    or still running). Fix: flopsweep -m ... hydra.sweep.dir=S resume=true (re-runs each job without an ok
    record), then name S again``. None for a sweep whose jobs cannot be counted (an Optuna study, the tuner,
    a custom ``hydra.sweep.subdir``)."""
    from flopsweep.sweep_jobs import job_sequence

    out = []
    for path in paths:
        sweep = Path(path)
        if not os.path.isdir(sweep) or (hydra := _hydra(sweep)) is None:
            continue
        subdir = str((hydra.get("sweep") or {}).get("subdir", "${hydra.job.num}"))
        if subdir != "${hydra.job.num}" or (jobs := job_sequence(hydra)) is None:
            continue
        total = len(jobs) * _rounds(hydra)
        missing = [n for n in range(total) if not _has_record(sweep / str(n))]
        if not missing:
            continue
        named = ", ".join(map(str, missing[:MAX_NAMED])) + (", ..." if len(missing) > MAX_NAMED else "")
        many = len(missing) > 1
        out.append(
            f"{len(missing)} of {total} jobs of {path} have no record (job{'s' if many else ''} {named}): "
            f"the sweep stopped before {'they' if many else 'it'} ended (killed, or still running). Fix: "
            f"{_resume_command(sweep, hydra)} (re-runs each job without an ok record), then name {path} again"
        )
    return out


def _has_record(job: Path) -> bool:
    try:
        return os.path.isfile(job / METRICS_FILE) and not os.path.islink(job / METRICS_FILE)
    except OSError:
        return False
