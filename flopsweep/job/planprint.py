"""What a plan of one row per job prints from its ``plan.csv`` (:mod:`flopsweep.job.plantable`): the
compact terminal table (:func:`plan_table`: :data:`TERMINAL_COLUMNS`, each cell as :func:`plan_cell`
shows it), ``plan_format=csv|json`` (:func:`plan_output`, :func:`json_rows`) and the stderr lines about
its ``invalid`` rows and the rows that do not fit (:func:`plan_invalid_line`, :func:`invalid_jobs_line`,
:func:`plan_refused_line`, :func:`plan_unfit_line`). Torch-free; imported by ``run.py``, the sweep's
:func:`flopsweep.job.plansweep.plan_lines` and the sweep callback, never by the job's run path.
"""

from __future__ import annotations

from typing import Any

from flopsweep.clusters import HINT_GPU, set_plan_gpu
from flopsweep.job.planfit import fitted_markdown, wrapped_all  # a table's rows are never wrapped
from flopsweep.job.plantable import cut_line, plan_frame
from flopsweep.oom_note import GPU_MEMORY_FIX, HOST_MEMORY_FIX
from flopsweep.text import csv_text, plural, printable


def plan_cell(cell: object) -> object:
    """A cell of ``plan.csv`` as the plan table shows it: the CSV guard's apostrophe removed
    (:func:`flopsweep.text.csv_text`: ``+sweep=x`` reads as typed), control characters escaped
    (:func:`printable`: the row stays one line and writes nothing but text to the terminal) and
    ``|`` escaped as ``\\|`` (a ``tag=a|b`` must not open a column of the markdown table); numbers
    as they are."""
    if not isinstance(cell, str):
        return cell
    return printable(csv_text(cell)).replace("|", "\\|")


TERMINAL_COLUMNS = {
    "job": "job",
    "model": "model",
    "overrides": "overrides",
    "status": "status",
    "reason": "reason",
    "world_size": "world",
    "layout": "layout",
    "est_peak_gib_per_rank": "peak_GiB",
    "fits": "fits",
    "predicted_world_size": "pred_world",
    "predicted_iteration_time_s": "step_s",
    "predicted_tokens_per_s_per_device": "tokens/s/GPU",
    "predicted_mfu": "MFU",
    "predicted_budget_gpu_hours": "GPU_h",
    "predicted_budget_days": "days",
    "predicted_budget_usd": "USD",
    "predicted_usd_per_million_tokens": "USD/Mtok",
    "rank": "rank",
    "prediction_source": "source",
    "note": "note",
}
"""``plan.csv`` column -> its header in the terminal table (:func:`plan_table`); the other columns
(``seq_len``, ``n_params``, ``model_flops_per_step``, ``fits_on``, ``predicted_nnodes``, ``memory_fix``: the
line of :func:`plan_unfit_line`) are in the file and in ``plan_format=csv|json``."""

FOOTNOTED = ("reason", "prediction_source", "note")
"""Long text columns shown as ``[k]`` in the table, each distinct text once below it."""

_DROPPED_OVERRIDES = ("plan=", "plan_format=")


def _shown_overrides(cell: str) -> str:
    """An ``overrides`` cell without ``plan=true`` and ``plan_format=``, which every row shares, each
    override as typed (:func:`flopsweep.shown_overrides.as_typed`: ``tag=${seed}``, not Hydra's
    ``tag=$\\{seed\\}``)."""
    from flopsweep.shown_overrides import shown

    return shown(word for word in cell.split(" ") if not word.startswith(_DROPPED_OVERRIDES))


def cluster_hint(gpu: str) -> str:
    """The clusters a plan's hints name: one node and eight nodes of eight ``gpu``
    (:func:`flopsweep.clusters.plans_gpu`: the GPU the plan is about), e.g. ``[H200:1x8,H200:8x8]``."""
    return f"plan_clusters=[{gpu}:1x8,{gpu}:8x8]"


def plan_table(path: str, gpu: str = HINT_GPU, *, text: str | None = None) -> str:
    """``plan.csv`` as one compact table for the terminal (pandas' markdown through tabulate): the
    columns of :data:`TERMINAL_COLUMNS` that some row fills, under short headers; the long
    ``prediction_source`` and ``note`` texts as ``[k]`` references, each distinct text printed once
    below the table (a plan of 27 jobs sharing one source prints it once, not 27 times), and the
    overrides that every job shares once (``every job: ...``), each row keeping its own; then the
    file's path, which keeps every column, and the hint that ranks set-ups on clusters of ``gpu``
    (:func:`cluster_hint`). Each text cell as :func:`plan_cell` shows it (one line, control characters
    escaped, ``|`` escaped), a note under it wrapped (``planfit.wrapped``). The CSV keeps the values
    (guarded against spreadsheet formulas: :func:`flopsweep.job.plantable.plan_csv`)."""
    frame = plan_frame(path, text)
    cut = cut_line(frame, path)
    shown = [c for c in TERMINAL_COLUMNS if c in frame.columns and (frame[c].astype(str) != "").any()]
    frame = frame[shown].copy()
    if {"world_size", "predicted_world_size"} <= set(shown) and (
        frame["world_size"].astype(str) == frame["predicted_world_size"].astype(str)
    ).all():  # predicted where it runs: the column says nothing the world's does not
        frame = frame.drop(columns="predicted_world_size")
    shared: list[str] = []
    if "overrides" in frame.columns:
        words = frame["overrides"].astype(str).map(_shown_overrides).str.split(" ")
        if len(words):  # what every job shares (a single plan's one row: all) is printed once, below it
            shared = [w for w in words.iloc[0] if w and all(w in row for row in words)]
        frame["overrides"] = words.map(lambda row: " ".join(w for w in row if w not in shared))
        if not (frame["overrides"] != "").any():  # a column of blanks: a single plan's table was 300 wide
            frame = frame.drop(columns="overrides")
    escaped = frame.apply(lambda column: column.map(plan_cell))
    notes: dict[str, int] = {}
    for column in FOOTNOTED:
        if column in escaped.columns:
            escaped[column] = escaped[column].map(
                lambda text: f"[{notes.setdefault(text, len(notes) + 1)}]" if text != "" else ""
            )
    table, lines = fitted_markdown(escaped, TERMINAL_COLUMNS), [f"[{k}] {text}" for text, k in notes.items()]
    if shared:
        lines.append(f"{'every job' if len(frame) > 1 else 'overrides'}: {plan_cell(' '.join(shared))}")
    hint = f"{cluster_hint(gpu)} ranks set-ups on clusters: docs/plan.md"
    where = f"; every column: {printable(path)}" if text is None else ""
    lines += [*cut, f"(plan: no worker started, no record written{where}; {hint})"]
    return "\n".join([*table, *wrapped_all(lines)])  # the notes at the table's width


def plan_invalid_line(path: str, *, text: str | None = None, shown: bool = False) -> str | None:
    """The line a plan prints (to stderr) when some of its rows are ``invalid``: ``N of M jobs are
    invalid (the status and reason columns); job J: <its reason>``, the first invalid row's
    ``reason``, the run's one line naming the key, the value and the fix, alone (where the job was
    placed is its ``note``, in the table), and, when other invalid rows give other reasons, how
    many; ``shown`` (the table printed, its footnotes holding each reason): the count alone
    (:func:`invalid_jobs_line`). None when no row is ``invalid``. A plan is a report, so it still exits 0;
    this line keeps its refusals from passing unseen below a long table."""
    import pandas as pd

    frame = plan_frame(path, text, dtype=str)
    invalid = frame[frame["status"] == "invalid"]
    if invalid.empty:
        return None
    reasons = invalid.get("reason", invalid.get("note", pd.Series("", index=invalid.index)))
    jobs = [str(j) or "0" for j in invalid.get("job", pd.Series("", index=invalid.index))]
    return invalid_jobs_line(list(zip(jobs, map(str, reasons), strict=True)), len(frame), shown=shown)


def invalid_jobs_line(invalid: list[tuple[str, str]], total: int, *, shown: bool = False) -> str:
    """``flopsweep: N of M jobs are invalid (the status and reason columns); job J: <its reason>``: the
    line of a sweep's plan, one row per job (:func:`plan_invalid_line`) or over clusters
    (:func:`flopsweep.job.plansweep.sweep_output`), from ``invalid`` (each invalid job's number and its one
    line, in job order) and ``total`` (the sweep's jobs); the first job's reason, and how many other
    reasons the reason column holds. ``shown``: the table printed above holds each reason (a footnote, or
    the sweep's ``job J is invalid: ...`` lines): the count alone, each refusal said once (it was twice)."""
    line = f"flopsweep: {len(invalid)} of {total} jobs are invalid (the status and reason columns)"
    if shown:
        return f"{line}; each one's reason is printed with the table"
    job, reason = invalid[0]
    first = printable(reason)[:400]
    others = len({r for _, r in invalid} - {reason})
    more = f" ({others} other reason{'s' if others > 1 else ''} in the reason column)" if others else ""
    return f"{line}; job {job}: {first}{more}" if first else line


def plan_refused_line(path: str, *, text: str | None = None) -> str | None:
    """The one line of a single plan (no ``-m``, no ``plan_clusters``) whose every row is ``invalid``: its
    reason (``Invalid config: KEY=VALUE: ... Fix: ...``), or :func:`plan_invalid_line` where the rows give
    several; None when a row is not invalid. ``run.py`` prints it alone and exits 2, as the job does for a
    config it refuses before the plan (the table would repeat the reason as its footnote)."""
    import pandas as pd

    frame = plan_frame(path, text, dtype=str)
    if frame.empty or not frame["status"].eq("invalid").all():
        return None
    reasons = frame.get("reason", frame.get("note", pd.Series("", index=frame.index)))
    first = printable(str(reasons.iloc[0]))[:400]
    if len(set(reasons)) == 1 and first:
        return first
    line = plan_invalid_line(path, text=text)
    return line.removeprefix("flopsweep: ") if line else None


def plan_unfit_line(
    path: str, gpu: str = HINT_GPU, *, text: str | None = None, device: str = "cpu"
) -> str | None:
    """The line a plan prints (to stderr) when some ``ok`` rows do not fit (``fits`` False): ``N of
    M jobs do not fit; job J: model=NAME: estimated X GiB per rank, more than <fits_on>. Fix: ...``,
    (``1 of 5 jobs does``, ``1 of 1 job does``),
    the first such row, its fix the row's ``memory_fix`` (the levers its config has not pulled, each
    estimated: :func:`flopsweep.memory_fix.gpu_memory_fix`; else every lever,
    :data:`~flopsweep.oom_note.GPU_MEMORY_FIX`) and the clusters of ``gpu`` that rank the set-ups
    that fit (:func:`cluster_hint`); None when every row fits or is not known to. A plan is a report:
    it still exits 0, and such a row is not ranked (:func:`flopsweep.job.plantable.rank_plan_file`).
    ``device``: the sweep's ``device`` as given; a host row's fix says ``drop device=cpu`` only where it is
    ``cpu`` (:func:`flopsweep.clusters.set_plan_gpu`), else ``set plan_gpu=NAME``."""

    frame = plan_frame(path, text, dtype=str)
    unfit = frame[(frame["status"] == "ok") & (frame.get("fits", "") == "False")]
    if unfit.empty:
        return None
    row = unfit.iloc[0]
    on_host = str(row.get("fits_on", "")).startswith("host")  # the CPU: every rank in its memory
    own = "" if on_host else printable(str(row.get("memory_fix", "") or ""))  # the row's own levers
    hint = f"{cluster_hint(gpu)} ranks the set-ups that fit"
    # a host row is a device=cpu plan, which refuses plan_gpu: the fix drops it (clusters.set_plan_gpu)
    given = "cpu" if device == "cpu" else "auto"
    to_gpu = f"{set_plan_gpu('NAME', given)} to plan it for a GPU (e.g. {set_plan_gpu(gpu, given)})"
    host_fix = f"{HOST_MEMORY_FIX}; or {to_gpu}"
    fix = host_fix if on_host else f"{own or GPU_MEMORY_FIX}; {hint}"
    said = (
        f"model={printable(str(row.get('model', '')))}: estimated {row.get('est_peak_gib_per_rank', '')} GiB"
        f" per rank, more than {printable(str(row.get('fits_on', '')))}"
    )
    job = row.get("job", "") or 0
    counted = f"{len(unfit)} of {plural(len(frame), 'job')} {'does' if len(unfit) == 1 else 'do'} not fit"
    return f"flopsweep: {counted}; job {job}: {said}. Fix: {fix}."


def plan_output(path: str, fmt: str, gpu: str = HINT_GPU, *, text: str | None = None) -> str:
    """What ``plan=true`` prints for ``plan_format=fmt``: ``table`` (:func:`plan_table`, its hint
    naming ``gpu``), ``csv`` (the file's text) or ``json`` (a list of its rows, each a dict of its
    columns; blanks as null; strict JSON: a non-finite number is null and its row's ``nulls`` says why,
    :func:`flopsweep.strict_json.dumps`); ``text``: the file's CSV where it could not be written."""
    if fmt == "table":
        return plan_table(path, gpu, text=text)
    frame = plan_frame(path, text)
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    from flopsweep import strict_json

    return strict_json.dumps(json_rows(plan_frame(path, text, dtype=str)), indent=1, default=str)


def json_rows(frame: Any) -> list[dict[str, Any]]:
    """``plan.csv``'s rows (a frame of its cells as text) as ``plan_format=json`` gives them: a blank cell
    ``None``; a column whose other cells are all numbers holds numbers (an int where whole), ``nan`` and
    ``inf`` among them floats that :func:`flopsweep.strict_json.dumps` writes null, saying why under
    ``nulls``; one of ``True``/``False`` and blanks holds booleans; any other column text. (Read back as
    text by pandas, a column with a blank or a ``nan`` cell had been all text: ``"0.172"``, ``"nan"``.)"""
    columns: dict[str, list[Any]] = {}
    for name in frame.columns:
        cells = ["" if v is None else str(v) for v in frame[name]]
        filled = [c for c in cells if c != ""]
        if filled and all(c in ("True", "False") for c in filled):
            columns[name] = [None if c == "" else c == "True" for c in cells]
        elif filled and all(_number(c) is not None for c in filled):
            columns[name] = [None if c == "" else _number(c) for c in cells]
        else:
            columns[name] = [None if c == "" else c for c in cells]
    return [{name: columns[name][i] for name in columns} for i in range(len(frame))]


def _number(cell: str) -> int | float | None:
    """A ``plan.csv`` cell as the number it holds (``12``, ``1.6e+09``, ``nan``, ``inf``), else None."""
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return None
