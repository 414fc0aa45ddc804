"""Load ``metrics.json`` files into one DataFrame row per run, and check them.

Every record goes through :func:`analysis.schema.read_record` (explicit
``schema_version``, upgrades of old versions). Unreadable files are logged once
by path and listed in ``df.attrs["unreadable"]``; loading goes on. Two checks
flag rows without dropping them: ``duplicate_run_id`` and ``tflops_mismatch``
(the recorded model TFLOPs disagree with the record's own stored FLOPs, time and
world size); rankings leave mismatched rows out (:mod:`analysis.query`).

The columns, their types and how they are shown are the catalogue's
(:mod:`analysis.catalogue`, from :data:`flopsweep.record.METRIC_SPECS` and
:mod:`flopsweep.columns`); records are found by :mod:`analysis.discover`; the cells
that take more than a lookup are :mod:`analysis.fields`'. This module builds the
rows (:func:`row`), the set-up ids (:func:`setup_id`), the columns computed across
records (:func:`add_scaling`, repeats pooled by :mod:`analysis.spread`) and the
ranked table (:func:`table`); the names it used to hold are re-exported here.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.catalogue import (  # noqa: F401 - re-exported: analysis.load.<NAME> is public
    BETTER,
    BOOL_COLUMNS,
    BREAKDOWN_COLUMNS,
    CHECK_COLUMNS,
    COLUMNS,
    CONFIG_FIELDS,
    DERIVED_COLUMNS,
    DESCRIPTIONS,
    ENERGY_COLUMNS,
    FLOAT_COLUMNS,
    HIGHER_IS_BETTER,
    INT_COLUMNS,
    LOAD_COLUMNS,
    LOWER_IS_BETTER,
    MEMORY_COLUMNS,
    METRIC_COLUMNS,
    METRIC_FIELDS,
    NOT_COLUMNS,
    NUMERIC_METRICS,
    PARALLEL_COLUMNS,
    PRE_RUN_COLUMNS,
    PRE_RUN_FIELDS,
    PREDICTION_COLUMNS,
    RANK_METRIC,
    REPEAT_COLUMNS,
    RUN_FIELDS,
    SEARCH_COLUMNS,
    SHORT,
    TABLE_COLUMNS,
    TEXT_COLUMNS,
)
from analysis.checks import scaling_problem
from analysis.discover import discover, display_path, find_records, from_folder, named_from  # noqa: F401
from analysis.discover import still_written as _still_written
from analysis.fields import (  # noqa: F401 - re-exported
    BREAKDOWN_PARTS,
    BREAKDOWN_TOLERANCE,
    MISMATCH_TOLERANCE,
    blank_unused,
    breakdown_problem,
    cell_text,
    cell_value,
    check_breakdown,
    check_figures,
    check_tflops,
    int_or_none,
    layout_columns,
    loadavg_1m,
    noise_flags,
    parallel_degrees,
    peak_memory_error,
    prediction_error,
    probe_share,
    recompute_tflops,
    search_failed,
    search_probes,
)
from analysis.read_once import kept_row
from analysis.schema import Record, RecordError, checkpointing_name
from analysis.schema import finite as _number
from analysis.significance import ci_of, overlap
from analysis.spread import edited_round, pool_repeats, step_columns, warn_edited_rounds
from flopsweep.budget import ReadBudget
from flopsweep.identity import RANK_COUNT_KEYS, code_key, setup_key  # noqa: F401 - RANK_COUNT_KEYS re-exported
from flopsweep.nearest_measured import pool_of
from flopsweep.plausible import calibration_problems
from flopsweep.predict import calibration_view
from flopsweep.predict_record import predict_record
from flopsweep.record import BEFORE_RUN, value_at
from flopsweep.text import plural
from flopsweep.tree import folder_skipped

log = logging.getLogger("analysis")


class ReadPaths(tuple):
    """The paths of the records a load read (``df.attrs["records"]``), as text: a tuple that
    ``copy.deepcopy`` shares rather than copies, as it cannot change. pandas deep-copies a frame's
    ``attrs`` into the result of every operation (``NDFrame.__finalize__``); a list of a few hundred
    paths cost about a fifth of a report's drawing time."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict) -> ReadPaths:
        return self


def row(record: Record, run_dir: str, schema_version: int | None = None) -> dict[str, Any]:
    """One flat row of a current-version record.

    Missing values are None (blank), never 0; a run whose status is not ``ok`` has every
    metric column blank but the :data:`~analysis.catalogue.PRE_RUN_COLUMNS` (the memory estimate and
    the step-time prediction, made before the run), read from its ``run.before_run`` (blank where that
    is absent, null or not an object; a value of the wrong type is a blank cell, as a metric's is).
    Bytes become GiB (``_gib`` columns, the spec's ``scale``).

    Raises:
        RecordError: when the recomputed TFLOPs overflow.
    """
    out: dict[str, Any] = {}
    for name, path, _ in CONFIG_FIELDS + RUN_FIELDS:
        out[name] = cell_value(value_at(record, path))
    # the policy's name; an old record's bool reads as full/none
    ckpt = value_at(record, ("config", "activation_checkpointing"))
    out["activation_checkpointing"] = checkpointing_name(ckpt)
    if out.get("model_search") == "none":  # no search: blank, as in records from before the key
        out["model_search"] = None
    if not out.get("model_search"):  # what grew: blank without a search
        out["search_grow"] = None
    elif not out.get("search_grow"):  # a search from before search.grow=seq_len grew the blocks
        out["search_grow"] = "n_layer"
    _metric_cells(out, record["metrics"], METRIC_FIELDS)
    if out["status"] != "ok":  # no metric; what was known before the run is run.before_run
        out.update(dict.fromkeys(METRIC_COLUMNS))
        before = value_at(record, ("run", BEFORE_RUN))
        if isinstance(before, dict):
            _metric_cells(out, before, PRE_RUN_FIELDS)
    for name in TEXT_COLUMNS:
        out[name] = cell_text(out[name])
    out["loadavg_1m_start"], out["loadavg_1m_end"] = loadavg_1m(value_at(record, ("system", "loadavg")))
    out["peak_memory_error"] = peak_memory_error(
        out.get("predicted_peak_gib"), out.get("peak_cuda_allocated_gib")
    )
    layout_columns(out, record)
    warnings = record.get("warnings")
    out["warnings"] = (
        "; ".join(cell_text(w) or "" for w in warnings) if isinstance(warnings, list) and warnings else None
    )
    blank_unused(out)
    out["repeat"] = value_at(record, ("run", "repeat"))
    out["repeat_group"] = cell_text(value_at(record, ("run", "repeat_group")))
    step_columns(out, value_at(record, ("metrics", "iteration_time_s", "values")))
    out["prediction_error"] = prediction_error(
        out["predicted_iteration_time_s"], out["iteration_time_s_mean"]
    )
    out["probe_share"] = probe_share(record) if out["status"] == "ok" else None
    out["noise"] = noise_flags(record, out)
    out["search_probes"] = search_probes(record)
    out["search_failed"] = search_failed(record)
    out["run_dir"] = run_dir
    out["setup_id"] = setup_id(record)
    out["base_setup_id"] = setup_id(record, layout=False)
    out["code_id"] = code_key(record)  # what joins runs of no repeat group (spread.pool_group)
    out["schema_version"] = record.get("schema_version") if schema_version is None else schema_version
    check_tflops(record, out, run_dir)
    check_breakdown(record, out, run_dir)
    check_figures(record, out, run_dir)
    return out


def _metric_cells(out: dict[str, Any], metrics: dict[str, Any], specs: Iterable[Any]) -> None:
    """The cells of ``specs`` (:data:`METRIC_FIELDS`) from a record's ``metrics``: numbers with a unit
    scaled (bytes to GiB), others as :func:`analysis.fields.cell_value` keeps them."""
    for spec in specs:
        value = value_at(metrics, spec.path or (spec.key,))
        if spec.unit:
            value = _number(value)
            out[spec.name] = value / spec.scale if spec.scale and value is not None else value
        else:
            out[spec.name] = cell_value(value)


PREDICTED_FIELDS = [spec for spec in METRIC_FIELDS if (spec.path or (spec.key,))[0] == "predicted"]
"""The cells of ``metrics.predicted`` (``--predict`` sets them after the rows are built)."""


def _typed(values: pd.Series) -> pd.Series:
    """A unit-less metric column typed by its values: Int64 for integers that fit, float64 for
    numbers, boolean for flags, object otherwise (text, lists)."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present) and present:
        return values.astype("boolean")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if present and all(isinstance(v, int) and abs(v) < 2**63 for v in present):
            return values.astype("Int64")
        return pd.to_numeric(values.map(_number), errors="coerce").astype("float64")
    return values


def _upper_bound(value: object) -> float | None:
    """An interval's high end: a finite number, or inf where the interval has none (``h >= mean``:
    :mod:`analysis.spread`), kept as such rather than blank; anything else None."""
    return math.inf if isinstance(value, float) and value == math.inf else _number(value)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in NUMERIC_METRICS + list(FLOAT_COLUMNS):
        keep = _upper_bound if col.endswith("_ci_high") else _number
        df[col] = pd.to_numeric(df[col].map(keep), errors="coerce").astype("float64")
    for col in METRIC_COLUMNS:
        if col not in NUMERIC_METRICS:
            df[col] = _typed(df[col].astype(object))
    for col in INT_COLUMNS:  # integers that may be blank; anything else is blank
        df[col] = pd.array(df[col].map(int_or_none).tolist(), dtype="Int64")
    for col in BOOL_COLUMNS:
        df[col] = pd.array(
            df[col].map(lambda v: v if isinstance(v, bool) else None).tolist(), dtype="boolean"
        )
    for col in ("tflops_mismatch", "duplicate_run_id"):
        df[col] = df[col].fillna(False).astype(bool)
    # A run that never launched has no world size: unknown, not 0 (v1 wrote 0; the upgrade maps it).
    df["world_size"] = df["world_size"].mask(df["world_size"] <= 0)
    return df


def setup_id(record: Record, *, layout: bool = True) -> str | None:
    """A short hash of everything that defines the run's set-up except its rank count
    (:func:`flopsweep.identity.setup_key`: the config less the rank count, the tag and the run
    controls, plus the device name; ``run.setup_key`` when the record holds it). Runs with the same
    id differ only in how many ranks they ran on. ``layout=False``: ``base_setup_id``, the same
    whatever ``config.parallel``."""
    return setup_key(record, layout=layout)


def add_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Set ``scaling_efficiency``: each ok run's tokens/s per device over a baseline's (weak scaling,
    fixed micro batch per rank), and ``scaling_baseline``, which names the baseline when it is not
    the usual one. Per-device figures divide by every rank (``world_size``), whatever the layout.

    The baseline, the first of these that exists, among set-ups run at two or more world sizes:

    1. the median of the ok one-rank runs of the same ``setup_id`` (``scaling_baseline`` blank);
    2. for a run with a layout (``config.parallel`` not at its defaults, so no one-rank run of its
       own ``setup_id`` can exist: ``tp=2`` needs two ranks), the median of the one-rank runs of the
       same set-up without its layout (``base_setup_id``): ``1-rank run without this layout``;
    3. the median of the same set-up's runs at its smallest world size: ``2 ranks (no 1-rank
       run)`` (the efficiency of going from 2 ranks on, 1.0 at 2).

    Blank where none exists: the set-up ran at one rank count only (with its layout-free one-rank
    run, if any), or :mod:`analysis.blanks` says what to add.
    """
    ok = df["status"].eq("ok") & df["tokens_per_s_per_device"].notna() & df["setup_id"].notna()
    ok &= df["world_size"].notna()
    _warn_disagreeing_baselines(df[ok & df["world_size"].eq(1)])
    rate = df["tokens_per_s_per_device"]
    one = df[ok & df["world_size"].eq(1)]
    worlds = df[ok].groupby("setup_id")["world_size"].nunique()
    single = one.groupby("setup_id")["tokens_per_s_per_device"].median()
    own = df["setup_id"].map(single.loc[single.index.isin(worlds[worlds > 1].index)])
    base_worlds = df[ok].groupby("base_setup_id")["world_size"].nunique()
    base_single = one.groupby("base_setup_id")["tokens_per_s_per_device"].median()
    base_single = base_single.loc[base_single.index.isin(base_worlds[base_worlds > 1].index)]
    with_layout = df["setup_id"].ne(df["base_setup_id"])
    free = df["base_setup_id"].map(base_single).where(with_layout | df["world_size"].eq(1))
    smallest = df[ok].groupby("setup_id")["world_size"].min()
    at_smallest = df[ok & df["world_size"].eq(df["setup_id"].map(smallest))]
    low = at_smallest.groupby("setup_id")["tokens_per_s_per_device"].median()
    low = df["setup_id"].map(low.loc[low.index.isin(worlds[worlds > 1].index)])
    base = own.fillna(free).fillna(low)
    df["scaling_efficiency"] = (rate / base).where(ok).astype("float64")
    label = pd.Series(None, index=df.index, dtype=object)
    label[own.isna() & free.notna() & with_layout] = "1-rank run without this layout"
    fewest = df["setup_id"].map(smallest)
    from_low = own.isna() & free.isna() & low.notna()
    label[from_low] = fewest[from_low].map(lambda n: f"{plural(int(n), 'rank')} (no 1-rank run)")
    df["scaling_baseline"] = label.where(ok & df["scaling_efficiency"].notna())
    return df


def _warn_disagreeing_baselines(ones: pd.DataFrame) -> None:
    """Warn once, in one line, of the set-ups whose one-rank runs disagree beyond their 95% intervals:
    how many, the first one's id and figures (tokens/s per device), and how to list the others."""
    disagree = []
    for sid, runs in ones.groupby("setup_id"):
        cis = [c for _, r in runs.iterrows() if (c := ci_of(r, "tokens_per_s_per_device")) is not None]
        if any(not overlap(a, b) for a in cis for b in cis):
            disagree.append((sid, ", ".join(f"{v:,.0f}" for v in runs["tokens_per_s_per_device"])))
    if disagree:
        sid, figures = disagree[0]
        log.warning(
            "the one-rank runs of %s disagree beyond their 95%% intervals (the first, %s: %s tokens/s per "
            "device): each scaling baseline is their median, not their mean; --filter setup_id=ID --filter "
            "world_size=1 lists one set-up's runs",
            plural(len(disagree), "set-up"),
            sid,
            figures,
        )


def flag_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Set ``duplicate_run_id`` on every row whose ``run_id`` another row shares; warn once per id."""
    dup = df["run_id"].notna() & df["run_id"].duplicated(keep=False)
    df["duplicate_run_id"] = dup
    for run_id, dirs in df.loc[dup].groupby("run_id")["run_dir"]:
        log.warning("duplicate run id %s in %s: %s", run_id, plural(len(dirs), "record"), ", ".join(dirs))
    return df


def fill_predictions(named: list[tuple[str, Record, bool]]) -> dict[str, dict[str, Any]]:
    """``--predict``: the prediction :func:`flopsweep.predict_record.predict_record` makes for every ``ok``
    record of ``named`` (``(name, record or its calibration view, may it calibrate)``) without
    ``metrics.predicted`` (or with a null step time there), from the others that may calibrate
    (:func:`flopsweep.plausible.calibration_problems` empty: a record the analysis flags never
    calibrates); set in place, and returned by name. Its ``source`` begins ``analysis --predict:`` and names
    the records it calibrated from by their names in ``named`` (:func:`load`'s: as the user's paths spell
    them, relative to its ``start``)."""
    calibrations = [(name, record) for name, record, usable in named if usable]
    pool = None  # flopsweep.nearest's view of the calibrations, made once for every record it predicts
    filled = {}
    for name, record, _ in named:
        metrics = record.get("metrics")
        if record.get("status") != "ok" or not isinstance(metrics, dict):
            continue
        if isinstance(metrics.get("predicted"), dict) and metrics["predicted"].get("iteration_time_s"):
            continue
        try:
            pool = pool_of(calibrations) if pool is None else pool
            made = predict_record(name, record, calibrations, pool=pool)
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError) as exc:
            made = {"iteration_time_s": None, "tokens_per_s": None, "source": f"no prediction: {exc!r}"[:300]}
        made["source"] = f"analysis --predict: {made['source']}"
        record["metrics"] = {**metrics, "predicted": made}
        filled[name] = made
    return filled


def _set_prediction(out: dict[str, Any], made: dict[str, Any]) -> None:
    """The row ``out``'s cells of ``metrics.predicted`` (:data:`PREDICTED_FIELDS`) from ``made``."""
    _metric_cells(out, {"predicted": made}, PREDICTED_FIELDS)
    for spec in PREDICTED_FIELDS:
        if spec.name in TEXT_COLUMNS:
            out[spec.name] = cell_text(out[spec.name])
    out["prediction_error"] = prediction_error(
        out["predicted_iteration_time_s"], out["iteration_time_s_mean"]
    )


def sized_name(model: object, n_layer: object) -> object:
    """``llama3.1-8b-L33``: the model's name with its block count, as ``search.model=largest`` names
    the sizes it finds (:func:`flopsweep.modelsearch.at_n_layer`), so that a run of
    ``model.n_layer=33`` is not shown as the 32-block model its name stands for. A name that already
    ends in ``-L<n_layer>``, a blank name and a blank count are kept as they are. The frontier names
    every point so; :func:`load` names so the runs whose model name stands for two block counts."""
    if not isinstance(model, str) or pd.isna(n_layer):
        return model
    suffix = f"-L{int(n_layer)}"
    return model if model.endswith(suffix) else model + suffix


UNNAMED_MODEL_KEYS = ("name", "arch", "seq_len", "experts", "config")
"""``config.model`` keys that are no part of a model's size (:func:`model_shape`): its name and family
(the option's identity, :mod:`flopsweep.model_identity`), the sequence and ``model=hf``'s experts
implementation (columns of their own) and ``model=hf``'s path (its ``config_sha256`` stands for the file)."""


def model_shape(record: Record) -> tuple[tuple[str, str], ...]:
    """The model's size as the record's config gives it: every ``config.model`` key but
    :data:`UNNAMED_MODEL_KEYS`, as ``(key, JSON text)`` pairs in key order (``model=hf``'s
    ``config_sha256`` copied in for records from before it, :func:`flopsweep.identity.with_config_hash`);
    empty without a model section."""
    from flopsweep.identity import with_config_hash

    model = value_at(with_config_hash(record), ("config", "model"))
    if not isinstance(model, dict):
        return ()
    return tuple(
        sorted(
            (str(k), json.dumps(v, sort_keys=True)) for k, v in model.items() if k not in UNNAMED_MODEL_KEYS
        )
    )


def _shown_size(key: str, text: str) -> str:
    """``n_embd=256``: a size key and its JSON value as a name shows it (a hash by its first 8 digits)."""
    value = text.strip('"')
    return f"{key}={value[:8] if key.endswith('sha256') else value}"


def name_sizes(df: pd.DataFrame, shapes: list[tuple[tuple[str, str], ...]] | None = None) -> pd.DataFrame:
    """``df`` with the ``model`` of every run whose model name other runs of ``df`` share at another
    size named apart, so that no table, ranking (``--best-by model``), baseline or pivot shows two
    sizes under one name or pools them as one set-up (repeats pool by ``setup_id``, which tells them
    apart already): another ``n_layer`` by :func:`sized_name` (``llama3.1-8b-L33``), any other size
    key of :func:`model_shape` that differs within the name in brackets (``gpt-tiny[n_embd=256]``,
    ``llama3.1-8b[ffn_dim=8192,n_kv_head=4]``; ``model=hf``'s file by ``config_sha256=<8 digits>``).
    ``shapes``: each row's :func:`model_shape` (:func:`load` passes them); None: ``n_layer`` alone.
    Names that stand for one size are kept: a lone run of ``model=gpt-tiny model.n_layer=48`` is
    ``gpt-tiny``, its ``blocks`` and ``params`` in its record (and in the table once they differ)."""
    if df.empty or "model" not in df:
        return df
    if shapes is None:
        if "n_layer" not in df:
            return df
        shapes = [() if pd.isna(n) else (("n_layer", str(int(n))),) for n in df["n_layer"]]
    groups: dict[str, list[int]] = {}
    for i, model in enumerate(df["model"]):
        if isinstance(model, str):
            groups.setdefault(model, []).append(i)
    names = list(df["model"])
    for model, rows in groups.items():
        sizes = [dict(shapes[i]) for i in rows]
        keys = sorted(set.intersection(*(set(size) for size in sizes)))  # a key older records lack: no size
        differ = [k for k in keys if len({size.get(k) for size in sizes}) > 1]
        for i, size in zip(rows, sizes, strict=True):
            name = model
            if "n_layer" in differ:
                name = sized_name(model, df["n_layer"].iloc[i])
            other = [_shown_size(k, size[k]) for k in differ if k != "n_layer" and k in size]
            names[i] = f"{name}[{','.join(other)}]" if other else name
    df["model"] = pd.Series(names, index=df.index, dtype=df["model"].dtype)
    return df


def load(
    paths: Iterable[str | Path] | str | Path,
    *,
    predict: bool = False,
    budget: ReadBudget | None = None,
    start: str | Path | None = None,
) -> pd.DataFrame:
    """One row per run from every ``metrics.json`` under ``paths`` (dirs, files or globs).

    ``start``: the folder a relative path of ``paths`` starts from (default: the current directory;
    :func:`analysis.discover.from_folder`, no change of directory). Records are named as ``paths``
    spell them (:func:`analysis.discover.named_from`): ``run_dir``, the warnings, the keys of
    ``df.attrs["unreadable"]`` and the records a ``predicted_source`` names, never an absolute path
    that a relative path of ``paths`` led to.

    With ``predict``, ok records without a prediction get one from the others first
    (:func:`fill_predictions`); ``prediction_error`` is ``(predicted - measured) / measured``
    mean step time wherever both exist.

    Columns are :data:`COLUMNS`: the set-up, ``status``, the metrics of
    :data:`flopsweep.record.METRIC_SPECS` with units in their names
    (``model_tflops_per_device`` in 1e12 FLOP/s, ``peak_cuda_allocated_gib`` in GiB,
    ``tokens_per_s`` global), the error, ``warnings``, ``run_dir`` (printable: non-UTF-8
    bytes escaped), the ``schema_version`` the file was written with, and the checks
    ``model_tflops_per_device_recomputed``, ``tflops_mismatch``, ``duplicate_run_id`` and
    ``implausible`` (:mod:`analysis.checks`). Metrics of runs that are not ``ok`` are NaN, never 0.
    ``df.attrs["records"]`` lists the files read (no output may be written over one), and
    ``df.attrs["runs"]`` counts them by status before the rounds of ``repeats=`` are pooled into one
    row each (:func:`analysis.display.summary`: ``3 runs (3 ok), pooled into 1 row``).

    Unreadable files (empty, truncated or oversized JSON, too deeply nested, unknown
    version, missing required key, a set-up name that is not text, numbers too large
    for a float; a link, a FIFO, a device where a record should be: :func:`discover`) are
    logged once each by path and skipped; ``df.attrs["unreadable"]`` maps each path to the reason.
    Memory is bounded: each file is read once (hard links too), under ``budget``
    (:class:`flopsweep.budget.ReadBudget`, default :func:`flopsweep.budget.budget_bytes`: the bytes
    read and the rows kept), and only its row is kept (with ``predict``, its calibration view too,
    :func:`flopsweep.predict.calibration_view`); a record past the budget is skipped with the reason.

    Raises:
        FileNotFoundError: when a path does not exist.
        BudgetError: when :data:`flopsweep.budget.BUDGET_ENV` is set to no budget (one line).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    given = paths if start is None else from_folder(paths, start)
    found, bad = discover(given)
    for folder, holder in _still_written(given).items():  # a sweep read mid-way: once silent
        log.warning(
            "%s: a sweep or run (%s) is still writing here: the records read are those finished so far; "
            "read it again when it ends",
            named_from(folder, start),
            holder,
        )
    bad = {named_from(shown, start): why for shown, why in bad.items()}
    for shown, why in bad.items():
        if folder_skipped(why):  # a folder nested past the walk's limit, or unlistable: no record
            log.warning("skipping the folder %s: %s", shown, why)
        else:
            log.warning("skipping unreadable record %s: %s", shown, why)
    rows, named = _read_rows(found, bad, predict, budget or ReadBudget(), start)
    if predict:
        made = fill_predictions(named)
        for out in rows:
            if out["_name"] in made:
                _set_prediction(out, made[out["_name"]])
    shapes = [out.pop("_shape") for out in rows]
    for out in rows:
        del out["_name"]
    df = flag_duplicates(name_sizes(_frame(rows), shapes))
    runs = df["status"].value_counts().to_dict()  # before pooling: the footer counts records, not rows
    df = flag_scaling(add_scaling(pool_repeats(df, rankable(df), NUMERIC_METRICS)))
    df.attrs["unreadable"] = bad
    df.attrs["runs"] = runs
    df.attrs["records"] = ReadPaths(str(p) for p in found)  # what was read: no output may be written over it
    return df


def _read_rows(
    found: list[Path], bad: dict[str, str], predict: bool, budget: ReadBudget, start: str | Path | None
) -> tuple[list[dict[str, Any]], list[tuple[str, Record, bool]]]:
    """The row of each record of ``found`` (with its name under ``_name``:
    :func:`analysis.discover.named_from` ``start``), built as it is read and kept in its place, and
    with ``predict`` its calibration view (:func:`flopsweep.predict.calibration_view`) and whether it
    may calibrate; read and kept under ``budget``. What cannot be read, or is past the budget, goes
    into ``bad`` with the reason."""
    rows, named, configs, edited = [], [], {}, []
    for path in found:
        shown = named_from(path, start)
        try:
            record, version, made = kept_row(path, named_from(path.parent, start), budget, row)
            out = budget.keep(made, "its table row")
            edited_round(record, out, configs, edited)
            if predict:
                view = budget.keep(calibration_view(record), "its calibration view")
                named.append((shown, view, not calibration_problems(record)))
        except RecordError as exc:
            log.warning("skipping unreadable record %s: %s", shown, exc)
            bad[shown] = str(exc)
            continue
        out["_name"] = shown
        out["_shape"] = model_shape(record)
        rows.append(out)
    warn_edited_rounds(edited, configs)
    return rows, named


def flag_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Add :func:`analysis.checks.scaling_problem` to ``implausible`` (``check?``) for each row whose
    ``scaling_efficiency`` cannot be real on its GPU (CPU runs are not flagged), warning once per row;
    returns ``df``."""
    devices = df["device_name"] if "device_name" in df else pd.Series(None, index=df.index)
    for i, efficiency in df["scaling_efficiency"].items():
        if problem := scaling_problem(efficiency, devices[i]):
            before = df.at[i, "implausible"]
            df.at[i, "implausible"] = f"{before}; {problem}" if isinstance(before, str) else problem
            log.warning(
                "%s fails its checks (left out of rankings and plots): %s", df.at[i, "run_dir"], problem
            )
    return df


def rankable(df: pd.DataFrame, metric: str = RANK_METRIC) -> pd.Series:
    """Rows that may enter a ranking on ``metric``: ``ok``, with a finite value, neither
    ``tflops_mismatch`` nor ``implausible`` (:func:`failed_checks`)."""
    out = df["status"].eq("ok") & df[metric].notna()
    if pd.api.types.is_numeric_dtype(df[metric]):
        out &= df[metric].abs().lt(float("inf"))
    return out & ~failed_checks(df)


def failed_checks(df: pd.DataFrame) -> pd.Series:
    """Rows whose figures fail a check: ``tflops_mismatch`` (``tflops?``) or ``implausible``
    (``check?``, :mod:`analysis.checks`); they are left out of rankings and plots."""
    out = pd.Series(False, index=df.index)
    if "tflops_mismatch" in df:
        out |= df["tflops_mismatch"].fillna(False).astype(bool)
    if "implausible" in df:
        out |= df["implausible"].notna()
    return out


def table(df: pd.DataFrame, columns: list[str] | None = None, metric: str = RANK_METRIC) -> pd.DataFrame:
    """The comparison table: ``columns`` (default :data:`TABLE_COLUMNS`), ranked ok runs first,
    best ``metric`` first (the highest model TFLOPs by default; the lowest for a
    :data:`LOWER_IS_BETTER` metric such as a step time); then ok runs whose TFLOPs fail the
    recomputation (not ranked), then failed runs, with blank metrics."""
    cols = columns or TABLE_COLUMNS
    ok = df["status"].eq("ok")
    group = pd.Series(2, index=df.index).mask(ok, 1).mask(rankable(df, metric), 0)
    order = (
        pd.DataFrame({"group": group, "key": df[metric]})
        .sort_values(
            ["group", "key"], ascending=[True, metric in LOWER_IS_BETTER], na_position="last", kind="stable"
        )
        .index
    )
    return df.loc[order, cols].reset_index(drop=True)
