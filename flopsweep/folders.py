"""Whose folder a sweep or single run would write into, told before anything is written there.

:func:`nested_folder_problem`: a sweep or run inside another sweep's or run's folder (an ancestor holding
``multirun.yaml``, a ``metrics.json`` or ``.hydra/``), or a sweep whose folder holds another sweep's folder
below it; the analysis of either folder would mix the two. :func:`foreign_record_problem`: ``resume=true``
onto job records that no job of this sweep wrote. Both are called by :func:`sweep_folder_problem`
(with :func:`other_sweep_problem`: another sweep's ``multirun.yaml``) and :func:`run_folder_problem`, on
which :class:`flopsweep.callbacks.SweepSummary` refuses with exit status 2. A ``plan.csv`` a
plan did not make (:func:`plan_file_problem`) is refused before Hydra and in the callback. Nothing is
written; links are never followed; every scan is bounded. Torch-free.
"""

from __future__ import annotations

import itertools
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from flopsweep.free_folder import another, free_folder
from flopsweep.hydrafiles import MAX_JOB_FOLDERS, MULTIRUN_FILE
from flopsweep.record import METRICS_FILE
from flopsweep.safe_read import RecordError, read_json
from flopsweep.shown_overrides import folder_word, string_word
from flopsweep.sweep_jobs import MAX_MULTIRUN_BYTES, job_sequence, parsed_job, sweep_jobs  # noqa: F401 - importable here
from flopsweep.text import article, printable
from flopsweep.unstarted import JOB_LOG

OWNER_MARKS = (MULTIRUN_FILE, METRICS_FILE, ".hydra")
"""What makes a folder a sweep's (``multirun.yaml``) or a run's or job's (``metrics.json``, ``.hydra/``)."""
MAX_BELOW_DEPTH = 3
"""How many levels below a sweep's folder are looked at for another sweep's ``multirun.yaml``
(``S/0/sub/multirun.yaml`` is two)."""
MAX_BELOW_ENTRIES = 100_000
"""At most this many entries below a sweep's folder are looked at."""
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


FOLDER_KEYS = ("hydra.sweep.dir", "hydra.run.dir")
"""The command line's folder keys whose value Hydra takes as written: a ``~`` is no home there."""


def home_tilde_problem(overrides: list[str], *, in_file: bool = False) -> str | None:
    """The one-line refusal of a :data:`FOLDER_KEYS` value that starts with ``~`` (``'hydra.sweep.dir=~/x'``,
    quoted so the shell left it): Hydra does not expand it and made a folder named ``~`` in the current
    folder. The fix writes the path out (``$HOME/x``, which the shell expands), else None. With ``in_file``
    the values are a sweep file's (``hydra: {sweep: {dir: ~/x}}``, which no shell expands): the fix is
    ``${oc.env:HOME}/x`` (Hydra resolves it) or the path itself."""
    for override in overrides:
        key, eq, value = override.partition("=")
        folder = value.strip().strip("'\"")
        if eq and key.lstrip("+") in FOLDER_KEYS and folder.startswith("~"):
            user, _, rest = folder[1:].partition("/")
            home = "$HOME" if not user else os.path.expanduser(f"~{user}")
            example = f"{home}/{rest}" if rest else home
            key = key.lstrip("+")
            why = "the shell leaves it when quoted, and Hydra"
            # $HOME left to the shell where the rest needs no quotes; else the path written out, quoted
            plain = string_word(key, f"/{rest}") == f"{key}=/{rest}"
            fix = f"{key}={example}" if plain else folder_word(key, os.path.expanduser(folder))
            if in_file:
                home = "${oc.env:HOME}" if not user else home
                why = "Hydra takes a file's value as written, and"
                written = f"{home}/{rest}" if rest else home
                # quoted: a ${...} value is valid YAML in a flow mapping ({dir: ...}) only inside quotes
                fix = f'{key.rpartition(".")[2]}: "{written}" in the file ({os.path.expanduser(folder)})'
            return (
                f"Invalid config: {key}={folder}: a leading ~ is not expanded ({why} would make "
                f"a folder named {folder.split('/')[0]} here). Fix: write the path out, e.g. {fix}"
            )
    return None


def nested_folder_problem(key: str, folder: Path, *, sweep: bool) -> str | None:
    """The one-line refusal of ``key=folder`` (``hydra.sweep.dir`` or ``hydra.run.dir``) inside another
    sweep's or run's folder (:func:`_owner_above`), or, for a sweep (``sweep``), of a folder that holds
    another sweep's folder below it (:func:`_sweep_below`): the analysis of the outer folder would count
    both sweeps' records as one. None otherwise."""
    if found := _owner_above(folder):
        above, mark = found
        return (
            f"{folder_word(key, folder)} is inside another sweep's or run's folder {above} ({mark} is "
            f"there); its analysis would mix the two. Fix: choose {article(key)} outside {above}, e.g. "
            f"{free_folder(above, key)}"
        )
    if sweep and (below := _sweep_below(folder)):
        return (
            f"{folder_word(key, folder)} holds another sweep's folder {below.parent} ({below} is there); its "
            f"analysis would mix the two. Fix: {another(folder, key)}, one that holds no other sweep's folder"
        )
    return None


def foreign_record_problem(sweep_dir: Path, hydra: dict[str, Any], records: list[Path]) -> str | None:
    """The one-line refusal of ``resume=true`` into ``sweep_dir`` when one of its job ``records``
    (``S/N/metrics.json``) is no job's of this sweep (its defining overrides match none of
    :func:`_sweep_jobs`): resuming would set it aside, and the sweep's ``multirun.yaml`` would claim the
    folder. None when all are this sweep's, a record is unreadable (the job sets it aside), or the jobs
    cannot be told (:func:`_sweep_jobs`). At most :data:`MAX_RECORDS_CHECKED` records are read."""
    if not records or (jobs := sweep_jobs(hydra)) is None:
        return None
    for path in records[:MAX_RECORDS_CHECKED]:
        try:
            theirs = [str(o) for o in read_json(path)["run"]["overrides"]]
        except (RecordError, OSError, ValueError, KeyError, TypeError):
            continue
        if (ours := parsed_job(theirs)) is None or ours in jobs:
            continue
        from flopsweep.identity import defining_overrides
        from flopsweep.shown_overrides import shown as typed

        shown = printable(typed(defining_overrides(theirs))[:300]) or "defaults"
        return (
            f"{folder_word('hydra.sweep.dir', sweep_dir)}: {path} is the record of another sweep or run "
            f"({shown}), no job of this sweep; resume=true continues only the sweep that wrote it. Fix: "
            f"{another(sweep_dir, 'hydra.sweep.dir')}"
        )
    return None


def _sweep_identity(hydra: Any) -> dict[str, Any]:
    """What makes a sweep the same sweep: its primary config, its defining command-line overrides
    (:func:`flopsweep.identity.defining_overrides`: ``resume``, ``fault``, ``hydra.*`` ... aside) and its
    sweeper's ``params`` (a ``+sweep=`` file's axes)."""
    from flopsweep.identity import defining_overrides

    params = hydra.get("sweeper", {}).get("params") or {}
    return {
        "config": hydra.get("job", {}).get("config_name"),
        "overrides": defining_overrides([str(o) for o in hydra.get("overrides", {}).get("task") or []]),
        "params": defining_overrides([f"{k}={v}" for k, v in dict(params).items()]),
    }


def other_sweep_problem(sweep_dir: Path, hydra: Any, *, resume: bool = True) -> str | None:
    """The one-line refusal of a sweep into a directory whose ``multirun.yaml`` is another sweep's
    (other config, overrides or sweeper params than ``hydra``, this sweep's ``hydra`` node as a
    mapping): the sweeper would overwrite it before the first job, and that sweep could no longer be
    resumed. None when there is no such file or it is this sweep's (overrides and params compared by
    key and parsed value, :func:`flopsweep.identity.same_overrides`: ``lr=0.035,0.07`` is
    ``lr=0.0350,0.07``). With ``resume`` a ``multirun.yaml`` that is a link, a FIFO or not YAML is
    refused too (it names no sweep to continue); without, it is left to the sweeper, which replaces
    it (never written through). Read with :func:`flopsweep.safe_read.read_regular` (no link followed,
    bounded)."""
    import yaml

    from flopsweep.safe_read import read_regular

    path = Path(sweep_dir) / MULTIRUN_FILE
    if not os.path.lexists(path):
        return None
    new = another(sweep_dir, "hydra.sweep.dir")
    fix = f"Fix: {new}, or resume with the command line that started this sweep"
    if not resume:
        fix = (
            f"Fix: {new}, or continue that sweep: resume=true with the command line that started it "
            "(hydra.overrides.task in its multirun.yaml)"
        )
    try:
        old = yaml.safe_load(read_regular(path, MAX_MULTIRUN_BYTES)) or {}
        theirs = _sweep_identity(old["hydra"])
    except (RecordError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
        if not resume:
            return None
        why = str(exc).splitlines()[0] if isinstance(exc, RecordError) else "not a sweep's config"
        # session 37: the fix was "resume with the command line that started this sweep", refused again
        # the same way; with the file gone each job's record is still checked against that job's own config
        return (
            f"{path} is unreadable ({why}); resume=true continues only the sweep that wrote it. Fix: to keep "
            f"the jobs' records, restore the file or remove it ({remove_command(path)}) and resume with "
            "the command line that started this sweep (a job whose record holds another config is refused), "
            f"or {new}"
        )
    from flopsweep.identity import same_overrides

    ours = _sweep_identity(hydra)
    differ = [
        f"{key} {_shown(theirs[key])} there, {_shown(ours[key])} here"
        for key in ours
        if not (theirs[key] == ours[key] if key == "config" else same_overrides(theirs[key], ours[key]))
    ]
    if not differ:  # the same jobs: with resume, also numbered as that sweep numbered them
        return _order_problem(path, old["hydra"], hydra) if resume else None
    if resume and _no_job_folder(Path(sweep_dir)):  # a sweep stopped before its first job: nothing to lose
        return None
    doing = "resume=true" if resume else "this sweep"
    return f"{path} belongs to another sweep ({'; '.join(differ)}); {doing} would overwrite it. {fix}"


def remove_command(path: Path) -> str:
    """The shell command that removes what is at ``path`` as it is now (links not followed): ``rm -r`` for
    a folder (``rm`` alone fails on one: session 38), ``rm`` for anything else; the path quoted."""
    folder = os.path.isdir(path) and not os.path.islink(path)
    return f"rm {'-r ' if folder else ''}{shlex.quote(str(path))}"


def _no_job_folder(folder: Path) -> bool:
    """``folder`` holds no folder (links not followed): a sweep that wrote its ``multirun.yaml`` and was
    stopped before its first job (a kill that left no cleanup, :mod:`flopsweep.unstarted`). ``resume=true``
    of another sweep there replaces it, as a sweep without ``resume`` does: no job of it is lost."""
    try:
        with os.scandir(folder) as entries:
            seen = itertools.islice(entries, MAX_JOB_FOLDERS)
            return not any(e.is_dir(follow_symlinks=False) for e in seen)
    except OSError:
        return False


def _axes(hydra: Any) -> tuple[list[str], list[str]]:
    """The sweep axes (``seed=0,1``) of a sweep's ``hydra`` node, as typed and in order: its sweeper's
    ``params`` (a sweep file's) and its command line's (``hydra.overrides.task``)."""
    from flopsweep.override_parsing import parsed_or_none

    params = [f"{k}={v}" for k, v in dict((hydra.get("sweeper") or {}).get("params") or {}).items()]
    task = [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    return tuple(  # type: ignore[return-value]
        [line for line in lines if (o := parsed_or_none(line)) is not None and o.is_sweep_override()]
        for lines in (params, task)
    )


def _order_problem(path: Path, theirs: Any, ours: Any) -> str | None:
    """The one-line refusal of ``resume=true`` whose overrides are the sweep's (``theirs``, from ``path``,
    its ``multirun.yaml``) but whose axes come in another order (``seed=0,1 backend=ddp,fsdp`` after
    ``backend=ddp,fsdp seed=0,1``): Hydra numbers the jobs by the order of the axes
    (:func:`job_sequence`), so job 1 would be another set-up than the record in ``S/1``, refused there
    after job 0 ran, and ``multirun.yaml`` rewritten. The fix gives the sweep's own order. None when
    the jobs come in the same order or cannot be told."""
    old_jobs, new_jobs = job_sequence(theirs), job_sequence(ours)
    if old_jobs is None or new_jobs is None or old_jobs == new_jobs:
        return None
    (old_params, old_task), (new_params, new_task) = _axes(theirs), _axes(ours)
    if [a.partition("=")[0] for a in old_task] != [a.partition("=")[0] for a in new_task]:
        there, here = " ".join(old_task), " ".join(new_task)
        fix = f"resume with the sweep's own order: {there}"
    else:  # the sweep file's axes (hydra.sweeper.params) were reordered
        there, here = " ".join(old_params), " ".join(new_params)
        fix = f"give the sweep file's axes (hydra.sweeper.params) their own order again: {there}"
    return (
        f"{path} is this sweep's, with its axes in another order ({there} there, {here} here); resume=true "
        f"would number its jobs differently and meet each record under another job's number. Fix: {fix}"
    )


JOB_SEARCHES = ("batch_search", "model_search")
"""A job's own sub-folders that hold records of its searches' probes (``S/0/batch_search/mbs4/metrics.json``),
and their set-aside copies (``batch_search.<status>-<run id>``): no job of a sweep."""


MAX_RUNS_READ = 8
"""At most this many of the records below a ``hydra.run.dir`` are read to tell single runs' from a sweep's
jobs (:func:`run_folder_problem`)."""


def _job_records(folder: Path) -> list[Path]:
    """The records one level down, ``folder/<name>/metrics.json`` (a sweep's jobs): regular files only (a
    link or a FIFO planted there is the job's to refuse or set aside), links not followed, a job's
    search folders aside (:data:`JOB_SEARCHES`); at most :data:`MAX_JOB_FOLDERS` entries looked at."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in itertools.islice(entries, MAX_JOB_FOLDERS):
                if entry.name.startswith(JOB_SEARCHES) or not entry.is_dir(follow_symlinks=False):
                    continue
                if _is_file(Path(entry.path) / METRICS_FILE):
                    found.append(Path(entry.path) / METRICS_FILE)
    except OSError:  # missing (a new folder), or unreadable: each job checks its own
        return []
    return sorted(found, key=_job_order)


def _job_order(path: Path) -> tuple[bool, int, str]:
    """Job folders by number (``S/2`` before ``S/10``), then any other name."""
    name = path.parent.name
    return (not name.isdigit(), int(name) if name.isdigit() else 0, str(path))


def _is_file(path: Path) -> bool:
    """True when ``path``, not followed, is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def sweep_folder_problem(sweep_dir: Path, hydra: Any, *, resume: bool, log: str = JOB_LOG) -> str | None:
    """The one-line refusal of a sweep into ``sweep_dir`` before anything is written there, else None:

    - a single run's folder (a ``metrics.json`` in it): the sweep's records would be counted with it;
    - with ``resume``, another sweep's folder (its ``multirun.yaml``: :func:`other_sweep_problem`);
    - without ``resume``, a folder that holds job records (``S/N/metrics.json``): another sweep's
      (named so, :func:`other_sweep_problem`: the sweeper would overwrite its ``multirun.yaml``, and
      it could no longer be resumed) or this sweep's (its jobs would refuse them one by one, after the
      jobs before them ran); the fix names ``resume=true`` or a new ``hydra.sweep.dir``. A folder
      without records (a plan's, a sweep stopped before its first record) is taken over as before;
    - a folder inside another sweep's or run's folder, or one holding another sweep's folder below it
      (:func:`flopsweep.folders.nested_folder_problem`);
    - with ``resume``, job records that no job of this sweep wrote
      (:func:`flopsweep.folders.foreign_record_problem`), also without a ``multirun.yaml``;
    - a job folder's ``.hydra/`` files that no sweep made (:func:`hydra_files_problem`);
    - a job folder's log (``S/N/<log>``) that is no regular file (:func:`log_link_problem`).
    """

    folder = Path(sweep_dir)
    if problem := nested_folder_problem("hydra.sweep.dir", folder, sweep=True) or hydra_files_problem(folder):
        return problem
    if problem := log_link_problem("hydra.sweep.dir", folder, log, sweep=True):
        return problem
    top = Path(sweep_dir) / METRICS_FILE
    if _is_file(top):
        return (
            f"{sweep_dir} is a single run's folder ({top} is there); the sweep's records would be counted "
            f"with it, and its resume would skip it. Fix: {another(sweep_dir, 'hydra.sweep.dir')}"
        )
    if resume:
        return other_sweep_problem(sweep_dir, hydra) or foreign_record_problem(
            Path(sweep_dir), hydra, _job_records(Path(sweep_dir))
        )
    records = _job_records(Path(sweep_dir))
    if not records:
        return None
    if problem := other_sweep_problem(sweep_dir, hydra, resume=False):
        return problem
    more = f" and {len(records) - 1} more job records" if len(records) > 1 else ""
    return (
        f"{records[0]} already exists{more}: this sweep ran in {sweep_dir} before; refusing to overwrite a "
        "run record. Fix: add resume=true (keeps the ok records, re-runs the rest), or "
        f"{another(sweep_dir, 'hydra.sweep.dir')}"
    )


HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")
"""The files a job writes into its ``.hydra/`` (:func:`flopsweep.hydrafiles.write_hydra_files`)."""


def hydra_files_problem(sweep_dir: Path) -> str | None:
    """The one-line refusal of a sweep into ``sweep_dir`` when a job folder there (one level down, links not
    followed) holds one of :data:`HYDRA_FILES` in its ``.hydra/`` (anything at that name: a file, a link) that
    nothing of a sweep explains: no ``metrics.json`` beside it and no ``multirun.yaml`` in ``sweep_dir``. The
    job would replace it with its own config (a file the user made, docs/reliability-5.md). A sweep's own job
    folders (its ``multirun.yaml`` there: a resumed or stopped sweep, a plan's) and a job's record beside
    its ``.hydra/`` (whose sweep: :func:`sweep_folder_problem`) are left as before. Else None."""
    if os.path.lexists(Path(sweep_dir) / MULTIRUN_FILE):
        return None
    for job in sorted(_job_folders(Path(sweep_dir)), key=lambda p: _job_order(p / METRICS_FILE)):
        if os.path.lexists(job / METRICS_FILE):
            continue
        for name in HYDRA_FILES:
            if os.path.lexists(path := job / ".hydra" / name):
                return (
                    f"{folder_word('hydra.sweep.dir', sweep_dir)}: {path} is already there (no record beside "
                    f"it, no sweep's {MULTIRUN_FILE} in {sweep_dir}); a sweep never replaces a file it did "
                    f"not make. Fix: {another(sweep_dir, 'hydra.sweep.dir')}, or remove {path} if it is yours"
                )
    return None


def run_hydra_files_problem(run_dir: Path) -> str | None:
    """The one-line refusal of a single run into ``run_dir`` when its ``.hydra/`` holds one of
    :data:`HYDRA_FILES` (anything at that name, links not followed) that no flopsweep run explains: no
    ``metrics.json`` (a run's record) and no ``plan.csv`` (a plan's table) beside it. The run would replace
    it with its own config, as a sweep's job would (:func:`hydra_files_problem`). Else None."""
    from flopsweep.job.plantable import PLAN_FILE

    if any(os.path.lexists(run_dir / name) for name in (METRICS_FILE, PLAN_FILE)):
        return None
    for name in HYDRA_FILES:
        if os.path.lexists(path := run_dir / ".hydra" / name):
            return (
                f"{folder_word('hydra.run.dir', run_dir)}: {path} is already there (no {METRICS_FILE} or "
                f"{PLAN_FILE} of a flopsweep run beside it); a run never replaces a file it did not make. "
                f"Fix: {another(run_dir)}, or remove {path} if it is yours"
            )
    return None


def run_folder_problem(run_dir: Path, log: str = JOB_LOG) -> str | None:
    """The one-line refusal of a single run into a sweep's folder (``multirun.yaml`` in it, or job
    records one level down, ``R/N/metrics.json``), before anything is written there: its record would be
    counted among the sweep's jobs (and a resume of the sweep would count it as skipped); or inside
    another sweep's or run's folder (:func:`flopsweep.folders.nested_folder_problem`); or over a
    ``.hydra/`` no flopsweep run made (:func:`run_hydra_files_problem`); or where the job's log (``<log>``)
    is no regular file (:func:`log_link_problem`). Else None."""

    nested = nested_folder_problem("hydra.run.dir", Path(run_dir), sweep=False)
    if problem := nested or run_hydra_files_problem(Path(run_dir)):
        return problem
    if problem := log_link_problem("hydra.run.dir", Path(run_dir), log):
        return problem
    multirun = Path(run_dir) / MULTIRUN_FILE
    records = _job_records(Path(run_dir))
    if not os.path.lexists(multirun) and not records:
        return None
    if not os.path.lexists(multirun) and all(_single_run(r) for r in records[:MAX_RUNS_READ]):
        more = f" and {len(records) - 1} more" if len(records) > 1 else ""
        return (
            f"{folder_word('hydra.run.dir', run_dir)} is the folder above a single run's folder "
            f"({records[0]} is there{more}); a record there would be read with the runs below it, as a "
            f"sweep's jobs are (python -m analysis {shlex.quote(str(run_dir))}). Fix: choose another "
            f"hydra.run.dir, a folder of its own, e.g. {free_folder(Path(run_dir) / 'run', 'hydra.run.dir')}"
        )
    what = f"{multirun} is there" if os.path.lexists(multirun) else f"{records[0]} is there"
    return (
        f"{folder_word('hydra.run.dir', run_dir)} is a sweep's folder ({what}); a single run's record there "
        f"would be counted among the sweep's jobs. Fix: {another(run_dir)} (re-run the sweep's jobs with -m, "
        "its hydra.sweep.dir and resume=true)"
    )


def _single_run(record: Path) -> bool:
    """Whether ``record`` is a single run's (``run.job_num`` null: no sweep's job); False when it cannot be
    read (a sweep's job record being written, or a damaged one: the sweep's wording stands)."""
    try:
        run = read_json(record).get("run")
    except (RecordError, OSError):
        return False
    return isinstance(run, dict) and "job_num" in run and run["job_num"] is None


def _shown(value: Any) -> str:
    text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
    return repr(text[:200]) if text else "none"


def _job_folders(sweep_dir: Path) -> list[Path]:
    """The folders one level down in ``sweep_dir`` (a sweep's jobs, links not followed), at most
    :data:`MAX_JOB_FOLDERS` entries looked at; none where it is missing or unreadable."""
    try:
        with os.scandir(sweep_dir) as entries:
            return [
                Path(e.path)
                for e in itertools.islice(entries, MAX_JOB_FOLDERS)
                if e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []


def plan_file_problem(
    key: str, value: str, folder: str, names: tuple[str, ...] = (), who: str = "a plan"
) -> str | None:
    """One line refusing ``plan=true`` into ``value`` (``folder``: its path) as ``key`` when a ``plan.csv``
    it did not make is there, else None: a plan never replaces a file of someone else's. ``names``, ``who``:
    another sweep's report files (the tuner's ``tune.json`` and ``tune.md``, ``"a tuner"``: it had replaced
    a user's file or link there, exit 0), in the sweep folder alone.

    - ``hydra.run.dir``: any ``plan.csv`` (an earlier plan's, a file of the user's, a link);
    - ``hydra.sweep.dir``: a ``plan.csv`` there or in a job folder (``S/0/plan.csv``, a plan over
      ``plan_clusters``) with no sweep's ``multirun.yaml`` beside it, or one that is no regular file (a link
      is never followed nor removed). A sweep's own plan beside its ``multirun.yaml`` is started afresh as
      before: a second plan into the folder, ``resume=true`` (the callback checks whose sweep it is,
      :func:`other_sweep_problem`)."""
    from flopsweep.job.plantable import PLAN_FILE
    from flopsweep.safe_read import file_kind

    sweep = "sweep" in key
    found = [Path(folder) / name for name in names or (PLAN_FILE,)]
    if sweep and not names:
        found += [job / PLAN_FILE for job in _job_folders(Path(folder))]
    ours = sweep and _is_file(Path(folder) / MULTIRUN_FILE)
    for path in found:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if ours and stat.S_ISREG(st.st_mode):
            continue
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else f"a {file_kind(st.st_mode)}"
        whose = f", no sweep's {MULTIRUN_FILE} beside it" if sweep and not ours else ""
        return (
            f"Invalid config: {folder_word(key, value)}: {path} is already there ({what}{whose}); {who} "
            f"never replaces or writes through a file it did not make. Fix: {another(folder, key)}, or "
            f"remove {path} if it is yours."
        )
    return None


def log_link_problem(key: str, folder: Path, log: str = JOB_LOG, *, sweep: bool = False) -> str | None:
    """One line refusing ``folder`` as ``key`` when the job's log name ``<log>`` is no plain file name (a
    ``hydra.job.name`` resolved from an interpolation: :func:`flopsweep.job_name.job_name_problem`), or when
    the job's log there (``folder/<log>``; for a sweep, each job folder's, ``S/N/run.log``, links not
    followed, at most :data:`MAX_JOB_FOLDERS` entries looked at) is no regular file: a symbolic link
    (dangling or not), a FIFO, a folder. The log's handler replaced it with an empty file
    (:class:`flopsweep.hydrafiles.JobLogHandler`), a link of the user's gone without a word, as a
    ``metrics.json`` link never is (:func:`flopsweep.record.record_path_problem`). Else None."""
    from flopsweep.job_name import job_name_problem
    from flopsweep.safe_read import file_kind

    if log != JOB_LOG and (problem := job_name_problem(log.removesuffix(".log"))):  # ${oc.env:NAME}, resolved
        return problem.removeprefix("Invalid config: ")
    jobs = sorted(_job_folders(folder), key=lambda p: _job_order(p / METRICS_FILE)) if sweep else [folder]
    for job in jobs:
        try:
            st = os.lstat(path := job / log)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            return (
                f"{folder_word(key, folder)}: {path} is a {file_kind(st.st_mode)}, not the job's log; a job "
                f"never writes through its log's path nor replaces what is there. Fix: remove {path} if it "
                f"is yours, or {another(folder, key)}"
            )
    return None
