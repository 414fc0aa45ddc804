"""``plan=true plan_clusters=[...]`` under ``-m``: one ranked table of every job's set-ups.

Each job of the sweep plans its own set-ups on the clusters (:func:`flopsweep.job.plandecide.decide_job`),
writes them to its own ``plan.csv`` and its table to its ``run.log``, and appends its rows, with its job
number and overrides, to the sweep's ``plan.csv`` (:func:`append_job`, :data:`SWEEP_COLUMNS`). When the
sweep ends, its callback (:meth:`flopsweep.callbacks.SweepSummary.on_multirun_end`) ranks them all
together by ``objective=`` (:func:`flopsweep.plan_space.rank`: the model, sequence length or any other
swept key is part of the set-up), rewrites the sweep's ``plan.csv`` with every row and prints the one
table (:func:`sweep_output`): the best of each cluster over every job marked ``*`` with the command
that runs it, the job's overrides that differ from the other jobs' in a ``job`` column
(:func:`plan_lines`, which prints a sweep's one-row plan too). Also the table's figures (:func:`_si`:
``$2.72e16``, not ``$2.72e+07B``) and :func:`plan_scratch`, the private folder of a plan whose own cannot be
written. Torch-free.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import typing
from collections import Counter
from pathlib import Path
from typing import Any

from flopsweep import objective, strict_json
from flopsweep.cluster_prices import price_lines_of, priced_at
from flopsweep.job.planprint import invalid_jobs_line
from flopsweep.job.plantable import (
    append_plan_row,
    complete_records,
    plan_csv,
    unwritten_line,
    write_plan,
)
from flopsweep.override_parsing import override_key, set_key
from flopsweep.plan_assess import COLUMNS, Row
from flopsweep.safe_read import read_regular
from flopsweep.text import csv_text, plural, printable

log = logging.getLogger("flopsweep")

SWEEP_COLUMNS = ("job", "job_overrides", *COLUMNS)
"""The sweep's ``plan.csv`` under ``plan_clusters``: the job's number and its overrides (the command
line's, the sweep's value of each swept key among them), then :data:`flopsweep.plan_space.COLUMNS`;
``rank``, ``cluster_rank`` and ``best`` over every job's set-ups."""
SWEEP_COLUMN_DOCS = {
    "job": "the job's number in its sweep (its folder's, `hydra.job.num`)",
    "job_overrides": "the job's command-line overrides (the sweep's value of each swept key among them)",
}
"""What the two columns a sweep's ``plan.csv`` adds before :data:`flopsweep.plan_space.COLUMNS` mean
(``docs/reference/plan.md``)."""
PLAN_ONLY = ("plan=", "plan_format=", "plan_clusters=")
"""Overrides left out of a job's label: every job of the plan shares them, or the cluster column says them."""
MAX_SWEEP_BYTES = 1 << 30
"""The largest sweep ``plan.csv`` read (1 GiB; a row is about 1.5 kB, most of it ``prediction_source``)."""
MAX_SWEEP_ROWS = 500_000
"""The most rows the sweep's table reads (a plan bounds each job to 50,000 set-ups,
:data:`flopsweep.space.MAX_SETUPS`)."""


def append_job(path: Path, rows: list[dict[str, Any]], info: Any) -> None:
    """Append one job's rows (``plan.csv``'s, :data:`flopsweep.plan_space.COLUMNS`) to the sweep's
    ``plan.csv`` at ``path`` with its number and overrides (:func:`flopsweep.job.plantable.append_plan_row`:
    one write, never through a link). A file that cannot take them is one warning in the job's log, not
    a failed job: its own ``plan.csv`` and log hold its rows."""
    overrides = " ".join(info.overrides)
    joined = [{"job": info.job_num, "job_overrides": overrides, **row} for row in rows]
    try:
        append_plan_row(path, joined, SWEEP_COLUMNS)
    except OSError as exc:
        log.warning("%s", unwritten_line(path, exc).removeprefix("flopsweep: "))


def _value(text: str, kind: str) -> Any:
    """One ``plan.csv`` cell as :class:`flopsweep.plan_space.Row`'s field of type ``kind`` holds it."""
    text = csv_text(text)
    if kind.startswith("list"):
        return text.split() if text else []
    if text == "" and "None" in kind:
        return None
    if kind.startswith("bool"):
        return text == "True"
    if kind.startswith("int"):
        return int(float(text)) if text else 0
    if kind.startswith("float"):
        return float(text) if text else None
    return text


_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(Row) if f.name != "setup"}


def row_of(cells: dict[str, str]) -> Row:
    """A :class:`flopsweep.plan_space.Row` from a ``plan.csv`` row (:meth:`Row.as_dict` written through the
    CSV guard), its :class:`flopsweep.space.Setup` from the set-up's columns."""
    from flopsweep.space import Setup

    row = Row(
        setup=None, **{k: _value(cells.get(k) or "", kind) for k, kind in _FIELDS.items() if k in cells}
    )
    if cells.get("backend"):
        row.setup = Setup(
            backend=csv_text(cells["backend"]),
            layout=csv_text(cells.get("space_layout") or ""),
            checkpointing=csv_text(cells.get("checkpointing") or ""),
            precision=csv_text(cells.get("precision") or ""),
            micro_batch=int(float(cells.get("micro_batch") or 0)),
            compile={"True": True, "False": False}.get(csv_text(cells.get("compile") or "")),
        )
    return row


def read_sweep(path: Path) -> list[tuple[int, list[str], Row]]:
    """The sweep's ``plan.csv``: ``(job, its overrides, row)`` per row, at most :data:`MAX_SWEEP_ROWS`, read
    as a regular file of at most :data:`MAX_SWEEP_BYTES` (:func:`flopsweep.safe_read.read_regular`: never
    through a link, never blocking on a FIFO).

    Raises:
        RecordError: a link, a FIFO, a file over the bound, an OS error: one phrase naming it.
    """
    text = read_regular(path, MAX_SWEEP_BYTES).decode("utf-8", errors="replace")
    records, _ = complete_records(text)  # a row cut short (a job killed while it appended): left out
    out = []
    for i, values in enumerate(records[1:]):
        if i >= MAX_SWEEP_ROWS:
            break
        cells = dict(zip(records[0], values, strict=True))
        job = int(float(cells.get("job") or 0))
        out.append((job, csv_text(cells.get("job_overrides") or "").split(), row_of(cells)))
    return out


def is_sweep_file(path: Path) -> bool:
    """Whether the sweep's ``plan.csv`` is a plan over clusters (:data:`SWEEP_COLUMNS`' header), not one
    row per job (:data:`flopsweep.job.plantable.PLAN_COLUMNS`); its first bytes read as
    :func:`flopsweep.job.plantable.append_plan_row` reads them (no link followed, no FIFO waited on)."""
    from flopsweep.job.plantable import head_of

    try:
        st = os.lstat(path)
        head = head_of(path, st, 64) if stat.S_ISREG(st.st_mode) else b""
    except OSError:
        return False
    return head.startswith(b"job,job_overrides,rank,cluster_rank")


def job_labels(jobs: dict[int, list[str]]) -> dict[int, str]:
    """Each job's overrides that not every job shares, less the plan's own (:data:`PLAN_ONLY`), as one
    line (``model=llama3.2-3b``): what tells its rows from the other jobs' in the table."""
    words = {j: [w for w in o if not w.lstrip("+~").startswith(PLAN_ONLY)] for j, o in jobs.items()}
    shared = set.intersection(*(set(w) for w in words.values())) if words else set()
    return {j: " ".join(w for w in ws if w not in shared) for j, ws in words.items()}


def setup_keys_swept(labels: dict[int, str]) -> list[str]:
    """The swept keys that every set-up sets itself (``backend``, ``batch.micro_batch_size``,
    ``parallel.*``, ``nproc_per_node``, ...: :data:`flopsweep.job.plandecide.SETUP_KEYS` and ``RUN_KEYS``):
    those jobs plan the same set-ups, so their rows repeat."""
    from flopsweep.job.planrender import RUN_KEYS, SETUP_KEYS

    keys = {override_key(w) for label in labels.values() for w in label.split()}
    return sorted(k for k in keys if k in SETUP_KEYS or k in RUN_KEYS or k.startswith("parallel."))


def _dropped(rows: list[Row]) -> Counter:
    """The rows not ``ok`` counted by reason, as :func:`flopsweep.plan_space.candidates` counts them."""
    from flopsweep.job.planrender import dropped_counts

    return dropped_counts(rows)


def sweep_output(
    path: Path,
    objective_name: str,
    fmt: str = "table",
    top: int = 5,
    *,
    shown: bool = True,
    named: list[object] | None = None,
    unplaced: dict[str, str] | None = None,
) -> tuple[str, list[str]]:
    """The sweep's plan over every job: its rows ranked together by ``objective_name``
    (:func:`flopsweep.plan_space.rank`), the sweep's ``plan.csv`` rewritten with them (ranked first, then
    the dropped, then each invalid job's one row), and the text to print for ``fmt``: ``table`` (the ``top``
    best of each cluster, the ``job`` column, the dropped counts, the best of each cluster with its command,
    each invalid job's line), ``csv`` (the file's rows) or ``json`` (``{objective, better, jobs, invalid:
    {job: line}, dropped, best: [{cluster, job, command}], rows}``, strict JSON: a non-finite figure is null
    and its row's ``nulls`` says why, :func:`flopsweep.strict_json.dumps`). An invalid job (its keys refused:
    :func:`flopsweep.job.plandecide.decide_job`) is one row of ``status`` ``invalid``, not a set-up.
    ``shown``: False leaves the file's path unsaid (a private folder the plan ran in). ``named``: the
    sweep config's ``plan_clusters`` (beside each job's own): the table's ``price: ...`` lines say a price
    one of them gives as ``@PRICE`` is ``@2.5 in plan_clusters``
    (:func:`flopsweep.cluster_prices.price_lines_of`). ``unplaced``: why each of those places no set-up
    (:func:`flopsweep.layout_fit.sweep_unplaced`), its ``none:`` line under the best's commands.

    Returns:
        ``(text, lines)``: the lines for stderr, each ``flopsweep: ...``: the file could not be rewritten
        (:func:`unwritten_line`); ``N of M jobs are invalid ...; job J: <its line>``
        (:func:`flopsweep.job.planprint.invalid_jobs_line`, as the one-row plan says it; for ``table``, whose
        ``job J is invalid: ...`` lines hold each reason, the count alone). A plan is a report: the sweep
        still exits 0.
    """
    from flopsweep.config import ConfigError
    from flopsweep.job.planfit import wrapped_all
    from flopsweep.job.planrender import (
        best_lines,
        edge_lines,
        override_line,
        scaled_lines,
        setup_legend,
        table_lines,
        unranked,
        unranked_lines,
    )
    from flopsweep.plan_space import rank
    from flopsweep.shown_overrides import typed_back

    try:  # the sweep's objective= (a swept one: its default); one a plan cannot predict ranks as its jobs did
        objective.planned(objective_name)
    except ConfigError:
        objective_name = "model_tflops_per_device"
    from flopsweep.job.plantable import NO_SET_UP_LEFT

    read = read_sweep(path)
    # each job's overrides as typed (budget.tokens=1e12, not Hydra's 1000000000000.0)
    jobs = {job: [typed_back(o) for o in overrides] for job, overrides, _ in read}
    job_of = {id(row): job for job, _, row in read}
    invalid = {job: row.reason for job, _, row in read if row.status == "invalid" and row.setup is None}
    # a job that ranked no set-up: its one row, its line (its dropped rows are rows as any job's)
    nothing = {job: row.reason for job, _, row in read if row.status == NO_SET_UP_LEFT and row.setup is None}
    own_rows = [row for job, _, row in read if job in invalid or (row.setup is None and job in nothing)]
    rows = [row for job, _, row in read if job not in invalid and row.setup is not None]
    column, better = objective.planned(objective_name)
    ranked = rank(rows, objective_name)
    others = [r for r in rows if r.rank is None]

    def cells(r: Row) -> dict[str, Any]:
        j = job_of[id(r)]
        return {"job": j, "job_overrides": " ".join(jobs[j]), **r.as_dict()}

    every = [cells(r) for r in [*ranked, *others, *sorted(own_rows, key=lambda r: job_of[id(r)])]]
    unwritten = write_plan(path, every, SWEEP_COLUMNS)
    listed = [(str(j), invalid[j]) for j in sorted(invalid)]
    labels = job_labels({j: o for j, o in jobs.items() if j not in invalid})  # an invalid job: its own line
    stderr = [
        *([unwritten] if unwritten else []),
        *([invalid_jobs_line(listed, len(jobs), shown=fmt == "table")] if invalid else []),
        *([nothing_jobs_line(nothing, labels, len(jobs), shown=fmt == "table")] if nothing else []),
    ]
    best = [r for r in ranked if r.best]
    commands = [override_line(r, jobs[job_of[id(r)]]) for r in best]
    dropped = _dropped(rows)
    if fmt == "csv":
        return plan_csv(every, SWEEP_COLUMNS, lines="\n").rstrip("\n"), stderr
    if fmt == "json":
        said = {
            "objective": objective_name,
            "better": better,
            "jobs": {str(j): " ".join(o) for j, o in jobs.items()},
            "invalid": dict(listed),
            "nothing": {str(j): nothing[j] for j in sorted(nothing)},
            "dropped": dict(dropped),
            "best": [
                *(
                    {"cluster": r.cluster, "job": job_of[id(r)], "command": c}
                    for r, c in zip(best, commands, strict=True)
                ),
                *({"cluster": k, "job": None, "command": None, "none": why} for k, why in unranked(rows)),
            ],
            "rows": every,
        }
        return strict_json.dumps(said, indent=1, default=str), stderr  # inf, nan: null, and why under nulls
    counted = (
        f"; {len(invalid)} of {len(jobs)} jobs are invalid, none of their set-ups planned" if invalid else ""
    ) + (f"; {len(nothing)} of {len(jobs)} jobs have no set-up left, each named below" if nothing else "")
    prices = [*(named or []), *(o.partition("=")[2] for j in jobs.values() for o in j if _clusters(o))]
    notes = [  # below the table, wrapped at its width; the commands to copy never cut
        "",
        f"ranked by objective={objective_name} ({column}, {better} is better) over the set-ups of "
        f"{plural(len(jobs) - len(invalid), 'job')}; {top} shown per cluster (space.top){counted}",
        SWEEP_LEGEND,
        setup_legend(rows),
        f"{len(rows)} set-ups: {len(ranked)} ranked; dropped: "
        + (", ".join(f"{k} {v}" for k, v in dropped.most_common()) or "none"),
        FIGURES_LEGEND,
        *price_lines_of([(r.cluster, r.usd_per_gpu_hour) for r in rows], priced_at(prices)),
        *scaled_lines(ranked, top),
        *edge_lines(ranked, top, column),
        *_repeat_lines(labels),
    ]
    last = "(plan: no worker started, no record written; the defaults each job used: its run.log" + (
        f"; every row of every job: {printable(str(path))})" if shown and not unwritten else ")"
    )
    every_invalid = len(invalid) == len(jobs)
    text = "\n".join(
        _table(ranked, top, labels, job_of, table_lines, every_invalid=every_invalid, nothing=nothing)
        + wrapped_all(notes)
        + best_lines(
            "best of each cluster over every job, the command that runs it:",
            [f"  {r.cluster}: {c}" for r, c in zip(best, commands, strict=True)],
            unranked_lines(rows, unplaced),  # unplaced: a cluster of no row, named (#607)
        )
        + wrapped_all([*_invalid_lines(invalid), *_nothing_lines(nothing, labels), last])
    )
    return text, stderr


SWEEP_LEGEND = (
    "#: rank within its cluster over every job (1..n, * = its best); all: rank among every set-up "
    "(plan.csv's rank); job: the job's own overrides"
)
"""The sweep table's legend of its rank and job columns (:data:`FIGURES_LEGEND`: of its figures)."""

FIGURES_LEGEND = (
    "tok/s/GPU, MFU predicted; J/tok at the GPU's board power; days, GPU-h, budget$: to train "
    "budget.tokens; GiB: estimated peak per rank, free: GPU memory less it; err: expected |error|"
)


def _clusters(override: str) -> bool:
    return set_key(override) == "plan_clusters"


MAX_INVALID_SHOWN = 10
"""The most invalid jobs the sweep's table names, each with its line; the others are counted (the
sweep's ``plan.csv`` and ``plan_format=csv|json`` hold every one)."""


def _invalid_lines(invalid: dict[int, str]) -> list[str]:
    """Each invalid job's line below the table (``job 1 is invalid: Invalid config: KEY=VALUE: ... Fix:
    ...``), at most :data:`MAX_INVALID_SHOWN`, then how many more."""
    shown = sorted(invalid)[:MAX_INVALID_SHOWN]
    lines = [f"job {j} is invalid: {printable(invalid[j])[:400]}" for j in shown]
    if len(invalid) > len(shown):
        lines.append(
            f"... and {len(invalid) - len(shown)} more invalid jobs: the sweep's plan.csv (status, reason)"
        )
    return lines


def _nothing_lines(nothing: dict[int, str], labels: dict[int, str]) -> list[str]:
    """Each job that ranked no set-up, below the table, with its own overrides and its line (how many were
    dropped, the top counts, the commonest reason, the fix: :func:`flopsweep.job.planwhy.nothing_line`):
    ``job 2 (model=llama3.1-70b) has no set-up left: all 15 dropped; ... Fix: ...``; at most
    :data:`MAX_INVALID_SHOWN`, then how many more."""
    shown = sorted(nothing)[:MAX_INVALID_SHOWN]
    lines = [f"job {_job_said(j, labels)} has no set-up left: {printable(nothing[j])[:600]}" for j in shown]
    if len(nothing) > len(shown):
        lines.append(
            f"... and {len(nothing) - len(shown)} more jobs with no set-up left: the sweep's plan.csv "
            "(status, reason)"
        )
    return lines


def _job_said(job: int, labels: dict[int, str]) -> str:
    """``2 (model=llama3.1-70b)``: the job's number and its own overrides (:func:`job_labels`), if any."""
    label = printable(labels.get(job, ""))[:120]
    return f"{job} ({label})" if label else str(job)


def nothing_jobs_line(nothing: dict[int, str], labels: dict[int, str], total: int, *, shown: bool) -> str:
    """``flopsweep: N of M jobs have no set-up left (status "no set-up left"); ...``: the stderr line of a
    sweep of plans over clusters some of whose jobs ranked no set-up, counted as
    :func:`flopsweep.job.planprint.invalid_jobs_line` counts the invalid ones (a plan is a report: exit 0).
    ``shown``: the table printed above names each (the count alone); else the first job's line."""
    from flopsweep.job.plantable import NO_SET_UP_LEFT

    line = f'flopsweep: {len(nothing)} of {total} jobs have no set-up left (status "{NO_SET_UP_LEFT}")'
    if shown:
        return f"{line}; each one's reasons and fix are printed with the table"
    first = min(nothing)
    return f"{line}; job {_job_said(first, labels)}: {printable(nothing[first])[:600]}"


def _table(
    ranked: list[Row],
    top: int,
    labels: dict[int, str],
    job_of: dict[int, int],
    lines: typing.Callable,
    *,
    every_invalid: bool = False,
    nothing: dict[int, str] | None = None,
) -> list[str]:
    """The table with its ``job`` column: each job's label (:func:`job_labels`) where the widest line stays
    within :func:`flopsweep.job.planfit.width` with every column, else the job's number and one line per
    job below it (hiding columns to fit, :data:`flopsweep.job.planrender.HIDDEN_FIRST`). ``nothing``: the
    jobs that ranked no set-up (their lines follow the table)."""
    from flopsweep.job.planfit import width

    if not ranked and every_invalid:
        return ["no job was planned: every job of the sweep is invalid (each one's line below)"]
    if not ranked:
        where = "each job's line below" if nothing else "the dropped counts"
        return [f"no set-up of any job fits and is predicted: see {where}"]
    inline = lines(ranked, top, lambda r: labels[job_of[id(r)]] or str(job_of[id(r)]), fit=False)
    if max(map(len, inline)) <= width():
        return inline
    numbered = lines(ranked, top, lambda r: str(job_of[id(r)]))
    return numbered + [  # a job with no set-up left: its own line below, with its overrides
        f"job {j}: {printable(label) or '(no override of its own)'}"
        for j, label in sorted(labels.items())
        if j not in (nothing or {})
    ]


def _repeat_lines(labels: dict[int, str]) -> list[str]:
    """One line where the jobs differ in a key each set-up sets itself (:func:`setup_keys_swept`)."""
    keys = setup_keys_swept(labels)
    if not keys:
        return []
    return [
        f"the jobs differ in {', '.join(keys)}, which each set-up sets itself (space.*, plan_clusters): "
        "their rows repeat; list the values in space.backends, space.micro_batches, ... instead"
    ]


def plan_scratch(config: Any, mode: str) -> tuple[Path, OSError] | None:
    """A plan whose folder (``hydra.run.dir``, ``hydra.sweep.dir`` for ``mode`` ``sweep``) cannot be made
    or written (a read-only working directory, another user's folder): a private folder to run in
    instead (``mkdtemp``: 0700, an unpredictable name; removed at the end,
    :meth:`flopsweep.callbacks.SweepSummary.release`, or at exit) and the ``OSError`` (``EROFS``,
    ``EACCES``); its ``plan.csv`` is said not written (:func:`flopsweep.job.plantable.unwritten_line`)
    below the table, which a plan prints anyway. None where the folder's nearest existing folder can be
    written, and where the folder is refused (:func:`flopsweep.hydrafiles.output_folder_problem`: the
    callback's lock says why). Nothing is made at the asked path."""
    import atexit
    import errno
    import shutil
    import tempfile

    from omegaconf import read_write

    from flopsweep.hydrafiles import output_folder_problem

    key = "run" if mode == "run" else "sweep"
    folder = Path(str(config.hydra[key].dir))
    if output_folder_problem(f"hydra.{key}.dir", str(folder)):
        return None
    there = folder.absolute()
    while not there.exists() and there != there.parent:
        there = there.parent
    if os.access(there, os.W_OK | os.X_OK):
        return None
    read_only = bool(os.statvfs(there).f_flag & os.ST_RDONLY)
    code = errno.EROFS if read_only else errno.EACCES
    error = OSError(code, os.strerror(code), str(there))
    scratch = Path(tempfile.mkdtemp(prefix="flopsweep-plan-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # also where Hydra fails before the end
    with read_write(config.hydra):
        config.hydra[key].dir = str(scratch)
        # a sweep's jobs compose their Hydra config again from these overrides (load_sweep_config)
        config.hydra.overrides.hydra.append(f"hydra.{key}.dir={scratch}")
    return scratch, error


def plan_lines(plan: Path, config: Any, *, shown: bool = True) -> list[str]:
    """What a sweep's plan prints when it ends, for its ``plan_format``: over clusters, one table of every
    job's set-ups (:func:`flopsweep.job.plansweep.sweep_output`); else one row per job ranked by
    ``objective=`` (:func:`flopsweep.job.plantable.rank_plan_file`,
    :func:`flopsweep.job.planprint.plan_output`)
    and the lines about invalid rows and rows that do not fit. A line to stderr begins ``flopsweep: ``.
    ``shown``: False where ``plan`` is in a private folder (:func:`plan_scratch`): its path is not said."""
    objective = str(config.get("objective") or "model_tflops_per_device")
    fmt = str(config.get("plan_format") or "table")
    if is_sweep_file(plan):
        from flopsweep.layout_fit import sweep_unplaced

        top = int((config.get("space") or {}).get("top") or 5)
        named = [config.get("plan_clusters")] if config.get("plan_clusters") else []
        unplaced = sweep_unplaced(config)  # the sweep's clusters: one of no row is named under the best's
        text, stderr = sweep_output(plan, objective, fmt, top, shown=shown, named=named, unplaced=unplaced)
        return [text, *stderr]
    from flopsweep.clusters import plans_gpu
    from flopsweep.job.planprint import plan_invalid_line, plan_output, plan_unfit_line
    from flopsweep.job.plantable import rank_plan_file

    cut = rank_plan_file(str(plan), objective)  # a row cut short: left out of the file, said below
    gpu = plans_gpu(config.get("plan_gpu"))  # the GPU its hints name
    text = None if shown else plan.read_text(encoding="utf-8")  # its own file: the path left unsaid
    lines = [plan_output(str(plan), fmt, gpu, text=text)]
    invalid = plan_invalid_line(str(plan), shown=fmt == "table")  # the table's footnotes hold the reasons
    device = str(config.get("device") or "auto")  # as given: "drop device=cpu" only where it was
    said = [x for x in (invalid, plan_unfit_line(str(plan), gpu, device=device)) if x]
    return lines + said + [f"flopsweep: {c}" for c in cut]


SWEEP_PLAN: dict[str, Any] = {"plan": None, "config": None}
"""The plan file of the ``plan=true`` sweep running in this process and its config
(:class:`flopsweep.callbacks` sets them when the sweep starts), for :func:`interrupted_plan_lines`."""


def interrupted_plan_lines() -> list[str]:
    """What an interrupted plan sweep kept (Ctrl-C, ``timeout -s INT``): ``kept N rows of planned set-ups in
    PATH (the jobs that finished)`` and the table of those rows (:func:`plan_lines`); empty when no plan
    sweep ran here or its ``plan.csv`` holds no row yet. A line to stderr begins ``flopsweep: ``."""
    plan, config = SWEEP_PLAN["plan"], SWEEP_PLAN["config"]
    if plan is None or not Path(plan).is_file():
        return []
    try:
        if is_sweep_file(Path(plan)):
            n = len(read_sweep(Path(plan)))
        else:  # one row per job, the header first; bounded as the sweep's table reads it, complete rows only
            text = read_regular(Path(plan), MAX_SWEEP_BYTES).decode("utf-8", errors="replace")
            n = len(complete_records(text)[0]) - 1
        if n < 1:
            return []
        return [
            *plan_lines(Path(plan), config),
            f"flopsweep: kept {plural(n, 'row')} of planned set-ups in {plan} (the jobs that finished)",
        ]
    except Exception as exc:  # noqa: BLE001 - an interruption's line says what it can
        return [f"flopsweep: the plan's rows are in {plan} (not shown: {exc})"]
