"""A plan job's outcome on the sweep's progress line (``i of N jobs done (job J): ok, 384 ranked, 66
dropped``): what it came to (:func:`plan_outcome`), kept as the job ends (:func:`note_outcome`, called by
:func:`flopsweep.job.lifecycle.planned_job`) and taken by the sweep process
(:func:`take_outcome`, called by :meth:`flopsweep.callbacks.SweepSummary.job_done`), in this process or
through :data:`OUTCOME_FILE` in the job's folder. Torch-free; free of the job's run path.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

from flopsweep.text import printable

log = logging.getLogger("flopsweep")

OUTCOMES: dict[str, str] = {}
"""Each plan job's outcome by its folder (absolute), set as it ends (:func:`note_outcome`, in the job's
process) and taken by the sweep's progress line (:meth:`flopsweep.callbacks.SweepSummary.job_done`), which
runs in that process under Hydra's basic launcher; a job run in another process (a Slurm or pool task)
leaves it in :data:`OUTCOME_FILE` instead."""

OUTCOME_FILE = Path(".hydra") / "plan_outcome.json"
"""A plan job's outcome in its folder, ``{"outcome": "ok, 384 ranked, 66 dropped"}``, for the progress line
of a sweep whose job ran in another process (``hydra/launcher=slurm``, ``slurm_local``, ``pool``: the
sweep process prints the line, :func:`take_outcome`), which removes it once read."""


def note_outcome(job_dir: str, record: dict[str, Any]) -> None:
    """Keep the outcome of the plan job in ``job_dir`` (:func:`plan_outcome`) for the progress line, in
    this process and in :data:`OUTCOME_FILE` (written atomically, never through a link); a folder that
    cannot take it leaves the line without it."""
    from flopsweep.files import atomic_write_json

    if (said := plan_outcome(record)) is not None:
        OUTCOMES[os.path.abspath(job_dir)] = said
        try:
            atomic_write_json(Path(job_dir) / OUTCOME_FILE, {"outcome": said})
        except OSError as exc:  # RecordUnwritable: read-only, full; no .hydra/
            log.debug("plan outcome not written in %s: %s", job_dir, exc)


def take_outcome(job_dir: str | os.PathLike[str]) -> str | None:
    """The outcome :func:`note_outcome` kept for ``job_dir`` (in this process, else in its
    :data:`OUTCOME_FILE`, read as a regular file of at most a record's size, never through a link), the file
    removed; None where none was."""
    from flopsweep.safe_read import RecordError, read_json

    said = OUTCOMES.pop(os.path.abspath(job_dir), None)
    path = Path(job_dir) / OUTCOME_FILE
    if said is None and os.path.lexists(path):
        try:
            kept = read_json(path).get("outcome")
            said = printable(kept) if isinstance(kept, str) and kept else None
        except RecordError:
            said = None
    try:
        path.unlink(missing_ok=True)  # a link is removed itself, never followed
    except OSError:
        pass
    return said


def plan_outcome(record: dict[str, Any]) -> str | None:
    """What a plan job came to, as the sweep's progress line says it after ``i of N jobs done (job J): ``:

    - over clusters (:func:`flopsweep.job.plandecide.decide_job`): ``ok, 384 ranked, 66 dropped``;
      ``no set-up left (over memory 15)`` (the top three dropped counts; ``none placed on its clusters``
      where the space gave none there); ``invalid: cost.usd_per_gpu_hour=1000000000000.0: ... Fix: ...``
      (its whole line, :func:`_reason`);
    - one row per job (:func:`flopsweep.job.dryrun.plan_job`): ``ok``, ``ok, does not fit`` (its
      estimate is over the GPU's memory), ``invalid: KEY=VALUE: why. Fix: ...``.

    None for a record of neither kind."""
    status = record.get("status")
    if status == "invalid":
        return f"invalid: {_reason(str((record.get('error') or {}).get('message') or ''))}"
    if status != "plan":
        return None
    if "ranked" in record:  # over clusters
        dropped = Counter(record.get("dropped") or {})
        if record["ranked"]:
            return f"ok, {record['ranked']} ranked, {sum(dropped.values())} dropped"
        counts = ", ".join(f"{k} {v}" for k, v in dropped.most_common(3)) or "none placed on its clusters"
        return f"no set-up left ({counts}{', ...' if len(dropped) > 3 else ''})"
    row = record.get("plan") or {}
    if row.get("status") == "invalid":
        return f"invalid: {_reason(str(row.get('reason') or ''))}"
    if row.get("status") == "ok":
        return "ok, does not fit" if row.get("fits") is False else "ok"
    return None


def _reason(line: str) -> str:
    """A refusal's whole line (``Invalid config: KEY=VALUE: why. Fix: ...``) less its ``Invalid config: ``,
    printable; the progress line bounds it (:func:`flopsweep.callbacks.progress_line`: cut at a word).
    It was ``KEY=VALUE`` alone: ``invalid: model='llama70b', 0:05 elapsed`` read as a reason cut at a
    comma."""
    return printable(line.removeprefix("Invalid config: "))
