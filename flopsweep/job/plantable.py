"""``plan.csv``, the file: the rows of ``plan=true`` (:data:`PLAN_COLUMNS`), written afresh by the dry run
(:func:`flopsweep.job.dryrun.plan_job`: :func:`write_plan`) or appended by each job of a sweep
(:func:`append_plan_row`), read back whole rows only (:func:`plan_frame`, :func:`complete_records`) and
ranked (:func:`rank_plan_file`). What a plan prints from it is :mod:`flopsweep.job.planprint`. Free of the
job's run path: the sweep callback and ``flopsweep.folders`` import it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from flopsweep.files import create_new
from flopsweep.free_folder import another
from flopsweep.text import csv_cell, plural, printable

PLAN_FILE = "plan.csv"


PLAN_COLUMNS = (
    "job",
    "model",
    "overrides",
    "status",
    "reason",
    "world_size",
    "layout",
    "seq_len",
    "n_params",
    "model_flops_per_step",
    "est_peak_gib_per_rank",
    "fits",
    "fits_on",
    "predicted_world_size",
    "predicted_nnodes",
    "predicted_iteration_time_s",
    "predicted_tokens_per_s_per_device",
    "predicted_mfu",
    "predicted_budget_gpu_hours",
    "predicted_budget_days",
    "predicted_budget_usd",
    "predicted_usd_per_million_tokens",
    "rank",
    "prediction_source",
    "note",
    "memory_fix",
)


PLAN_COLUMN_DOCS: dict[str, str] = {
    "job": "the job's number in its sweep (blank for a single run)",
    "model": "the model's name (`<model>-L<n>` where `search.model=largest` estimated n blocks)",
    "overrides": "the job's command-line overrides",
    "status": "`ok`, or `invalid` (the run would be refused: `reason`)",
    "reason": "an `invalid` job's one line: `Invalid config: KEY=VALUE: why. Fix: ...`",
    "world_size": "ranks of the job as placed (`nproc_per_node x nnodes`, or the `predict.*` cluster)",
    "layout": "the parallel layout (`dp8`, `dp4 tp2`, `pp2/1F1B dp4`)",
    "seq_len": "tokens per sequence (`model.seq_len`)",
    "n_params": "the model's parameters",
    "model_flops_per_step": "model FLOPs of one optimizer step over every rank",
    "est_peak_gib_per_rank": "the memory estimate's peak per rank, GiB",
    "fits": "whether that peak fits `fits_on` (blank: nothing to compare with)",
    "fits_on": "the memory compared with: `plan_gpu`'s, `plan_gpu_memory_gib`, this GPU's or the host's",
    "predicted_world_size": "GPUs predicted on: `predict.gpus_per_node x predict.nnodes` (null: the job's)",
    "predicted_nnodes": "nodes of the prediction",
    "predicted_iteration_time_s": "the predicted step, seconds",
    "predicted_tokens_per_s_per_device": "predicted tokens per second per GPU",
    "predicted_mfu": "predicted MFU, a share of the dense peak",
    "predicted_budget_gpu_hours": "GPU-hours to train `budget.tokens`",
    "predicted_budget_days": "days to train `budget.tokens`",
    "predicted_budget_usd": "dollars to train `budget.tokens` at `cost.usd_per_gpu_hour`",
    "predicted_usd_per_million_tokens": "dollars per million tokens at `cost.usd_per_gpu_hour`",
    "rank": "the job's place by `objective=` among the jobs that fit and are predicted (1 = best)",
    "prediction_source": "the prediction's sources in words, or `no prediction: KEY=VALUE: why. Fix: ...`",
    "note": "how the job was placed and estimated (the GPU it was placed on, a search's size, the method)",
    "memory_fix": "a job over its GPU's memory: the levers its config has not pulled, each with its estimate",
}
"""What each of :data:`PLAN_COLUMNS` means (``docs/reference/plan.md``)."""

NO_SET_UP_LEFT = "no set-up left"
"""The ``status`` of the one row a job of a sweep of plans adds to the sweep's ``plan.csv`` where it ranks
no set-up (every one dropped, or none placed on its clusters): its ``reason`` is the job's line (how many
were dropped, the commonest reason, the fix: :func:`flopsweep.job.planwhy.nothing_line`), no set-up, no
cluster; as an ``invalid`` job's row, the sweep's table names it with that line
(:func:`flopsweep.job.plansweep.sweep_output`)."""


def _csv_text(rows: list[dict[str, Any]], *, header: bool, columns: tuple[str, ...] = PLAN_COLUMNS) -> str:
    """``rows`` as ``plan.csv``'s lines, every cell through the project's one CSV-injection guard
    (:func:`flopsweep.text.csv_cell`: a ``tag=`` value, a model name or an override that begins with
    ``=``, ``+``, ``-``, ``@``, tab or CR gets a leading apostrophe; numbers stay numbers)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns)
    if header:
        writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in row.items()} for row in rows)
    return out.getvalue()


def replace_plan_file(
    path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] = PLAN_COLUMNS, *, overwrite: bool = True
) -> None:
    """Write ``plan.csv`` afresh, atomically (a new file of an unpredictable name, then a rename);
    ``columns``: :data:`PLAN_COLUMNS`, or :data:`flopsweep.plan_space.COLUMNS` under ``plan_clusters``.
    Without ``overwrite`` (a single plan's: its folder may hold a file of the user's) the new file is
    hard-linked into place, which fails where anything is at ``path``: nothing there is replaced.

    Raises:
        OSError: the folder refuses the file; ``FileExistsError`` without ``overwrite``, ``path`` taken."""
    fd, tmp = create_new(path.parent, f".{path.name}.")
    try:
        with open(fd, "w", newline="") as fh:
            fh.write(_csv_text(rows, header=True, columns=columns))
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path, follow_symlinks=False)
    finally:
        tmp.unlink(missing_ok=True)


def start_plan_file(sweep_dir: Path) -> None:
    """``plan=true`` under ``-m``: start the sweep's ``plan.csv`` afresh, so that a second plan into
    one directory shows its own jobs, not the last plan's rows as well: the last plan's file is removed
    (never followed: a link there is removed, not its target). Called by the sweep callback before any
    job; the first job's rows create it with their header, :data:`PLAN_COLUMNS` (one row per job) or
    :data:`flopsweep.job.plansweep.SWEEP_COLUMNS` (``plan_clusters``: every set-up of the job), and
    each job appends its rows (:func:`append_plan_row`)."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    (Path(sweep_dir) / PLAN_FILE).unlink(missing_ok=True)


def sweep_plan_file(info: Any) -> Path:
    """The sweep's ``plan.csv`` a job of ``info`` (:class:`flopsweep.job.result.JobInfo`) appends to: in
    ``hydra.sweep.dir`` (``info.sweep_dir``, absolute), where the sweep's callback starts and reads it,
    however deep ``hydra.sweep.subdir`` puts the job (``${hydra.runtime.choices.model}/${seed}``: the job
    folder's parent held one ``plan.csv`` a model, and the sweep printed no table); the job folder's parent
    where no sweep folder is known."""
    return Path(info.sweep_dir) / PLAN_FILE if info.sweep_dir else Path(info.job_dir).parent / PLAN_FILE


def append_plan_row(
    path: Path, row: dict[str, Any] | list[dict[str, Any]], columns: tuple[str, ...] = PLAN_COLUMNS
) -> None:
    """Append one row (or a job's rows) to a sweep's ``plan.csv`` in one ``write`` (``O_APPEND``: jobs in
    parallel tasks do not interleave), never through a link and never blocking (``O_NONBLOCK``: a FIFO
    there is not waited on); a missing file is created with the header of ``columns``. Once the rows are
    written the job has started (:func:`flopsweep.unstarted.job_started`), in the same step (SIGINT and
    SIGTERM held: :func:`flopsweep.signals.signals_deferred`): an interrupt before it removes the job's folder
    (and, before any job's rows, the sweep's ``multirun.yaml``), one after it keeps them beside the rows.

    Raises:
        OSError: ``plan.csv`` is a link, a FIFO or no regular file (``ELOOP``, ``ENXIO``, ``EINVAL``), or
            its header is not ``columns`` (``EINVAL``: a sweep whose jobs plan both ways, with and without
            ``plan_clusters``, which one table cannot hold).
    """
    from flopsweep.signals import signals_deferred
    from flopsweep.unstarted import job_started

    with signals_deferred():
        _append_rows(path, row if isinstance(row, list) else [row], columns)
        job_started()  # a plan writes no record: its rows are what it leaves


def _append_rows(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    """:func:`append_plan_row`'s write."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
        text = _csv_text(rows, header=True, columns=columns)
    except FileExistsError:
        fd = os.open(path, flags)
        text = _csv_text(rows, header=False, columns=columns)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        head = _csv_text([], header=True, columns=columns).encode("utf-8")
        found = head_of(path, os.fstat(fd), len(head))
        if found and not head.startswith(found):  # a header still being written by another job: a prefix
            raise OSError(
                errno.EINVAL,
                f"{path} holds another plan's columns: one sweep's jobs plan with plan_clusters and without "
                "it, which one table cannot hold. Fix: give every job plan_clusters, or none",
            )
        data = text.encode("utf-8")
        while data:  # a regular file takes the whole write; a short one (a full disk) raises next time
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def head_of(path: Path, st: os.stat_result, size: int) -> bytes:
    """The first ``size`` bytes of the file at ``path``, opened again for reading, never through a link
    and never blocking; ``b""`` where it is no longer the file of ``st`` (replaced meanwhile)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return b""
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


MAX_PLAN_BYTES = 1 << 30
"""The largest ``plan.csv`` read (1 GiB, as :data:`flopsweep.job.plansweep.MAX_SWEEP_BYTES`)."""


def complete_records(text: str) -> tuple[list[list[str]], int]:
    """``plan.csv``'s records (the header first), its complete ones only, and how many were left out: a
    record whose fields are not the header's count, one where the CSV stops parsing (an unclosed quote)
    and every record after it, and a last one not ended by a newline (every row :func:`append_plan_row`
    writes ends in one). Such a record is a row cut short: a job killed while it appended, a disk that
    filled (a short write); pandas stopped on it (``ParserError: Expected 26 fields``, ``EOF inside
    string``) and the table of every other row was lost. ``([], 0)`` for an empty text."""
    import csv
    import io

    records: list[list[str]] = []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    cut = 0
    try:
        records.extend(reader)
    except csv.Error:  # the rest of the file does not parse: one record at least, maybe all that follow
        cut = 1
    if records and not cut and not text.endswith("\n"):
        records.pop()
        cut = 1
    if not records:
        return [], cut
    width = len(records[0])
    kept = [records[0], *(r for r in records[1:] if len(r) == width)]
    return kept, cut + len(records) - len(kept)


def plan_frame(path: str, text: str | None, **kwargs: Any) -> Any:
    """``plan.csv`` as pandas reads it: the file at ``path`` (a regular file of at most
    :data:`MAX_PLAN_BYTES`, never through a link: :func:`flopsweep.safe_read.read_regular`), or ``text`` (its
    CSV, where the file could not be written: :func:`unwritten_line`); its complete records only
    (:func:`complete_records`; ``frame.attrs["cut"]``: how many were left out). pandas parses with SIGINT and
    SIGTERM held (:func:`flopsweep.signals.signals_deferred`) and the signal raised after: a Ctrl-C that
    landed in the parser's read of the text (a Python call from its C tokenizer) came out as ``ParserError:
    Calling read(nbytes) on source failed``, which failed the job and let the sweep run on (exit 1).

    Raises:
        RecordError: ``path`` is a link, a FIFO, over the bound or unreadable."""
    import csv
    import io

    import pandas as pd

    from flopsweep.safe_read import read_regular
    from flopsweep.signals import signals_deferred

    if text is None:
        text = read_regular(Path(path), MAX_PLAN_BYTES).decode("utf-8", errors="replace")
    records, cut = complete_records(text)
    if cut:
        out = io.StringIO()
        csv.writer(out).writerows(records)
        text = out.getvalue()
    with signals_deferred():
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False, **kwargs)
    frame.attrs["cut"] = cut
    return frame


def cut_line(frame: Any, path: str) -> list[str]:
    """``N rows of PATH were cut short (...) and are left out``, once, where :func:`plan_frame` left rows out;
    else none."""
    cut = int(frame.attrs.get("cut") or 0)
    if not cut:
        return []
    return [
        f"{plural(cut, 'row')} of {printable(path)} {'was' if cut == 1 else 'were'} cut short (a job stopped "
        "while it wrote its row, or the disk filled) and left out"
    ]


def plan_csv(rows: list[dict[str, Any]], columns: tuple[str, ...] = PLAN_COLUMNS, lines: str = "\r\n") -> str:
    """``rows`` as the text of a ``plan.csv`` (its header first), guarded as the file is
    (:func:`_csv_text`); ``lines="\\n"``: as printed, each line ending in a newline (the file's end in
    CR LF, the CSV standard's)."""
    text = _csv_text(rows, header=True, columns=columns)
    return text if lines == "\r\n" else text.replace("\r\n", lines)


UNWRITABLE: dict[str, Any] = {"path": None, "error": None}
"""A single plan whose run folder could not be made (a read-only working directory): the ``plan.csv``
it would have written there and the ``OSError`` (:func:`flopsweep.callbacks.SweepSummary.on_run_start`
ran it in a private folder removed at its end). The job, in the same process, reads it
(:func:`write_plan`)."""


def unwritten_line(path: Path | str, exc: OSError) -> str:
    """The one line of a plan whose ``plan.csv`` could not be written: ``flopsweep: plan.csv could not be
    written: PATH (OS error); the plan above is complete. Fix: ...``."""
    why = exc.strerror or str(exc)
    fix = "run from a folder you can write to, or set hydra.run.dir=DIR (hydra.sweep.dir=DIR under -m) to one"
    if exc.errno == errno.EEXIST:  # a single plan's: made there meanwhile, never replaced
        fix = f"remove {printable(str(path))} if it is yours, or {another(Path(path).parent)}"
    return (
        f"flopsweep: plan.csv could not be written: {printable(str(path))} ({why}); the plan above is "
        f"complete. Fix: {fix}"
    )


def write_plan(
    path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] = PLAN_COLUMNS, *, overwrite: bool = True
) -> str | None:
    """Write ``plan.csv`` afresh (:func:`replace_plan_file`; ``overwrite`` false: never over a file there,
    a single plan's); None, or the line saying it could not be (:func:`unwritten_line`): an ``OSError``
    there (a read-only folder, a full disk, a folder or a file at its path), or a run folder that could not
    be made (:data:`UNWRITABLE`). A plan prints its table either way."""
    if UNWRITABLE["path"] is not None:
        return unwritten_line(UNWRITABLE["path"], UNWRITABLE["error"])
    try:
        replace_plan_file(path, rows, columns, overwrite=overwrite)
    except OSError as exc:
        return unwritten_line(path, exc)
    return None


RANKED_BY = {
    "predicted_iteration_time_s": "predicted_iteration_time_s",
    "predicted_tokens_per_s_per_gpu": "predicted_tokens_per_s_per_device",
    "predicted_mfu": "predicted_mfu",
    "est_peak_gib_per_rank": "est_peak_gib_per_rank",
    "predicted_usd_per_million_tokens": "predicted_usd_per_million_tokens",
    "budget_gpu_hours": "predicted_budget_gpu_hours",
    "budget_days": "predicted_budget_days",
    "budget_usd": "predicted_budget_usd",
}
"""A :data:`flopsweep.objective.PLANNED` column -> the ``plan.csv`` column of one row per job that
:func:`rank_plan_file` ranks by; another (J/token, model TFLOPs, global tokens/s) ranks by tokens/s
per GPU."""


def rank_plan_file(path: str, objective_name: str) -> list[str]:
    """Number the rows of a sweep's ``plan.csv`` (one per job) by ``objective_name``: ``rank`` 1 =
    best, among the ``ok`` rows that do not fail ``fits`` and have a value; the others blank. The
    file is rewritten afresh, atomically, with its complete rows (:func:`complete_records`). An objective a
    plan cannot predict ranks by tokens/s per GPU. Returns :func:`cut_line`'s line where rows were cut
    short and left out, else none."""
    import pandas as pd

    from flopsweep import objective
    from flopsweep.config import ConfigError

    try:
        column, better = objective.planned(objective_name)
    except ConfigError:
        column, better = "predicted_tokens_per_s_per_gpu", "higher"
    column = RANKED_BY.get(column, "predicted_tokens_per_s_per_device")
    frame = plan_frame(path, None, dtype=str)  # complete rows only: a row cut short is left out, and said
    cut = cut_line(frame, path)
    values = pd.to_numeric(frame.get(column, pd.Series(dtype=str)), errors="coerce")
    usable = (frame["status"] == "ok") & (frame["fits"] != "False") & values.notna()
    order = values[usable].rank(method="first", ascending=better == "lower")
    frame["rank"] = ""
    frame.loc[usable, "rank"] = order.astype(int).astype(str)
    replace_plan_file(Path(path), frame.to_dict("records"), columns=tuple(frame.columns))
    return cut
