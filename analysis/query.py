"""Select, rank and compare runs of a :func:`analysis.load` DataFrame.

Only ``ok`` runs count in :func:`best`, :func:`compare` and :func:`pivot`: a failed
run's metrics are blank and never enter a maximum or an average. Nor does a run
flagged ``tflops_mismatch`` (its recorded TFLOPs disagree with its own stored FLOPs):
it is left out of every ranking, and the log says so. The default metric is
:data:`analysis.load.RANK_METRIC` (model TFLOPs per device); which way a metric is
better comes from :data:`analysis.load.BETTER` (``MetricSpec.better`` of
:data:`flopsweep.record.METRIC_SPECS`, plus the derived ``scaling_efficiency`` and ``speedup``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from analysis.load import HIGHER_IS_BETTER, LOWER_IS_BETTER, RANK_METRIC, failed_checks, rankable
from analysis.sanitize import printable
from analysis.significance import ci_of, speedup_interval
from analysis.spread import JOINED
from flopsweep.columns import IDENTITY_COLUMNS, dependents
from flopsweep.identity import LAYOUT_ROW_KEYS, compared_layout
from flopsweep.text import plural

log = logging.getLogger("analysis")

SETUP_COLUMNS = list(IDENTITY_COLUMNS)
"""Columns that describe a set-up (what a sweep varies), as opposed to its measurements:
:data:`flopsweep.columns.IDENTITY_COLUMNS` (every knob, the world size and the device)."""


class AnalysisError(ValueError):
    """A request the data cannot answer; the message says what to change."""


class ColumnError(AnalysisError, KeyError):
    """An unknown column name; the message names the nearest and the first valid ones
    (:func:`check_columns`)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


LISTED_COLUMNS = 6
"""How many valid columns (the first, set-up ones) a :class:`ColumnError` names: a record has some 140,
too many for a one-line message; the did-you-mean names the nearest ones."""


DISPLAY_ONLY = ("not_significant",)
"""Columns the table adds for its flags (``tie?``), not of :func:`analysis.load`'s frame: accepted, but not
offered, listed nor counted in a :class:`ColumnError`, so ``--sort`` and ``--columns`` count the same."""


def near_columns(name: str, columns: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``columns`` nearest ``name``, without case: those that contain it first, the ranked
    metrics (:data:`RANK_METRIC` first, then the others of :data:`HIGHER_IS_BETTER` and
    :data:`LOWER_IS_BETTER`) before the rest and the most alike (``difflib``) first among each; then
    ``difflib.get_close_matches``'s; a column that is ``name`` in other case before all (``MODEL``:
    ``model``). ``tflop``: ``model_tflops_per_device`` first, not ``peak_tflops``."""
    import difflib

    lowered = {c.lower(): c for c in reversed(columns)}  # case aside: 'MFU' names 'mfu'
    key = str(name).lower()
    ranked = HIGHER_IS_BETTER | LOWER_IS_BETTER

    def order(low: str) -> tuple[bool, bool, bool, float]:  # the name itself in other case first: MODEL
        ratio = difflib.SequenceMatcher(None, key, low).ratio()
        return low != key, lowered[low] != RANK_METRIC, lowered[low] not in ranked, -ratio

    holding = sorted((low for low in lowered if key and key in low), key=order)
    alike = difflib.get_close_matches(key, list(lowered), n=n)
    return [lowered[low] for low in dict.fromkeys([*holding, *alike])][:n]


def column_list(text: str) -> list[str]:
    """The columns a list of them names (``--columns``, ``--best-by``, each part of ``--pivot``): ``text``
    split at its commas, each name without the spaces around it (``'model, precision'`` -> ``[model,
    precision]``). ``--columns`` had stripped them while ``--best-by`` and ``--pivot`` refused ``unknown
    column ' precision' ...; did you mean 'precision'?``, a fix that dropped ``model`` (docs/reliability-10.md
    #601)."""
    return [c.strip() for c in text.split(",")]


LIST_OPTIONS = ("--columns", "--best-by")
"""The options that take a comma-separated list of columns (``--best-by 'model precision'``: one
unknown column, whose fix is ``model,precision``, not ``precision``)."""


def check_columns(df: pd.DataFrame, names: Iterable[str], what: str = "column") -> None:
    """Raise :class:`ColumnError` naming the first of ``names`` not in ``df``, the nearest names
    (:func:`near_columns`: ``did you mean 'tokens_per_s'?``), the first :data:`LISTED_COLUMNS` valid ones
    and how many there are in all (one line; :data:`DISPLAY_ONLY` columns left out of all three)."""
    columns = [str(c) for c in df.columns if c not in DISPLAY_ONLY]
    for name in names:
        if name not in df.columns:
            near = near_columns(str(name), columns)
            hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
            words = str(name).split()
            if what in LIST_OPTIONS and len(words) > 1 and all(w in df.columns for w in words):
                hint = f"; did you mean {','.join(words)!r}? (a comma, not a space, between columns)"
            listed = ", ".join(columns[:LISTED_COLUMNS])
            more = f", ... ({len(columns)} in all)" if len(columns) > LISTED_COLUMNS else ""
            raise ColumnError(f"unknown column {name!r} in {what}{hint}; valid columns: {listed}{more}")


def normalize(value: Any) -> str:
    """Text form used to match a cell against a ``key=value`` filter: ``8``, ``true``, ``gpt-1.3b``."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip().lower()


def cell_values(column: str, value: Any) -> list[str]:
    """The values one cell of ``column`` holds, each as the user may give it: a pooled row's ``run_dir``
    and ``run_id`` (:data:`analysis.spread.JOINED`: ``s2/0, s2/2``) every round's, the whole text
    first (a folder whose name holds ``, ``); a row's ``flags`` (``check?,warn``) each flag; any
    other cell its text. Blank cells hold none."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return []
    text = str(value)
    if column in JOINED:
        return list(dict.fromkeys([text, *text.split(", ")]))
    if column == "flags":
        return text.split(",")
    return [text]


def matches(df: pd.DataFrame, column: str, values: Any) -> pd.Series:
    """Boolean mask of rows whose ``column`` equals ``values`` (or any of a list), as text.
    ``activation_checkpointing=true``/``false`` match the policies ``full``/``none``, as on the
    ``run.py`` command line. A row's ``flags`` (``check?,warn``) match any flag among them, a pooled
    row's ``run_id`` and ``run_dir`` any round's (:func:`cell_values`: ``--filter run_id=ID`` of one
    round of a ``repeats=`` sweep matched no row), and each in the forms the table shows
    (:func:`analysis.run_match.short_match`: ``ab063…``, an id's first 4 characters or more, a folder
    written absolute)."""
    wanted = {normalize(v) for v in (values if isinstance(values, (list, tuple, set)) else [values])}
    if column == "activation_checkpointing":
        wanted = {{"true": "full", "false": "none"}.get(w, w) for w in wanted}
    if column in JOINED:  # a pooled row's rounds each, and the table's shortened forms (ab063…, a prefix)
        from analysis.run_match import short_match

        def held(v: Any) -> bool:
            items = cell_values(column, v)
            return any(normalize(c) in wanted for c in items) or any(
                short_match(column, w, items) for w in wanted
            )

        return df[column].astype(object).map(held)
    if column == "flags":
        return (
            df[column]
            .astype(object)
            .map(lambda v: any(normalize(c) in wanted for c in cell_values(column, v)))
        )
    return df[column].astype(object).map(normalize).isin(wanted)


def mask(df: pd.DataFrame, filters: Mapping[str, Any], what: str = "--filter") -> pd.Series:
    """Boolean mask of rows matching every ``column: value`` of ``filters`` (see :func:`select`)."""
    check_columns(df, filters, what)
    out = pd.Series(True, index=df.index)
    for column, values in filters.items():
        out &= matches(df, column, values)
    return out


def select(df: pd.DataFrame, filters: Mapping[str, Any]) -> pd.DataFrame:
    """Rows matching every ``column: value`` (a list means any of them), compared as text,
    so ``{"micro_batch_size": "8"}`` and ``{"compile": "True"}`` match.

    Raises:
        ColumnError: for a column not in ``df``.
    """
    return df[mask(df, filters)]


def _ok(df: pd.DataFrame, metric: str, what: str = "") -> pd.DataFrame:
    """The rows that may be ranked on ``metric`` (:func:`analysis.load.rankable`); when ``what``
    names the caller, log the ok rows left out for failing the TFLOPs recomputation."""
    keep = rankable(df, metric)
    if what:
        flagged = df["status"].eq("ok") & failed_checks(df)
        left_out = df.loc[flagged, "run_dir"] if "run_dir" in df else df.index[flagged]
        if len(left_out):
            log.warning(
                "%s: %s left out: their recorded figures fail the recomputation from their "
                "raw fields (tflops_mismatch, implausible): %s",
                what,
                plural(len(left_out), "run"),
                ", ".join(map(str, left_out)),
            )
    return df[keep]


def best(
    df: pd.DataFrame,
    by: Sequence[str] = ("model",),
    metric: str = RANK_METRIC,
    largest: bool | None = None,
) -> pd.DataFrame:
    """The best ``ok`` run of each group of ``by`` columns, best first; runs flagged
    ``tflops_mismatch`` are left out (and logged).

    Args:
        by: set-up columns that define a group, e.g. ``["model"]``.
        metric: the column to rank by (its unit is in its name).
        largest: pick the largest value; default: true unless the metric is a time or
            a memory figure (:data:`LOWER_IS_BETTER`).

    Raises:
        ColumnError: for an unknown column.
    """
    by = [by] if isinstance(by, str) else list(by)
    check_columns(df, by, "--best-by")  # each label names the option that gives the column
    check_columns(df, [metric], "--metric")
    largest = metric not in LOWER_IS_BETTER if largest is None else largest
    ok = _ok(df, metric, "best")
    if ok.empty:
        return ok.reset_index(drop=True)
    grouped = ok.groupby(by, dropna=False, sort=False)[metric]
    picked = ok.loc[grouped.idxmax() if largest else grouped.idxmin()]
    return picked.sort_values(metric, ascending=not largest, kind="stable").reset_index(drop=True)


def best_shown(
    df: pd.DataFrame,
    typed: str,
    metric: str,
    filters: Sequence[str] = (),
    column: Callable[[str], str] = str.strip,
) -> pd.DataFrame:
    """:func:`best` for ``--best-by`` (``typed``, as given; ``column`` gives each name's full column) of the
    runs the other options left in ``df`` (``filters``: each ``--filter`` as given).

    Raises:
        AnalysisError: ``df`` holds runs and none of them ranks on ``metric`` (none ``ok``, or each ok
            run's figure blank or failing its checks): one line naming the filters, the statuses there
            and the fix. ``--filter status=oom --best-by model`` printed an empty table, "0 shown", exit 0.
    """
    picked = best(df, by=[column(c) for c in column_list(typed)], metric=metric)
    if not picked.empty or df.empty:
        return picked
    statuses = ", ".join(f"{status} {n}" for status, n in df["status"].value_counts().items())
    where = f"that {' '.join(f'--filter {f}' for f in filters)} leaves" if filters else "read"
    raise AnalysisError(
        f"--best-by {typed}: none of the {plural(len(df), 'run')} {where} (status: {statuses}) is an ok run "
        f"with a {metric} to rank; --best-by ranks ok runs only: drop --best-by to list these runs"
        + (", or filter for ok runs (--filter status=ok)" if filters else "")
    )


def setup_key(df: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One text key per row from ``columns``, for matching set-ups (blank cells match blank)."""
    if not columns:
        return pd.Series("", index=df.index)
    parts = [df[c].astype(object).map(normalize) for c in columns]
    key = parts[0]
    for part in parts[1:]:
        key = key + "|" + part
    return key


MAX_LISTED = 12
"""The most values of a column a message lists (:func:`_present`)."""


def _present(ok_runs: pd.DataFrame, baseline: Mapping[str, Any]) -> str:
    """What the ok runs hold for the keys of ``baseline``, as a fix: ``the ok runs have
    backend=ddp,fsdp; give one of those`` (at most :data:`MAX_LISTED` values a key, in order)."""
    if ok_runs.empty:
        return "no run is ok, so none can be a baseline"
    held = []
    for k in baseline:
        values = sorted({printable(v) for v in ok_runs[k] if not (isinstance(v, float) and math.isnan(v))})
        more = f",... ({len(values)} values)" if len(values) > MAX_LISTED else ""
        held.append(f"{k}={','.join(values[:MAX_LISTED])}{more}" if values else f"{k} blank")
    return f"the ok runs have {'; '.join(held)}: give one of those values"


def compare(
    df: pd.DataFrame,
    baseline: Mapping[str, Any],
    metric: str = RANK_METRIC,
    on: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Add ``speedup``: each run's ``metric`` over the baseline set-up's, matched on the rest.

    A run is matched to the ``ok`` baseline runs (``baseline``, e.g. ``{"backend": "fsdp"}``)
    that agree with it on every set-up column ``on`` (default: :data:`SETUP_COLUMNS` less
    the baseline keys and the keys of their option, such as ``zero_stage`` for ``backend``:
    :func:`flopsweep.columns.dependents`), the layout columns as
    :func:`flopsweep.identity.compared_layout` gives them (DDP's ``dp2x1`` is FSDP2's ``dp2``);
    repeated baseline runs are averaged. ``speedup`` is a
    ratio (>1 faster when higher is better; for a time or memory metric, baseline over run). It is NaN for
    failed runs, runs with no baseline and runs flagged ``tflops_mismatch`` (which are
    never a baseline either). ``df.attrs["baseline"]`` records the baseline.

    Raises:
        ColumnError: for an unknown column; AnalysisError when no ok run is a baseline, or a key of
            ``baseline`` has several values (``{"backend": ["fsdp", "ddp"]}``: no one set-up).
    """
    if not baseline:
        raise AnalysisError("empty baseline: give at least one key=value, e.g. backend=fsdp")
    for k, v in baseline.items():
        if isinstance(v, list | tuple | set) and len(v) != 1:  # speedup over an average of set-ups
            shown = ",".join(map(str, v))
            raise AnalysisError(
                f"baseline {k}={shown}: a baseline is one set-up, one value per key; give one, e.g. "
                f"{k}={next(iter(v), 'VALUE')} (for a speedup over each, run the analysis once per value)"
            )
    check_columns(df, [*baseline, *(on or [])], "--baseline")
    check_columns(df, [metric], "--metric")
    drop = set(baseline).union(*(dependents(k) for k in baseline))
    keys = [c for c in (on or SETUP_COLUMNS) if c in df.columns and c not in drop]
    ok = df.index.isin(_ok(df, metric, "compare").index)
    is_base = ok & mask(df, baseline, "--baseline")
    if not is_base.any():
        shown = ", ".join(f"{k}={v}" for k, v in baseline.items())
        raise AnalysisError(f"no ok run matches the baseline {shown}; {_present(df[ok], baseline)}")
    key = setup_key(_compared(df), keys)
    base = df.loc[is_base, metric].groupby(key[is_base]).mean()
    ref = key.map(base)
    out = df.copy()
    ratio = ref / out[metric] if metric in LOWER_IS_BETTER else out[metric] / ref
    out["speedup"] = ratio.where(ok).astype("float64")
    _speedup_ci(out, df, key, is_base, metric)
    out.attrs["baseline"] = ", ".join(f"{k}={v}" for k, v in baseline.items())
    return out


def _compared(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its layout columns as a baseline matches them (:func:`flopsweep.identity.compared_layout`:
    DDP's ``dp2x1`` is FSDP2's and ZeRO's ``dp2``)."""
    cols = [c for c in LAYOUT_ROW_KEYS if c in df.columns]
    rows = [compared_layout(r) for r in df[cols].to_dict("records")]
    return df.assign(**pd.DataFrame(rows, index=df.index, dtype=object)) if rows and rows[0] else df


def _speedup_ci(out: pd.DataFrame, df: pd.DataFrame, key: pd.Series, is_base: pd.Series, metric: str) -> None:
    """``speedup_ci_low``/``speedup_ci_high``: each speedup's 95% interval from the run's and its
    baseline's (:func:`analysis.significance.speedup_interval`; the baseline's interval is the widest of
    its runs'); blank where either has none, and where an end has no finite value, the reason then in
    ``out.attrs["speedup_ci_reasons"]`` (``run_dir``, else the row label -> reason;
    :func:`analysis.blanks.speedup_ci_lines`)."""
    lows, highs, reasons = [], [], {}
    bases = {k: rows for k, rows in df[is_base].groupby(key[is_base])}
    for i, row in out.iterrows():
        base = bases.get(key[i])
        ends = None
        if base is not None and pd.notna(row["speedup"]):
            cis = [c for _, b in base.iterrows() if (c := ci_of(b, metric)) is not None]
            wide = (min(c[0] for c in cis), max(c[1] for c in cis)) if len(cis) == len(base) else None
            ends = speedup_interval(ci_of(row, metric), wide, metric in LOWER_IS_BETTER)
        lows.append(ends.low if ends and ends.low is not None else float("nan"))
        highs.append(ends.high if ends and ends.high is not None else float("nan"))
        if ends and ends.reason:  # by run_dir: a later --best-by renumbers the rows
            reasons[row["run_dir"] if isinstance(row.get("run_dir"), str) else i] = ends.reason
    out["speedup_ci_low"], out["speedup_ci_high"] = lows, highs
    out.attrs["speedup_ci_reasons"] = reasons


def pivot(
    df: pd.DataFrame,
    index: str | list[str],
    columns: str | list[str],
    values: str,
    aggfunc: str = "max",
    mark_failed: bool = False,
) -> pd.DataFrame:
    """``values`` of ok runs laid out ``index`` x ``columns``, aggregated with ``aggfunc``.

    Args:
        aggfunc: how repeated runs of one cell combine: ``max`` (default), ``mean``, ...
        mark_failed: put the status (``oom``, ..., ``tflops?`` for a run left out for its
            TFLOPs, ``check?`` for one left out for another figure) in a cell that has runs but
            no ranked one, instead of NaN (the result then holds text).

    Blank keys (``zero_stage`` of a non-DeepSpeed run) become ``""``, not dropped rows.

    Raises:
        ColumnError: for an unknown column.
    """
    index = [index] if isinstance(index, str) else list(index)
    columns = [columns] if isinstance(columns, str) else list(columns)
    check_columns(df, [*index, *columns, values], "--pivot")
    keys = {c: df[c].astype(object).where(df[c].notna(), "") for c in index + columns}
    df = df.assign(**keys)  # a blank key (zero_stage of FSDP) is a cell of its own, not dropped
    ok = _ok(df, values, "pivot")
    table = ok.pivot_table(index=index, columns=columns, values=values, aggfunc=aggfunc)
    if not mark_failed:
        return table
    failed = df[~df.index.isin(ok.index)]
    if failed.empty:
        return table
    mismatch = failed["tflops_mismatch"] if "tflops_mismatch" in failed else False
    status = failed["status"].where(~(failed["status"].eq("ok") & failed_checks(failed)), "check?")
    failed = failed.assign(status=status.where(~(failed["status"].eq("ok") & mismatch), "tflops?"))
    status = failed.pivot_table(index=index, columns=columns, values="status", aggfunc="first")
    full = table.astype(object).combine_first(status)
    return full.where(full.notna(), None)


def sort_runs(df: pd.DataFrame, column: str, descending: bool | None = None) -> pd.DataFrame:
    """Rows sorted by ``column``, blanks last; by default the best first for metrics
    (:data:`HIGHER_IS_BETTER` descending, :data:`LOWER_IS_BETTER` ascending), others ascending.
    Sorting by a metric is a ranking: runs flagged ``tflops_mismatch`` come after the ranked ones.

    Raises:
        ColumnError: for an unknown column.
    """
    check_columns(df, [column], "--sort")
    descending = column in HIGHER_IS_BETTER if descending is None else descending
    out = df.sort_values(column, ascending=not descending, na_position="last", kind="stable")
    if column in HIGHER_IS_BETTER | LOWER_IS_BETTER:
        left_out = failed_checks(out)
        blank = out[column].isna() & ~left_out
        out = pd.concat([out[~left_out & ~blank], out[left_out], out[blank]])
    return out


def _shown(value: Any) -> str:
    return normalize(value) or "blank"


def _in_order(values: set[str]) -> list[str]:
    """Numbers by value, then text (``1, 2, 16``, not ``1, 16, 2``)."""

    def key(v: str) -> tuple[int, float, str]:
        try:
            return (0, float(v), "")
        except ValueError:
            return (1, 0.0, v)

    return sorted(values, key=key)


def pivot_winners(
    df: pd.DataFrame,
    index: str | list[str],
    columns: str | list[str],
    values: str,
    aggfunc: str = "max",
) -> list[tuple[tuple[Any, ...], tuple[Any, ...], str]]:
    """Which set-up won each cell of :func:`pivot` whose ranked runs differ in a set-up column
    that the pivot does not show (:data:`SETUP_COLUMNS` less ``index`` and ``columns``): a cell
    of ``gpt-1.3b`` x ``fsdp`` whose best run is fp8 beside a bf16 one.

    Returns:
        ``(row key, column key, text)`` per such cell, in pivot order; the keys as
        ``pivot`` lays them out (a blank key is ``""``). The text names the winner's values
        of the differing columns for ``max`` and ``min`` (``precision=fp8 (max of 2 runs;
        also ran: precision=bf16)``), and the values averaged over for other ``aggfunc``.
    """
    index = [index] if isinstance(index, str) else list(index)
    columns = [columns] if isinstance(columns, str) else list(columns)
    keys = index + columns
    check_columns(df, [*keys, values], "--pivot")
    df = df.assign(**{c: df[c].astype(object).where(df[c].notna(), "") for c in keys})
    ok = _ok(df, values)
    hidden = [c for c in SETUP_COLUMNS if c in ok and c not in keys]
    out = []
    for key, cell in ok.groupby(keys, sort=True):
        text = {c: cell[c].map(_shown) for c in hidden}
        differ = [c for c in hidden if text[c].nunique() > 1]
        differ = [
            c for c in differ if not any(c in dependents(o) for o in differ)
        ]  # attention, not its knobs
        if not differ:
            continue
        runs = plural(len(cell), "run")
        if aggfunc in ("max", "min"):
            pick = cell[values].idxmax() if aggfunc == "max" else cell[values].idxmin()
            won = ", ".join(f"{c}={text[c][pick]}" for c in differ)
            others = "; ".join(f"{c} {', '.join(_in_order(set(text[c]) - {text[c][pick]}))}" for c in differ)
            note = f"{won} ({aggfunc} of {runs}; the others ran {others})"
        else:
            spread = "; ".join(f"{c} {', '.join(_in_order(set(text[c])))}" for c in differ)
            note = f"{aggfunc} of {runs} that differ in {spread}"
        out.append((tuple(key[: len(index)]), tuple(key[len(index) :]), note))
    return out
