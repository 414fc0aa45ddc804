"""Why a column is blank: one line per column that an ``ok`` run leaves blank, with the fix.

A failed run's metrics are blank by design (its status says why), so only ``ok`` runs are
explained. A derived column is blank when the records cannot give it:

- ``scaling_efficiency``: the set-up (``setup_id``) has no ok one-rank run, or ran at one
  world size only; a run with a layout (``tp=2``) has no 1-rank run of its set-up without the
  layout either (:func:`analysis.load.add_scaling`);
- ``speedup``: no ok baseline run matches the run's other set-up columns
  (:func:`analysis.query.compare`), or the run is not ranked (``tflops?``);
- ``setup_id``, ``model_tflops_per_device_recomputed``: the record lacks their inputs.

A metric column is blank when the records do not hold it: MFU without a datasheet peak, the
breakdown without ``profile=true``, GPU memory on the CPU, and so on (:data:`METRIC_HINTS`).

    for line in blank_notes(runs, ["scaling_efficiency"], loaded=df, where="multirun/x"):
        print(line, file=sys.stderr)
    # scale_eff is blank: no nproc_per_node=1 run of the same set-up in multirun/x; add
    # nproc_per_node=1 to the sweep
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd

from analysis.catalogue import BREAKDOWN_COLUMNS, METRIC_FIELDS, header
from analysis.sanitize import printable
from flopsweep.text import plural

MAX_NAMED = 3
"""Runs named in a line (``gpt-1.3b ddp x2``) before ``and N more``."""

_PATHS = {spec.name: "metrics." + ".".join(spec.path or (spec.key,)) for spec in METRIC_FIELDS}

METRIC_HINTS: dict[str, tuple[str, str]] = {
    "mfu": ("no datasheet peak for the device and precision ({source})", "see flopsweep/peaks.py"),
    "hfu": (
        "no datasheet peak for the device and precision ({source}), or no hardware FLOPs "
        "(activation_checkpointing=memory_budget: the compiler decides what it recomputes)",
        "see flopsweep/peaks.py; rank memory_budget runs on mfu",
    ),
    "mfu_fp8": ("only fp8 runs on a GPU with an fp8 peak have it", "run precision=fp8 to fill it"),
    "peak_tflops_fp8": ("only fp8 runs on a GPU with an fp8 peak have it", "run precision=fp8 to fill it"),
    "tflops_per_device": ("eq. 3 describes GPT-2 shapes only", "rank on model_tflops_per_device"),
    "peak_cuda_allocated_gib": ("CPU runs record no GPU memory", "run on a GPU (device=cuda) to fill it"),
    "peak_cuda_reserved_gib": ("CPU runs record no GPU memory", "run on a GPU (device=cuda) to fill it"),
    **{
        name: (
            "the run was not profiled (or its profile failed or is damaged: see warn)",
            "run with profile=true, or fix what its profile_failed warning names",
        )
        for name in BREAKDOWN_COLUMNS
    },
    "usd_per_million_tokens": ("the run had no price", "run with cost.usd_per_gpu_hour=PRICE to fill it"),
    "budget_usd": ("the run had no price or no budget", "run with cost.usd_per_gpu_hour and budget.tokens"),
    **{
        name: ("the run had no token budget", "run with budget.tokens=15e12 (say) to fill it")
        for name in ("budget_tokens", "budget_gpu_hours", "budget_days", "budget_energy_kwh")
    },
}
"""Metric column -> (why its value is missing, what to do); ``{source}`` is the record's
``peak_tflops_source``. Other metric columns get a line naming the record key."""


def _where(where: str) -> str:
    return f" in {where}" if where else " in these records"


def _ranks(df: pd.DataFrame) -> pd.Series:
    """The world size, or ``nproc_per_node x nnodes`` where the record has none (a run that
    never launched)."""
    nproc = pd.to_numeric(df["nproc_per_node"], errors="coerce")
    return df["world_size"].astype("Float64").fillna(nproc * df["nnodes"].astype("Float64").fillna(1))


def _label(run: pd.Series) -> str:
    zero = "" if pd.isna(run.get("zero_stage")) else f" ZeRO-{run['zero_stage']}"
    world = "" if pd.isna(run.get("world_size")) else f" x{int(run['world_size'])}"
    return f"{run.get('model')} {run.get('backend')}{zero}{world}"


def _named(rows: pd.DataFrame) -> str:
    labels = list(dict.fromkeys(_label(r) for _, r in rows.iterrows()))
    more = len(labels) - MAX_NAMED
    return ", ".join(labels[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def _scaling_reason(run: pd.Series, loaded: pd.DataFrame, where: str) -> str:
    """Why ``run`` (ok) has no ``scaling_efficiency``, and what to run: see :func:`add_scaling`."""
    if pd.isna(run["tokens_per_s_per_device"]):
        return "the record has no metrics.tokens_per_s_per_device"
    if pd.isna(run["world_size"]) or pd.isna(run["setup_id"]):
        return "the record has no system.world_size or no config"
    same = loaded[loaded["setup_id"].eq(run["setup_id"])]
    ok = same["status"].eq("ok") & same["tokens_per_s_per_device"].notna() & same["world_size"].notna()
    with_layout = "base_setup_id" in run and run["base_setup_id"] != run["setup_id"]
    if with_layout and same["world_size"].nunique() < 2:
        return (
            f"no 1-rank run of the same set-up without its layout (config.parallel){_where(where)}; add "
            "one with nproc_per_node=1 and the parallel.* keys at their defaults, or run this layout "
            "at two or more world sizes"
        )
    one = _ranks(same).eq(1).fillna(False).astype(bool)
    if (ok & one).any():
        return (
            "the set-up ran at world size 1 only; add nproc_per_node=2 (or more) to the sweep "
            "to measure scaling"
        )
    failed = same.loc[one & same["status"].ne("ok"), "status"]
    if not failed.empty:
        return (
            f"the nproc_per_node=1 run of the same set-up ended {failed.iloc[0]}{_where(where)}; "
            "fix it and re-run the sweep with resume=true"
        )
    return f"no nproc_per_node=1 run of the same set-up{_where(where)}; add nproc_per_node=1 to the sweep"


def _speedup_reason(run: pd.Series, baseline: str, where: str) -> str:
    if run.get("tflops_mismatch"):
        return "its TFLOPs fail the recomputation from its stored FLOPs (tflops?), so it is not ranked"
    base = baseline or "the baseline"
    return (
        f"no ok {base} run with the same other set-up (model, precision, micro batch, world size, "
        f"...){_where(where)}; add the {base} run of that set-up to the sweep"
    )


ENERGY_BLANK = (
    "energy_j",
    "energy_sampled_j",
    "joules_per_token",
    "power_w_mean",
    "sm_clock_mhz_mean",
    "budget_energy_kwh",
)
"""Columns blank where the run had no GPU energy counter: the record's ``metrics.energy_reason``
says why (a CPU run, no nvidia-ml-py, a GPU without the counter); records made before the NVML
reader have no reason."""


PREDICTION_BLANK = ("predicted_iteration_time_s", "predicted_tokens_per_s", "predicted_source")
"""Columns blank where the record has no prediction (recorded before ``metrics.predicted``: ``--predict``
fills them) or its prediction has no figure (``predicted_source`` says why: ``no prediction: ...``)."""


def _metric_reason(column: str) -> Callable[[pd.Series], str]:
    def reason(run: pd.Series) -> str:
        if column in ENERGY_BLANK and not (
            column == "budget_energy_kwh" and pd.isna(run.get("budget_tokens"))
        ):
            why = run.get("energy_reason")
            why = (
                printable(why[:120]) if isinstance(why, str) and why else "the record has no metrics.energy_j"
            )
            return f"{why}; run on a GPU with nvidia-ml-py (pip install -e '.[gpu]') to fill it"
        if column in PREDICTION_BLANK:
            source = run.get("predicted_source")
            if isinstance(source, str) and source:  # the prediction said why it has no figure
                return printable(source[:160])
            return "the record has no metrics.predicted (made before it); run python -m analysis --predict"
        if column in METRIC_HINTS:
            why, fix = METRIC_HINTS[column]
            source = run.get("peak_tflops_source")
            source = "no source recorded" if pd.isna(source) or not source else str(source)
            return f"{why.format(source=source[:80])}; {fix}"
        return f"the record has no {_PATHS.get(column, column)}"

    return reason


def _reasons(
    column: str, loaded: pd.DataFrame, where: str, baseline: str
) -> Callable[[pd.Series], str] | None:
    if column == "scaling_efficiency":
        return lambda run: _scaling_reason(run, loaded, where)
    if column == "speedup":
        return lambda run: _speedup_reason(run, baseline, where)
    if column == "setup_id":
        return lambda run: "the record has no config section"
    if column == "prediction_error":
        return _metric_reason("predicted_iteration_time_s")
    if column == "model_tflops_per_device_recomputed":
        return lambda run: (
            "the record lacks metrics.model_flops_per_iteration, the mean step time or system.world_size"
        )
    if column in _PATHS:
        return _metric_reason(column)
    return None


Blanks = tuple[tuple[tuple[str, tuple[int, ...]], ...], int, int]
"""``((reason, positions of its blank ok runs), ...), blank count, ok count)`` of one column."""


def _blanks(
    runs: pd.DataFrame, column: str, loaded: pd.DataFrame | None, where: str, baseline: str
) -> Blanks | None:
    """The reasons for the blank ``column`` cells of ok runs, grouped; None when there are none."""
    if column not in runs or "status" not in runs:
        return None
    reason = _reasons(column, runs if loaded is None else loaded, where, baseline)
    ok = runs[runs["status"].eq("ok")].reset_index(drop=True)
    blank = ok[ok[column].isna()]
    if reason is None or blank.empty:
        return None
    by_reason: dict[str, list[int]] = {}
    for position, run in blank.iterrows():
        by_reason.setdefault(reason(run), []).append(position)
    return tuple((why, tuple(rows)) for why, rows in by_reason.items()), len(blank), len(ok)


def _line(runs: pd.DataFrame, columns: list[str], blanks: Blanks) -> str:
    """The one line of :func:`why_blank` for ``columns`` that share ``blanks``."""
    by_reason, n_blank, n_ok = blanks
    ok = runs[runs["status"].eq("ok")].reset_index(drop=True)
    names = ", ".join(header(c) for c in columns)
    head = f"{names} {'is' if len(columns) == 1 else 'are'} blank"
    if n_blank < n_ok:
        head += f" for {n_blank} of {plural(n_ok, 'ok run')}"
    if len(by_reason) == 1:
        ((why, rows),) = by_reason
        named = f" ({_named(ok.loc[list(rows)])})" if n_blank < n_ok else ""
        return f"{head}{named}: {why}"
    return f"{head}. " + " ".join(f"{_named(ok.loc[list(rows)])}: {why}." for why, rows in by_reason)


def why_blank(
    runs: pd.DataFrame,
    column: str,
    *,
    loaded: pd.DataFrame | None = None,
    where: str = "",
    baseline: str = "",
) -> str | None:
    """One line saying why ``column`` is blank for ok runs of ``runs``, and what to run to fill it;
    None when no ok run has it blank, or for a column that is not a metric or a derived one.

    Args:
        runs: the rows shown (a :func:`analysis.load` frame, filtered or sorted).
        loaded: every loaded row, where a one-rank run of the same set-up is looked for
            (default: ``runs``).
        where: the searched paths, for the message (``no ... run in DIR``).
        baseline: the ``--baseline`` set-up (``backend=fsdp``); default ``runs.attrs["baseline"]``.
    """
    notes = blank_notes(runs, [column], loaded=loaded, where=where, baseline=baseline)
    return notes[0] if notes else None


def blank_notes(
    runs: pd.DataFrame,
    columns: Iterable[str],
    *,
    loaded: pd.DataFrame | None = None,
    where: str = "",
    baseline: str = "",
) -> list[str]:
    """:func:`why_blank` for ``columns`` (each once, in order); columns blank in the same runs for
    the same reasons share one line (``MFU, HFU are blank: ...``)."""
    baseline = baseline or runs.attrs.get("baseline", "")
    groups: dict[Blanks, list[str]] = {}
    for column in dict.fromkeys(columns):
        if found := _blanks(runs, column, loaded, where, baseline):
            groups.setdefault(found, []).append(column)
    return [_line(runs, names, found) for found, names in groups.items()]


def speedup_ci_lines(runs: pd.DataFrame) -> list[str]:
    """One line per reason that a shown run's ``speedup_ci_low``/``speedup_ci_high`` end has no finite
    value (``runs.attrs["speedup_ci_reasons"]``, :func:`analysis.query.compare` by
    :func:`analysis.significance.speedup_interval`): ``the speedup's 95% interval has a blank end for 1 run
    (gpt-tiny / ddp): no high end: the baseline's 95% interval reaches 0 (a ratio over 0 or less has
    no bound)``; none without ``--baseline``."""
    said = runs.attrs.get("speedup_ci_reasons") or {}
    by_reason: dict[str, list] = {}
    for label, run in runs.iterrows():
        key = run.get("run_dir") if isinstance(run.get("run_dir"), str) else label
        if (why := said.get(key)) is not None:
            by_reason.setdefault(why, []).append(label)
    return [
        f"the speedup's 95% interval has a blank end for {plural(len(rows), 'run')} "
        f"({_named(runs.loc[rows])}): {why}"
        for why, rows in by_reason.items()
    ]
