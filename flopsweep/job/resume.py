"""``resume=true``: which record in a job directory is kept (an ``ok`` one of the same config),
which is run again and lends its searches' probes, and how the others are set aside (never lost).

"The same config" is :func:`flopsweep.identity.same_job`: the record's config without the run-control
keys and the sizes the searches find, in today's form (:func:`comparable_config`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flopsweep import identity
from flopsweep import record as rec
from flopsweep.config import RunConfig
from flopsweep.files import RecordExistsError
from flopsweep.free_folder import another
from flopsweep.identity import defining_overrides, same_overrides
from flopsweep.override_parsing import set_key
from flopsweep.plausible import usable_problems
from flopsweep.safe_read import RecordError, read_json
from flopsweep.text import printable

log = logging.getLogger("flopsweep")

SWEEP_DIR: dict[str, str | None] = {"path": None}
"""The folder of the sweep this process runs (``hydra.sweep.dir`` resolved, set by the callback's
``on_multirun_start``), else None: what :func:`resume_hint` names for an interrupted sweep."""


def ok_record(path: Path, cfg: RunConfig, *, quiet: bool = False) -> dict[str, Any] | None:
    """The record at ``path`` when it is ``ok``, was made with the same (validated) config as
    ``cfg`` and passes the checks the analysis makes (:func:`flopsweep.plausible.usable_problems`),
    else None (also when it is missing or unreadable). An ``ok`` record that fails them (a
    ``model_tflops_per_device`` edited to 99, ``"tokens_per_s": "fast"``) is run again, said in one
    line naming the file and the first failed check (not with ``quiet``: the sweep's check before any job,
    whose job says it)."""
    try:
        record = read_json(Path(path))
        problems = usable_problems(record)
        if isinstance(record, dict) and record.get("status") == "ok" and problems:
            if quiet:
                return None
            log.warning(
                "resume=true: running again: %s fails its checks: %s", path, printable(problems[0])[:300]
            )
            return None
        same = identity.same_job(record, json.loads(json.dumps(asdict(cfg))))
        return record if record["status"] == "ok" and same else None
    except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def skipped_record(
    path: Path, cfg: RunConfig, *, killed: bool = True, quiet: bool = False
) -> tuple[dict[str, Any], str | None] | None:
    """What ``resume=true`` keeps at ``path`` (a job's ``metrics.json``) instead of running the job of ``cfg``
    (validated: :func:`flopsweep.plan.plan`'s), with the line that says so, else None (the job runs): an
    ``ok`` record of this config (:func:`ok_record`; its line said at INFO), else, under ``resume=true`` and
    with ``killed``, a record SIGKILL ended or a round skipped for one
    (:func:`flopsweep.job.killed_rounds.kept_on_resume`; its line a warning, None for a later round). The one
    decision both the job (:func:`flopsweep.job.lifecycle.planned`) and the sweep's check before any job
    (``hydra_plugins.flopsweep_repeats.once``: only the jobs that run are checked) make."""
    from flopsweep.job.killed_rounds import kept_on_resume

    done = ok_record(path, cfg, quiet=quiet)  # quiet: the sweep's check; the job says it once
    if done is not None:
        run = done["run"]["id"]
        return done, f"skipped (resume=true): {path} already holds an ok record of this config (run {run})"
    if cfg.resume and killed and (kept := kept_on_resume(path, json.loads(json.dumps(asdict(cfg))))):
        return kept[0], None if kept[1] is None else f"skipped: {kept[1]}"
    return None


def resumed_record(path: Path, cfg: RunConfig) -> dict[str, Any] | None:
    """The record at ``path`` that ``resume=true`` runs again, when its searches may be taken over:
    readable, not ``ok``, made with the same (validated) config as ``cfg`` by
    :func:`comparable_config` (the sizes the searches find aside); else None."""
    try:
        record = read_json(Path(path))
        same = identity.same_job(record, json.loads(json.dumps(asdict(cfg))))
        return record if record["status"] != "ok" and same and isinstance(record.get("run"), dict) else None
    except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def comparable_config(config: dict[str, Any]) -> dict[str, Any]:
    """A record's ``config`` without the keys that do not change what a run measures, in today's
    form (:func:`flopsweep.identity.comparable_config`)."""
    return identity.comparable_config(config)


def set_aside(path: Path) -> Path | None:
    """Rename an existing record to ``metrics.<status>-<run id>.json``, the job's
    ``traceback_rank<N>.txt`` files to ``traceback_rank<N>.<status>-<run id>.txt`` and a
    ``batch=auto`` search's ``batch_search/`` to ``batch_search.<status>-<run id>/`` (so
    ``search.model=largest``'s ``model_search/``).

    The analysis reads only files named ``metrics.json``, so a record set aside
    leaves the tables but stays on disk. Returns the new path, or None when there
    was no record. An unreadable record is set aside as ``metrics.unreadable-<hex>.json``.
    Without a record, the files of an attempt that left none (a job killed with SIGKILL: its
    ranks' ``traceback_rank<N>.txt``, its searches' folders) are set aside as
    ``traceback_rank<N>.unrecorded-<hex>.txt`` (:func:`_files_aside`), never shown beside the new record.
    """
    path = Path(path)
    if not path.exists():
        if not os.path.lexists(path):
            _files_aside(path.parent, f"unrecorded-{uuid.uuid4().hex[:12]}")
        return None
    try:
        record = read_json(path)
        status, run_id = record["status"], str(record["run"]["id"])
        if status not in rec.STATUSES or not re.fullmatch(r"[\w-]{1,64}", run_id, re.ASCII):  # a safe name
            raise ValueError(f"not a record's status and run id: {status!r}, {run_id!r}")
        label = f"{status}-{run_id}"
    except (RecordError, OSError, ValueError, KeyError, TypeError) as exc:
        label = f"unreadable-{uuid.uuid4().hex[:12]}"
        said = (
            f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) and exc.args else str(exc) or repr(exc)
        )
        why = printable(said)[:300]
    else:
        why = ""
    aside = path.with_name(f"metrics.{label}.json")
    if aside.exists():
        raise RecordExistsError(rec.exists_message(aside))
    os.rename(path, aside)
    _files_aside(path.parent, label)
    # an unreadable one says why (a byte-order mark: the one reader's words, safe_read.json_problem; #608)
    log.warning("moved the previous record aside: %s%s", aside, f" (unreadable: {why})" if why else "")
    return aside


_TRACEBACK = re.compile(r"traceback_rank\d+\.txt")


def _files_aside(job_dir: Path, label: str) -> list[Path]:
    """Rename the job's ``traceback_rank<N>.txt`` files to ``traceback_rank<N>.<label>.txt`` and its
    searches' ``batch_search/`` and ``model_search/`` folders to ``<name>.<label>/`` (links renamed, never
    followed); the new paths. Nothing when the folder cannot be listed (a new job's, still missing)."""
    moved = []
    try:
        names = sorted(os.listdir(job_dir))
    except OSError:
        return moved
    for name in names:
        old = Path(job_dir) / name
        if _TRACEBACK.fullmatch(name):
            new = old.with_name(f"{old.stem}.{label}.txt")
        elif name in ("batch_search", "model_search") and old.is_dir() and not old.is_symlink():
            new = old.with_name(f"{name}.{label}")  # the searches' probes and their tracebacks
        else:
            continue
        old.rename(new)
        moved.append(new)
    if moved and label.startswith("unrecorded-"):
        log.warning(
            "moved aside the files of an attempt that left no record: %s", ", ".join(p.name for p in moved)
        )
    return moved


def other_run_problem(path: Path, overrides: list[str], *, plan: bool = False) -> str | None:
    """The refusal of ``resume=true`` when ``path`` holds the record of another sweep's job (or
    another single run): its :func:`defining_overrides` differ from this job's in a key or a value
    (:func:`same_overrides`: ``lr=0.035`` is ``lr=0.0350``, in any order). Resuming would
    move that record aside, where the analysis never reads it. None when there is no readable
    record, or it is this job's (a failed or changed run of it is set aside and run again). With ``plan``
    (a single ``plan=true`` into ``path``'s folder): the refusal of a plan that would replace that run's
    ``.hydra/`` files with its own config."""
    try:
        old = read_json(path) if path.is_file() else None
        theirs = defining_overrides(list(old["run"]["overrides"])) if old is not None else None
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: set aside and re-run, as before
    ours = defining_overrides(list(overrides))
    if theirs is None or same_overrides(theirs, ours):
        return None
    shown = printable(" ".join(theirs)[:300]) or "defaults"
    if plan:
        from flopsweep.shown_overrides import folder_word  # a comma or space in it: written as typed back

        return (
            f"{folder_word('hydra.run.dir', path.parent)}: {path} is the record of another run ({shown}; "
            f"this plan: {printable(' '.join(ours)[:300]) or 'defaults'}); the plan would replace that run's "
            f".hydra/ files with its own config. Fix: {another(path.parent)}"
        )
    folder = path.parent.parent if path.parent.name.isdigit() else path.parent  # a sweep's job: its sweep
    return (
        f"{path} is the record of another sweep or run ({shown}; this job: "
        f"{printable(' '.join(ours)[:300]) or 'defaults'}); resume=true continues only the sweep that "
        f"wrote it. Fix: {another(folder, either=True)}"
    )


def resume_hint(argv: list[str], sweep_dir: str | None) -> str:
    """What finishes an interrupted sweep, for its last line (``run.py``'s ``interrupted_message``):
    ``"; the same command with resume=true finishes the sweep (its ok records are kept)"``; where ``argv``
    does not name the folder (the default one is new each time: a date and time) ``and
    hydra.sweep.dir=DIR`` is added, and a value the command gives that would then be given twice (refused:
    :func:`flopsweep.override_sweeps.repeated_sweep_problem`) is named as replaced (``resume=true in place of
    resume=false``, ``hydra.sweep.dir=DIR in place of hydra.sweep.dir=out/${now:%H}``); ``"; the same
    command again finishes ..."`` where it has both already. ``""`` for a single run (no ``-m``), or when
    the sweep's folder ``sweep_dir`` (resolved, as Hydra made it) is unknown or does not exist.
    ``argv``: the command's overrides."""
    from flopsweep.flags import is_multirun

    if not is_multirun(argv) or not sweep_dir or not os.path.isdir(sweep_dir):
        return ""
    typed = {set_key(a): a for a in argv if "=" in a}  # the last of each key
    parts = []
    resume = typed.get("resume")
    if resume is None:
        parts.append("resume=true")
    elif resume.partition("=")[2].strip().strip("'\"").lower() != "true":
        parts.append(f"resume=true in place of {printable(resume)}")
    folder = typed.get("hydra.sweep.dir")
    value = folder.partition("=")[2].strip().strip("'\"") if folder else ""
    from flopsweep.shown_overrides import string_word  # a comma in the folder: Hydra's quotes too

    wanted = printable(string_word("hydra.sweep.dir", sweep_dir))
    if folder is None or not value:
        parts.append(wanted)
    elif "${" in value:
        parts.append(f"{wanted} in place of {printable(folder)}")
    if not parts:
        return "; the same command again finishes the sweep (resume=true keeps its ok records)"
    return f"; the same command with {' and '.join(parts)} finishes the sweep (its ok records are kept)"
