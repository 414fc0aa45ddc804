"""Whose folder a sweep or single run would write into, told before anything is written there.

:func:`nested_folder_problem`: a sweep or run inside another sweep's or run's folder (an ancestor holding
``multirun.yaml``, a ``metrics.json`` or ``.hydra/``), or a sweep whose folder holds another sweep's folder
below it; the analysis of either folder would mix the two. :func:`foreign_record_problem`: ``resume=true``
onto job records that no job of this sweep wrote. Both are called by
:func:`flopsweep.callbacks.sweep_folder_problem` and :func:`flopsweep.callbacks.run_folder_problem`, which
refuse with exit status 2. Nothing is written; links are never followed; every scan is bounded. Torch-free.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flopsweep.files import RecordError, read_json
from flopsweep.hydrafiles import MULTIRUN_FILE
from flopsweep.record import METRICS_FILE
from flopsweep.text import printable

OWNER_MARKS = (MULTIRUN_FILE, METRICS_FILE, ".hydra")
"""What makes a folder a sweep's (``multirun.yaml``) or a run's or job's (``metrics.json``, ``.hydra/``)."""
MAX_BELOW_DEPTH = 3
"""How many levels below a sweep's folder are looked at for another sweep's ``multirun.yaml``
(``S/0/sub/multirun.yaml`` is two)."""
MAX_BELOW_ENTRIES = 100_000
"""At most this many entries below a sweep's folder are looked at."""
MAX_SWEEP_JOBS = 10_000
"""A sweep of more jobs than this is not expanded for :func:`foreign_record_problem` (each job checks its
own)."""
MAX_RECORDS_CHECKED = 1_000
"""At most this many job records are read by :func:`foreign_record_problem`."""


def _owner_above(folder: Path) -> tuple[Path, Path] | None:
    """The nearest folder above ``folder`` (its absolute path, not resolved) that holds one of
    :data:`OWNER_MARKS`, and that mark's path; None when none does."""
    for above in Path(os.path.abspath(folder)).parents:
        for mark in OWNER_MARKS:
            if os.path.lexists(above / mark):
                return above, above / mark
    return None


def _sweep_below(folder: Path) -> Path | None:
    """A ``multirun.yaml`` below ``folder`` (not its own), at most :data:`MAX_BELOW_DEPTH` levels down,
    links not followed, ``.hydra/`` folders skipped; None when there is none (or ``folder`` is missing)."""
    todo, seen = [(Path(folder), 0)], 0
    while todo:
        here, depth = todo.pop()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_BELOW_ENTRIES:
                        return None
                    if depth and entry.name == MULTIRUN_FILE:
                        return Path(entry.path)
                    if (
                        depth < MAX_BELOW_DEPTH
                        and entry.name != ".hydra"
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        todo.append((Path(entry.path), depth + 1))
        except OSError:
            continue
    return None


def nested_folder_problem(key: str, folder: Path, *, sweep: bool) -> str | None:
    """The one-line refusal of ``key=folder`` (``hydra.sweep.dir`` or ``hydra.run.dir``) inside another
    sweep's or run's folder (:func:`_owner_above`), or, for a sweep (``sweep``), of a folder that holds
    another sweep's folder below it (:func:`_sweep_below`): the analysis of the outer folder would count
    both sweeps' records as one. None otherwise."""
    if found := _owner_above(folder):
        above, mark = found
        return (
            f"{key}={folder} is inside another sweep's or run's folder {above} ({mark} is there); its "
            f"analysis would mix the two. Fix: choose a {key} outside {above}"
        )
    if sweep and (below := _sweep_below(folder)):
        return (
            f"{key}={folder} holds another sweep's folder {below.parent} ({below} is there); its analysis "
            f"would mix the two. Fix: choose a new {key}, one that holds no other sweep's folder"
        )
    return None


def _parsed(overrides: list[str]) -> tuple | None:
    """A hashable form of ``overrides`` that :func:`flopsweep.identity.same_overrides` would call equal
    (:func:`flopsweep.identity.parsed_overrides`), the round key (``repeat``) left out: a sweep's rounds
    are its own jobs."""
    from flopsweep.identity import defining_overrides, parsed_overrides

    kept = [o for o in defining_overrides(overrides) if o.split("=", 1)[0].lstrip("+~") != "repeat"]
    return parsed_overrides(kept)


def _sweep_jobs(hydra: dict[str, Any]) -> set[tuple] | None:
    """Each job's overrides of this sweep (``hydra``, its config's ``hydra`` node as a mapping), as
    Hydra's basic sweeper expands the sweeper's ``params`` and the command line
    (``BasicSweeper.split_arguments``), in :func:`_parsed` form; None when they cannot be told (an
    Optuna study, the tuner, a sweep of more than :data:`MAX_SWEEP_JOBS` jobs, an override that does
    not parse)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = hydra.get("sweeper") or {}
    if sweeper.get("n_trials") is not None or str(sweeper.get("_target_", "")).endswith("TuneSweeper"):
        return None
    lines = [f"{k}={v}" for k, v in dict(sweeper.get("params") or {}).items()]
    lines += [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
        total = 1
        for override in parsed:
            if override.is_sweep_override():
                total *= len(list(override.sweep_string_iterator()))
        if total > MAX_SWEEP_JOBS:
            return None
        jobs = {_parsed(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch}
    except Exception:  # noqa: BLE001 - not told here: each job still refuses a foreign record itself
        return None
    return None if None in jobs else jobs


def foreign_record_problem(sweep_dir: Path, hydra: dict[str, Any], records: list[Path]) -> str | None:
    """The one-line refusal of ``resume=true`` into ``sweep_dir`` when one of its job ``records``
    (``S/N/metrics.json``) is no job's of this sweep (its defining overrides match none of
    :func:`_sweep_jobs`): resuming would set it aside, and the sweep's ``multirun.yaml`` would claim the
    folder. None when all are this sweep's, a record is unreadable (the job sets it aside), or the jobs
    cannot be told (:func:`_sweep_jobs`). At most :data:`MAX_RECORDS_CHECKED` records are read."""
    if not records or (jobs := _sweep_jobs(hydra)) is None:
        return None
    for path in records[:MAX_RECORDS_CHECKED]:
        try:
            theirs = [str(o) for o in read_json(path)["run"]["overrides"]]
        except (RecordError, OSError, ValueError, KeyError, TypeError):
            continue
        if (ours := _parsed(theirs)) is None or ours in jobs:
            continue
        from flopsweep.identity import defining_overrides

        shown = printable(" ".join(defining_overrides(theirs))[:300]) or "defaults"
        return (
            f"hydra.sweep.dir={sweep_dir}: {path} is the record of another sweep or run ({shown}), no job "
            "of this sweep; resume=true continues only the sweep that wrote it. Fix: choose a new "
            "hydra.sweep.dir"
        )
    return None
