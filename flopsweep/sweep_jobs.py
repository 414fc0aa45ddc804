"""The jobs of a sweep as Hydra's basic sweeper numbers them, from its ``multirun.yaml``'s ``hydra`` node
(torch-free; :mod:`flopsweep.folders` refuses a folder holding another sweep's records by them, and
``analysis.missing_jobs`` counts the jobs a sweep cut short left without a record). Apart from
:mod:`flopsweep.folders` so that the analysis imports no command-line module (session 40: the analysis,
the folders' refusals and the command line had made one import cycle).
"""

from __future__ import annotations

from typing import Any

MAX_SWEEP_JOBS = 10_000
"""A sweep of more jobs than this is not expanded (:func:`job_sequence`: None; each job checks its own)."""
MAX_MULTIRUN_BYTES = 16 * 2**20
"""The most bytes of a ``multirun.yaml`` read (16 MiB)."""


def parsed_job(overrides: list[str]) -> tuple | None:
    """A hashable form of ``overrides`` that :func:`flopsweep.identity.same_overrides` would call equal
    (:func:`flopsweep.identity.parsed_overrides`), the round key (``repeat``) left out: a sweep's rounds
    are its own jobs."""
    from flopsweep.identity import defining_overrides, parsed_overrides
    from flopsweep.override_parsing import override_key

    kept = [o for o in defining_overrides(overrides) if override_key(o) != "repeat"]
    return parsed_overrides(kept)


def sweep_jobs(hydra: dict[str, Any]) -> set[tuple] | None:
    """Each job's overrides of this sweep (``hydra``, its config's ``hydra`` node as a mapping), as
    Hydra's basic sweeper expands the sweeper's ``params`` and the command line
    (``BasicSweeper.split_arguments``), in :func:`parsed_job` form; None when they cannot be told (an
    Optuna study, the tuner, a sweep of more than :data:`MAX_SWEEP_JOBS` jobs, an override that does
    not parse)."""
    jobs = job_sequence(hydra)
    return None if jobs is None else set(jobs)


def job_sequence(hydra: dict[str, Any]) -> list[tuple] | None:
    """:func:`sweep_jobs` in the sweep's job order (job 0 first): the first axis outermost, the sweeper's
    ``params`` before the command line's axes, as ``BasicSweeper.split_arguments`` numbers them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    from flopsweep.override_parsing import override_parser

    sweeper = hydra.get("sweeper") or {}
    if sweeper.get("n_trials") is not None or str(sweeper.get("_target_", "")).endswith("TuneSweeper"):
        return None
    lines = [f"{k}={v}" for k, v in dict(sweeper.get("params") or {}).items()]
    lines += [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    try:
        parsed = override_parser().parse_overrides(lines)
        total = 1
        for override in parsed:
            if override.is_sweep_override():
                total *= len(list(override.sweep_string_iterator()))
        if total > MAX_SWEEP_JOBS:
            return None
        jobs = [parsed_job(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except Exception:  # noqa: BLE001 - not told here: each job still refuses a foreign record itself
        return None
    return None if None in jobs else jobs
