"""Load ``metrics.json`` files into one DataFrame row per run, and check them.

Every record goes through :func:`analysis.schema.read_record` (explicit
``schema_version``, upgrades of old versions). Unreadable files are logged once
by path and listed in ``df.attrs["unreadable"]``; loading goes on. Two checks
flag rows without dropping them: ``duplicate_run_id`` and ``tflops_mismatch``
(the recorded model TFLOPs disagree with the record's own stored FLOPs, time and
world size); rankings leave mismatched rows out (:mod:`analysis.query`).

The metric columns come from :data:`flopsweep.record.METRIC_SPECS` (name, path,
scale): adding a metric there adds its column here. The set-up columns come from
:data:`flopsweep.columns.SETUP_SPECS` (path, header, description, type, the option a
knob belongs to): adding a knob there adds its column here and in every table.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.checks import record_problems, scaling_problem
from analysis.schema import Record, RecordError, checkpointing_name, read_record
from analysis.schema import finite as _number
from analysis.spread import CI_COLUMNS, CI_METRICS, ci_of, overlap, pool_repeats, step_columns
from flopsweep.columns import SETUP_SPECS, kind, only_for
from flopsweep.config import ConfigError
from flopsweep.files import not_a_record
from flopsweep.identity import RANK_COUNT_KEYS, setup_key  # noqa: F401 (RANK_COUNT_KEYS: re-exported)
from flopsweep.layout import Layout
from flopsweep.noise import noisy, overloaded
from flopsweep.predict import predict_record
from flopsweep.record import METRIC_SPECS, METRICS_FILE, MetricSpec
from flopsweep.text import format_count, plural

log = logging.getLogger("analysis")

GIB = 1024**3
MISMATCH_TOLERANCE = 0.01
"""Relative difference between recorded and recomputed model TFLOPs that sets ``tflops_mismatch``."""

RANK_METRIC = "model_tflops_per_device"
"""The default ranking metric everywhere (tables, best, compare, plots)."""

# (column, path into the record, short header). Units of metric columns are in their names.
CONFIG_FIELDS: list[tuple[str, tuple[str, ...], str]] = [
    *((spec.name, spec.keys, spec.header) for spec in SETUP_SPECS),
    ("status", ("status",), "status"),
]
"""The set-up columns (:data:`flopsweep.columns.SETUP_SPECS`), then ``status``."""
RUN_FIELDS: list[tuple[str, tuple[str, ...], str]] = [
    ("error", ("error", "message"), "error"),
    ("error_type", ("error", "type"), "error_type"),
    ("error_phase", ("error", "phase"), "phase"),
    ("run_id", ("run", "id"), "run_id"),
]

LOAD_COLUMNS = ["loadavg_1m_start", "loadavg_1m_end"]
"""The host's 1-minute load average when the job started and when it ended (``system.loadavg``),
so that a run measured on a busy host can be seen. Records written before the start was kept
hold one list, taken at the end."""

# A metric that is a structure (per_rank), or the same paragraph in every row
# (flops_convention), stays in the record and out of the table.
NOT_COLUMNS = ("per_rank", "flops_convention")
METRIC_FIELDS: list[MetricSpec] = [spec for spec in METRIC_SPECS if spec.key not in NOT_COLUMNS]
"""The metric columns, in :data:`flopsweep.record.METRIC_SPECS` order."""
METRIC_COLUMNS: list[str] = [spec.name for spec in METRIC_FIELDS]
"""Metric columns: blank for every run whose status is not ok, whatever the record says."""
BREAKDOWN_COLUMNS: list[str] = [spec.name for spec in METRIC_FIELDS if spec.key == "breakdown"]
"""The ``breakdown_*`` columns (``profile=true``)."""
NUMERIC_METRICS: list[str] = [spec.name for spec in METRIC_FIELDS if spec.unit]
"""Metric columns with a unit: always float64 (others are typed by their values)."""

PARALLEL_COLUMNS = ["dp"]
"""The data-parallel degree (``dp_replicate x dp_shard`` of ``system.parallel``): how many
different batches one step sees. A record without ``system.parallel`` (written before the layout
was recorded) was pure data parallel: ``dp`` is its world size (:func:`parallel_degrees`)."""

MEMORY_COLUMNS = ["peak_memory_error"]
"""How far the plan's memory estimate was from the measured peak: ``peak_memory_error`` =
(``predicted_peak_gib`` - ``peak_cuda_allocated_gib``) / ``peak_cuda_allocated_gib`` (blank on the
CPU and for records without a prediction): :func:`peak_memory_error`."""

DERIVED_COLUMNS = ["scaling_efficiency", "scaling_baseline", "setup_id", "base_setup_id", "prediction_error"]
REPEAT_COLUMNS = ["repeat", "repeat_group", "repeats", "ci_over", *CI_COLUMNS, "noise"]
"""The round of a ``repeats=`` sweep (``run.repeat``, ``run.repeat_group``), how many rounds a row
pools (1 for one run), what its 95% intervals are over (``repeats`` or ``steps``), the intervals
(:mod:`analysis.spread`), and its noise flags (``noisy``, ``load``: :mod:`flopsweep.noise`)."""
"""Columns computed across records (:func:`add_scaling`), after the per-record ones."""

BETTER: dict[str, str] = {
    **{spec.name: spec.better for spec in METRIC_FIELDS if spec.better},
    "scaling_efficiency": "higher",
    "speedup": "higher",  # added by analysis.compare: run over baseline (baseline over run for a time)
}
"""Which way each figure of merit is better, ``higher`` or ``lower``: the metric columns from
``MetricSpec.better`` (:data:`flopsweep.record.METRIC_SPECS`), plus the columns the analysis
derives. Sorting, :func:`table`, ``best`` and ``compare`` follow it; other columns have none."""
HIGHER_IS_BETTER = {name for name, way in BETTER.items() if way == "higher"}
"""Columns ranked descending (tokens/s, TFLOPs, MFU, HFU, scaling efficiency, speedup)."""
LOWER_IS_BETTER = {name for name, way in BETTER.items() if way == "lower"}
"""Columns ranked ascending (step times, memory)."""

SEARCH_COLUMNS = ["search_probes", "search_failed"]
"""``search.model=largest``'s probes that trained (``run.model_search.probes``): a list of
``[n_params, tokens_per_s]``, the tokens/s of each probe's one measured step (indicative); the
frontier plot draws them (:func:`analysis.plots.plot_frontier`). Blank without a search."""

_CHECK_COLUMNS = [
    "schema_version",
    "model_tflops_per_device_recomputed",
    "tflops_mismatch",
    "duplicate_run_id",
    "implausible",
]
COLUMNS = (
    [name for name, _, _ in CONFIG_FIELDS]
    + METRIC_COLUMNS
    + [name for name, _, _ in RUN_FIELDS]
    + LOAD_COLUMNS
    + PARALLEL_COLUMNS
    + MEMORY_COLUMNS
    + DERIVED_COLUMNS
    + REPEAT_COLUMNS
    + SEARCH_COLUMNS
    + ["warnings", "run_dir"]
    + _CHECK_COLUMNS
)
"""Every column of :func:`load`: set-up, status, metrics (spec order), error and run, checks."""

SHORT: dict[str, str] = {
    **{name: header for name, _, header in CONFIG_FIELDS + RUN_FIELDS if header != name},
    **{spec.name: spec.header for spec in METRIC_FIELDS},
    "model_tflops_per_device_recomputed": "TFLOPs_recomp",
    "speedup": "speedup",
    "scaling_efficiency": "scale_eff",
    "peak_memory_error": "mem_err",
    "prediction_error": "pred_err",
    "scaling_baseline": "scale_base",
    **{
        f"{m}_ci_{end}": f"{spec.header}_{end[:2]}95"
        for spec in METRIC_FIELDS
        if (m := spec.name) in CI_METRICS
        for end in ("low", "high")
    },
    "repeats": "reps",
}
"""Short header of each column (the terminal, markdown and HTML tables); csv/json keep full names."""

_SETUP_DESCRIPTIONS = {
    **{spec.name: spec.description for spec in SETUP_SPECS if spec.description},
    "error_phase": "phase of the error",
}
"""The set-up columns whose short header needs a word (attn, mbs, accum, world, ...)."""

DESCRIPTIONS: dict[str, str] = {
    **_SETUP_DESCRIPTIONS,
    **{spec.name: spec.description for spec in METRIC_FIELDS},
    "model_tflops_per_device_recomputed": "model_flops_per_iteration / (mean step time x world size)",
    "loadavg_1m_start": "the host's 1-minute load average when the job started",
    "loadavg_1m_end": "the host's 1-minute load average when the job ended",
    "speedup": "the run's ranking metric over the baseline set-up's",
    "scaling_efficiency": "tokens/s per device / the same set-up's tokens/s on one device (weak scaling)",
    "peak_memory_error": "(predicted - measured) / measured peak allocated GPU memory (pred_GiB, alloc_GiB)",
    "prediction_error": "(predicted - measured) / measured mean step time: above 0, the run was faster "
    "than predicted",
    "scaling_baseline": "what scale_eff divides by when not the same set-up's 1-rank runs (blank)",
    "setup_id": "the run's config less its rank count (nproc_per_node, nnodes) and run controls, hashed",
    "base_setup_id": "setup_id without the parallel layout (config.parallel)",
    "flags": "dup-id: run id shared; tflops?: TFLOPs fail the recomputation (not ranked); "
    "check?: a figure fails its raw fields (not ranked, column implausible); warn: warnings; "
    "noisy: step CV over 5%; load: the host lacked idle cores; tie?: the best two's 95% intervals overlap",
    "implausible": "the figures of the record that fail their raw fields (analysis.checks)",
    **{
        f"{m}_ci_low": f"low end of the 95% interval of {m} (over repeats or steps: ci_over)"
        for m in CI_METRICS
    },
    **{
        f"{m}_ci_high": f"high end of the 95% interval of {m} (over repeats or steps: ci_over)"
        for m in CI_METRICS
    },
    "repeats": "rounds pooled into the row (repeats=): its figures are their median; 1 for one run",
    "ci_over": "what the 95% intervals are over: repeats (rounds of repeats=) or steps (one run's steps)",
}
"""One line per column for the legend under a table."""

_KINDS = {spec.name: kind(spec) for spec in SETUP_SPECS}
_INT_COLUMNS = (*(c for c, k in _KINDS.items() if k == "int"), "schema_version", "repeat", "repeats")
_FLOAT_COLUMNS = (
    *(c for c, k in _KINDS.items() if k == "float"),
    "model_tflops_per_device_recomputed",
    *LOAD_COLUMNS,
    *PARALLEL_COLUMNS,
    *MEMORY_COLUMNS,
    *CI_COLUMNS,
    "prediction_error",
)
_BOOL_COLUMNS = tuple(c for c, k in _KINDS.items() if k == "bool")
_TEXT_COLUMNS = (
    *(c for c, k in _KINDS.items() if k == "text"),
    "status",
    "error",
    "error_type",
    "error_phase",
    "run_id",
)

PREDICTION_COLUMNS = ["predicted_iteration_time_s", "prediction_error"]
"""The prediction columns of the default table (``metrics.predicted``, ``--predict``), shown only
where some row has a value (records from before the prediction have none)."""

ENERGY_COLUMNS = [
    "joules_per_token",
    "power_w_mean",
    "usd_per_million_tokens",
    "budget_gpu_hours",
    "budget_days",
    "budget_energy_kwh",
    "budget_usd",
]
"""The energy and cost columns of the default table, shown only where some row has a value (GPU
runs with NVML's counter; a price, ``cost.usd_per_gpu_hour``; a budget, ``budget.tokens``)."""

# The default table: what the README calls the comparison table (mean iteration time: the rates use it).
TABLE_COLUMNS = [
    *(spec.name for spec in SETUP_SPECS if spec.show == "table"),
    "status",
    "model_tflops_per_device",
    "model_tflops_per_device_ci_low",
    "model_tflops_per_device_ci_high",
    "repeats",
    "mfu",
    "hfu",
    "tokens_per_s",
    "iteration_time_s_mean",
    "scaling_efficiency",
    *PREDICTION_COLUMNS,
    "scaling_baseline",
    *ENERGY_COLUMNS,
    "peak_cuda_allocated_gib",
    "peak_cuda_reserved_gib",
    "predicted_peak_gib",
    "peak_memory_error",
    "peak_host_rss_gib",
    "breakdown_compute_s",
    "breakdown_optimizer_s",
    "breakdown_exposed_comm_s",
    "breakdown_idle_s",
]


def _get(record: Record, path: tuple[str, ...]) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _scalar(value: Any) -> Any:
    """A value a cell can hold: scalars as they are, a list of scalars (``unsteady_steps``) as a
    list, any other structure as a short placeholder (never a deep nest)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value):
        return value
    return f"<JSON {'object' if isinstance(value, dict) else 'array'}>"


def _int_or_none(value: Any) -> int | None:
    """A whole number that fits an Int64 column (``8`` or ``8.0``), else None."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    return None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(_scalar(value))


def display_path(path: str | Path) -> str:
    """``path`` as printable text: bytes that are not UTF-8 (a directory name from another
    locale) become ``\\xNN`` escapes, so that no output stream or file write fails on them."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def recompute_tflops(record: Record) -> float | None:
    """Model TFLOPs per device recomputed from the record's stored FLOPs:
    ``metrics.model_flops_per_iteration / (metrics.iteration_time_s.mean x system.world_size x 1e12)``.

    Returns:
        None when a needed value is missing, not positive or not a number.

    Raises:
        RecordError: when the inputs are numbers but the result overflows a float.
    """
    flops = _number(_get(record, ("metrics", "model_flops_per_iteration")))
    t = _number(_get(record, ("metrics", "iteration_time_s", "mean")))
    world = _get(record, ("system", "world_size"))
    if flops is None or t is None or t <= 0 or not isinstance(world, int) or isinstance(world, bool):
        return None
    if world <= 0:
        return None
    try:
        out = flops / (t * world * 1e12)
    except (OverflowError, ZeroDivisionError):
        out = math.inf
    if not math.isfinite(out):
        raise RecordError(
            f"recomputed model TFLOPs overflow: model_flops_per_iteration {flops:.4g} over "
            f"{t:.4g} s x {plural(world, 'device')}"
        )
    return out


def _differs(recorded: Any, expected: float | None) -> bool:
    recorded = _number(recorded)
    if recorded is None or expected is None:
        return False
    return abs(recorded - expected) > MISMATCH_TOLERANCE * abs(expected)


def _fmt(value: Any) -> str:
    number = _number(value)
    return "null" if number is None else f"{number:.4g}"


def _check_tflops(record: Record, out: dict[str, Any], path: str) -> None:
    expected = recompute_tflops(record) if out["status"] == "ok" else None
    out["model_tflops_per_device_recomputed"] = expected
    bad = _differs(out["model_tflops_per_device"], expected)
    out["tflops_mismatch"] = bad
    if bad:
        log.warning(
            "TFLOPs mismatch in %s: the record says %s model TFLOPs per device; its "
            "model_flops_per_iteration, mean iteration time and world size give %.4g, more than %.0f%% "
            "apart (left out of rankings)",
            path,
            _fmt(out["model_tflops_per_device"]),
            expected,
            100 * MISMATCH_TOLERANCE,
        )


BREAKDOWN_PARTS = ("compute_s", "optimizer_s", "exposed_comm_s", "idle_s")
BREAKDOWN_TOLERANCE = 0.05
"""How far the parts of ``metrics.breakdown`` may sum from its ``step_s`` (relative)."""


def breakdown_problem(value: Any) -> str | None:
    """Why a record's ``metrics.breakdown`` cannot be shown, or None when it can (or is absent):
    it must be an object whose ``step_s`` and four parts are finite numbers >= 0 that sum to
    ``step_s`` within 5%."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"is a {type(value).__name__}, not an object"
    numbers = {k: _number(value.get(k)) for k in ("step_s", *BREAKDOWN_PARTS)}
    bad = [k for k, v in numbers.items() if v is None or v < 0]
    if bad:
        return f"{', '.join(bad)} missing, not a number or negative"
    total, step = sum(numbers[k] for k in BREAKDOWN_PARTS), numbers["step_s"]
    if step <= 0 or abs(total - step) > BREAKDOWN_TOLERANCE * step:
        return f"its parts sum to {total:.4g} s, not its step_s {step:.4g} s"
    return None


def _check_breakdown(record: Record, out: dict[str, Any], path: str) -> None:
    """Blank the breakdown columns of a record whose ``metrics.breakdown`` is damaged, and say so
    in its warnings and the log (never shown as if it were measured)."""
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    why = breakdown_problem(metrics.get("breakdown"))
    if why is None:
        _check_optimizer_split(metrics.get("breakdown"), out, path)
        return
    for name in BREAKDOWN_COLUMNS:
        out[name] = None
    note = f"breakdown?: metrics.breakdown {why}; not shown"
    out["warnings"] = f"{out['warnings']}; {note}" if out.get("warnings") else note
    log.warning("%s: metrics.breakdown %s; its columns are left blank", path, why)


def _check_optimizer_split(breakdown: Any, out: dict[str, Any], path: str) -> None:
    """Blank ``compute_s`` and ``optimizer_s`` of a CUDA breakdown without ``optimizer_from``.

    Those were recorded before 2026-12-01, when the optimizer was the GPU-side span of its
    annotation, which Kineto cuts short where torch's own ``Optimizer.step`` span begins
    (Llama 8B on an H200: 27 of 93 ms); the rest was counted as compute. Their step, exposed
    communication and idle time are unaffected and stay."""
    if not isinstance(breakdown, dict) or breakdown.get("view") != "cuda" or "optimizer_from" in breakdown:
        return
    out["breakdown_compute_s"] = out["breakdown_optimizer_s"] = None
    note = "breakdown?: compute/optimizer split not shown (recorded before the optimizer was found by launch)"
    out["warnings"] = f"{out['warnings']}; {note}" if out.get("warnings") else note
    log.info("%s: metrics.breakdown has no optimizer_from; compute_s and optimizer_s left blank", path)


def row(record: Record, run_dir: str, schema_version: int | None = None) -> dict[str, Any]:
    """One flat row of a current-version record.

    Missing values are None (blank), never 0; a run whose status is not ``ok`` has every
    metric column blank. Bytes become GiB (``_gib`` columns, the spec's ``scale``).

    Raises:
        RecordError: when the recomputed TFLOPs overflow.
    """
    out: dict[str, Any] = {}
    for name, path, _ in CONFIG_FIELDS + RUN_FIELDS:
        out[name] = _scalar(_get(record, path))
    # the policy's name; an old record's bool reads as full/none
    ckpt = _get(record, ("config", "activation_checkpointing"))
    out["activation_checkpointing"] = checkpointing_name(ckpt)
    if out.get("model_search") == "none":  # no search: blank, as in records from before the key
        out["model_search"] = None
    for spec in METRIC_FIELDS:
        value = _get(record["metrics"], spec.path or (spec.key,))
        if spec.unit:
            value = _number(value)
            out[spec.name] = value / spec.scale if spec.scale and value is not None else value
        else:
            out[spec.name] = _scalar(value)
    for name in _TEXT_COLUMNS:
        out[name] = _text(out[name])
    if out["status"] != "ok":
        out.update(dict.fromkeys(METRIC_COLUMNS))
    out["loadavg_1m_start"], out["loadavg_1m_end"] = _loadavg_1m(_get(record, ("system", "loadavg")))
    out["peak_memory_error"] = peak_memory_error(
        out.get("predicted_peak_gib"), out.get("peak_cuda_allocated_gib")
    )
    _layout_columns(out, record)
    warnings = record.get("warnings")
    out["warnings"] = (
        "; ".join(_text(w) or "" for w in warnings) if isinstance(warnings, list) and warnings else None
    )
    _blank_unused(out)
    out["repeat"] = _get(record, ("run", "repeat"))
    out["repeat_group"] = _text(_get(record, ("run", "repeat_group")))
    step_columns(out, _get(record, ("metrics", "iteration_time_s", "values")))
    out["prediction_error"] = prediction_error(
        out["predicted_iteration_time_s"], out["iteration_time_s_mean"]
    )
    out["noise"] = noise_flags(record, out)
    out["search_probes"] = search_probes(record)
    out["search_failed"] = search_failed(record)
    out["run_dir"] = run_dir
    out["setup_id"] = setup_id(record)
    out["base_setup_id"] = setup_id(record, layout=False)
    out["schema_version"] = record.get("schema_version") if schema_version is None else schema_version
    _check_tflops(record, out, run_dir)
    _check_breakdown(record, out, run_dir)
    _check_figures(record, out, run_dir)
    return out


def search_probes(record: Record) -> list[list[float]] | None:
    """``[[n_params, tokens_per_s], ...]`` of the ok probes of the record's model search (those with
    finite, positive figures), None without a search (:data:`SEARCH_COLUMNS`)."""
    probes = _get(record, ("run", "model_search", "probes"))
    if not isinstance(probes, list):
        return None
    points = []
    for p in probes:
        if isinstance(p, dict) and p.get("status") == "ok":
            n, rate = _number(p.get("n_params")), _number(p.get("tokens_per_s"))
            if n is not None and rate is not None and n > 0 and rate > 0:
                points.append([float(n), float(rate)])
    return points or None


def search_failed(record: Record) -> str | None:
    """``n_layer=37 (9.12B): oom``: the smallest probe of the record's model search above the size it
    found that did not train (what bounds the frontier), None without one (:data:`SEARCH_COLUMNS`)."""
    search = _get(record, ("run", "model_search"))
    if not isinstance(search, dict) or not isinstance(search.get("probes"), list):
        return None
    found = _number(search.get("result"))
    failed = [
        p
        for p in search["probes"]
        if isinstance(p, dict)
        and p.get("status") != "ok"
        and _number(p.get("n_layer")) is not None
        and (found is None or _number(p.get("n_layer")) > found)
    ]
    if not failed:
        return None
    first = min(failed, key=lambda p: _number(p.get("n_layer")))
    n = _number(first.get("n_params"))
    size = f" ({format_count(n)})" if n else ""
    return f"n_layer={int(_number(first['n_layer']))}{size}: {first.get('status')}"


def peak_memory_error(predicted_gib: Any, measured_gib: Any) -> float | None:
    """``(predicted - measured) / measured``: the memory estimate's relative error (positive: it
    predicted more than was allocated); None when either is missing or the measured peak is not
    positive (CPU runs measure no GPU memory)."""
    if not isinstance(predicted_gib, (int, float)) or not isinstance(measured_gib, (int, float)):
        return None
    if isinstance(predicted_gib, bool) or isinstance(measured_gib, bool) or not measured_gib > 0:
        return None
    return (predicted_gib - measured_gib) / measured_gib


def prediction_error(predicted: Any, measured: Any) -> float | None:
    """``(predicted - measured) / measured`` step time; None when either is missing or not positive."""
    if not isinstance(predicted, int | float) or not isinstance(measured, int | float) or not measured > 0:
        return None
    return (predicted - measured) / measured


def _check_figures(record: Record, out: dict[str, Any], path: str) -> None:
    """Set ``implausible``: what of an ok record fails :func:`analysis.checks.record_problems`
    (its derived figures against its raw fields, negative or non-finite figures, timestamps out
    of order), None when nothing does; warn once naming it (the row is left out of rankings)."""
    problems = record_problems(record)
    out["implausible"] = "; ".join(problems) or None
    if problems:
        log.warning("%s fails its checks (left out of rankings and plots): %s", path, "; ".join(problems))


def noise_flags(record: Record, out: dict[str, Any]) -> str | None:
    """``noisy`` (step CV over :data:`flopsweep.noise.NOISY_CV`) and ``load`` (the host lacked idle
    cores, :func:`flopsweep.noise.overloaded`) for an ok record, comma-separated; None when neither.
    Computed from the figures, so records written before the job's noise warnings get them too."""
    if out.get("status") != "ok":
        return None
    flags = []
    if noisy(out.get("iteration_time_s_cv")):
        flags.append("noisy")
    cores = _get(record, ("system", "cpu_count"))
    ranks = _get(record, ("system", "nproc_per_node"))
    if overloaded(out.get("loadavg_1m_start"), out.get("loadavg_1m_end"), cores, ranks):
        flags.append("load")
    return ",".join(flags) or None


def _loadavg_1m(value: Any) -> tuple[Any, Any]:
    """(start, end) 1-minute load averages of ``system.loadavg``: ``{"start": [1m, 5m, 15m], "end":
    [...]}``, or one list taken at the end (older records)."""

    def first(v: Any) -> Any:
        return v[0] if isinstance(v, list) and v else None

    if isinstance(value, dict):
        return first(value.get("start")), first(value.get("end"))
    return None, first(value)


_ONLY_FOR = {spec.name: where for spec in SETUP_SPECS if (where := only_for(spec))}
"""column -> (option column, options): blank in other rows, where the knob does nothing (v1 records
carry every key), from the option schemas (:func:`flopsweep.columns.only_for`)."""


def _blank_unused(out: dict[str, Any]) -> None:
    """Blank the knobs of a backend or attention the run did not use (v1 records carry every key)."""
    for column, (setup, options) in _ONLY_FOR.items():
        if out.get(setup) not in options:
            out[column] = None
    if out.get("tag") == "":
        out["tag"] = None


def _walk(root: Path, skipped: dict[str, str]) -> list[Path]:
    """The ``metrics.json`` regular files under the directory ``root``. No link met on the way is
    followed (``os.walk(followlinks=False)``: a link loop ends the walk of its branch); a linked
    directory is logged as not followed, and a ``metrics.json`` that is a link, a FIFO, a device
    or a directory goes into ``skipped`` with the reason."""
    found = []

    def unreadable(exc: OSError) -> None:
        skipped[display_path(exc.filename or root)] = f"cannot list the directory: {exc.strerror or exc}"

    for top, dirs, files in os.walk(root, onerror=unreadable, followlinks=False):
        dirs.sort()
        for name in (d for d in dirs if d != METRICS_FILE and os.path.islink(os.path.join(top, d))):
            shown = display_path(Path(top, name))
            log.warning("not following the directory link %s (name it to read it)", shown)
        if METRICS_FILE in files or METRICS_FILE in dirs:
            _keep(Path(top, METRICS_FILE), found, skipped)
    return sorted(found)


def _keep(path: Path, found: list[Path], skipped: dict[str, str]) -> None:
    """Add ``path`` to ``found`` when it is a regular file (not a link); else its reason to ``skipped``."""
    try:
        why = not_a_record(path)
    except OSError as exc:
        why = f"cannot read the file: {exc.strerror or exc}"
    if why is None:
        found.append(path)
    else:
        skipped[display_path(path)] = why


def _entries(base: Path, part: str, dirs_only: bool) -> list[Path]:
    """The entries of ``base`` whose names match the wildcard ``part`` (hidden ones only when
    ``part`` starts with a dot, as :mod:`glob`); with ``dirs_only``, directories (or links to one)."""
    try:
        with os.scandir(base) as it:
            entries = list(it)
    except OSError:
        return []
    hidden = part.startswith(".")
    return [
        base / e.name
        for e in entries
        if fnmatch.fnmatchcase(e.name, part)
        and (hidden or not e.name.startswith("."))
        and (not dirs_only or e.is_dir())
    ]


def _dirs_below(base: Path) -> list[Path]:
    """``base`` and every directory under it, for ``**``: no link is followed below ``base``."""
    return [Path(top) for top, _, _ in os.walk(base, followlinks=False)]


def _glob(pattern: str) -> list[Path]:
    """Paths matching ``pattern`` (``*``, ``?``, ``[...]``, ``**``), expanded one component at a time:
    ``**`` walks without following links (a link loop is never entered), a literal last component
    is matched when the path exists even as a dangling or looping link (so that it is skipped with
    its reason, not silently); ``[]`` when none match."""
    parts = Path(pattern).parts
    first = next((i for i, part in enumerate(parts) if glob.has_magic(part)), None)
    if first is None:
        return []
    current = [Path(*parts[:first]) if first else Path()]
    for i, part in enumerate(parts[first:], start=first):
        last = i == len(parts) - 1
        found: list[Path] = []
        for base in current:
            if part == "**":
                found += _dirs_below(base)
            elif glob.has_magic(part):
                found += _entries(base, part, dirs_only=not last)
            elif os.path.lexists(base / part) if last else (base / part).is_dir():
                found.append(base / part)
        current = found
    return sorted(set(current))


def _expand(p: Path, found: list[Path], skipped: dict[str, str], spelled: bool = True) -> None:
    """Records of one path: a directory walked (it may be a link the user named), any other path
    kept if it is a regular file, a glob expanded."""
    if p.is_dir():
        found.extend(_walk(p, skipped))
    elif os.path.lexists(p):
        _keep(p, found, skipped)
    elif spelled and (matches := _glob(str(p))):
        for match in matches:
            _expand(match, found, skipped, spelled=False)
    else:
        raise FileNotFoundError(f"{display_path(p)}: no such file, directory or glob match")


def discover(paths: Iterable[str | Path]) -> tuple[list[Path], dict[str, str]]:
    """``(records, skipped)`` under ``paths``: ``metrics.json`` regular files (directories walked
    without following links, files as given, globs expanded, each found once, in path order), and
    the paths that were passed over with the reason for each: a link, a FIFO, a device, a
    directory that cannot be listed. Nothing is opened here.

    How links are treated (once, for the sweep, resume and the analysis): a record is a regular
    file at its own path, never a link; a directory named on the command line (or matched by a
    glob) may be a link, a directory link met inside a walk is not followed.

    Raises:
        FileNotFoundError: when a path neither exists nor matches a glob.
    """
    found: list[Path] = []
    skipped: dict[str, str] = {}
    for p in paths:
        _expand(Path(p), found, skipped)
    seen: set[str] = set()
    unique = []
    for path in found:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique, skipped


def find_records(paths: Iterable[str | Path]) -> list[Path]:
    """The ``metrics.json`` regular files under ``paths`` (:func:`discover`, less what it skipped).

    Raises:
        FileNotFoundError: when a path neither exists nor matches a glob.
    """
    return discover(paths)[0]


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


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in NUMERIC_METRICS + list(_FLOAT_COLUMNS):
        df[col] = pd.to_numeric(df[col].map(_number), errors="coerce").astype("float64")
    for col in METRIC_COLUMNS:
        if col not in NUMERIC_METRICS:
            df[col] = _typed(df[col].astype(object))
    for col in _INT_COLUMNS:  # integers that may be blank; anything else is blank
        df[col] = pd.array(df[col].map(_int_or_none).tolist(), dtype="Int64")
    for col in _BOOL_COLUMNS:
        df[col] = pd.array(
            df[col].map(lambda v: v if isinstance(v, bool) else None).tolist(), dtype="boolean"
        )
    for col in ("tflops_mismatch", "duplicate_run_id"):
        df[col] = df[col].fillna(False).astype(bool)
    # A run that never launched has no world size: unknown, not 0 (v1 wrote 0; the upgrade maps it).
    df["world_size"] = df["world_size"].mask(df["world_size"] <= 0)
    return df


def parallel_degrees(record: Record) -> dict[str, int] | None:
    """The record's ``system.parallel`` degrees; for a record without them (older ones), pure
    data parallel over ``system.world_size`` (``dp_shard`` = the world size, every other degree
    1); None when neither is known (a run that never launched)."""
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    degrees = system.get("parallel")
    if isinstance(degrees, dict) and all(
        isinstance(degrees.get(k), int) and not isinstance(degrees.get(k), bool) for k in _DEGREES
    ):
        return {k: degrees[k] for k in _DEGREES}
    world = system.get("world_size")
    if isinstance(world, int) and not isinstance(world, bool) and world > 0:
        return {"dp_replicate": 1, "dp_shard": world, "tp": 1, "pp": 1, "cp": 1}
    return None


_DEGREES = ("dp_replicate", "dp_shard", "tp", "pp", "cp")


def _layout_columns(out: dict[str, Any], record: Record) -> None:
    """``dp`` (replicate x shard), the degrees ``dp_replicate``, ``dp_shard``, ``tp``, ``pp`` and
    the ``layout`` label (:meth:`flopsweep.layout.Layout.label`, the pipeline schedule from
    ``config.parallel.pp_schedule``) from :func:`parallel_degrees`; blank when it has none."""
    degrees = parallel_degrees(record)
    try:
        layout = Layout(**degrees) if degrees else None
    except ConfigError:  # a degree below 1: no layout to name
        layout = None
    out["dp"] = layout.dp if layout else None
    for name in ("dp_replicate", "dp_shard", "tp", "pp"):
        out[name] = getattr(layout, name) if layout else None
    schedule = _get(record, ("config", "parallel", "pp_schedule"))
    out["layout"] = layout.label(schedule if isinstance(schedule, str) else None) if layout else None


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
    """Warn, per set-up, when its one-rank runs disagree beyond their 95% intervals."""
    for sid, runs in ones.groupby("setup_id"):
        cis = [c for _, r in runs.iterrows() if (c := ci_of(r, "tokens_per_s_per_device")) is not None]
        if any(not overlap(a, b) for a in cis for b in cis):
            log.warning(
                "one-rank runs of set-up %s disagree beyond their 95%% intervals (%s tokens/s per device): "
                "the scaling baseline is their median, not their mean",
                sid,
                ", ".join(f"{v:,.0f}" for v in runs["tokens_per_s_per_device"]),
            )


def flag_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Set ``duplicate_run_id`` on every row whose ``run_id`` another row shares; warn once per id."""
    dup = df["run_id"].notna() & df["run_id"].duplicated(keep=False)
    df["duplicate_run_id"] = dup
    for run_id, dirs in df.loc[dup].groupby("run_id")["run_dir"]:
        log.warning("duplicate run id %s in %s: %s", run_id, plural(len(dirs), "record"), ", ".join(dirs))
    return df


def fill_predictions(read: list[tuple[Path, Record, int]]) -> int:
    """``--predict``: give every ``ok`` record of ``read`` without ``metrics.predicted`` (or with a
    null step time there) the prediction :func:`flopsweep.predict.predict_record` makes from the
    other records read (its calibrations), in place; returns how many were filled. Its ``source``
    begins ``analysis --predict:``."""
    named = [(display_path(path), record) for path, record, _ in read]
    filled = 0
    for name, record in named:
        metrics = record.get("metrics")
        if record.get("status") != "ok" or not isinstance(metrics, dict):
            continue
        if isinstance(metrics.get("predicted"), dict) and metrics["predicted"].get("iteration_time_s"):
            continue
        try:
            made = predict_record(name, record, named)
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError) as exc:
            made = {"iteration_time_s": None, "tokens_per_s": None, "source": f"no prediction: {exc!r}"[:300]}
        made["source"] = f"analysis --predict: {made['source']}"
        record["metrics"] = {**metrics, "predicted": made}
        filled += made["iteration_time_s"] is not None
    return filled


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


def name_sizes(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the ``model`` of every run whose model name other runs of ``df`` share at another
    ``n_layer`` (``model.n_layer=33`` beside the 32-block default) named by :func:`sized_name`, so that
    no table or pivot shows two sizes under one name (repeats pool by ``setup_id``, which tells them
    apart already). Other names are kept; other size keys (``model.n_embd``) are not named so."""
    if df.empty or "n_layer" not in df:
        return df
    counts = df.groupby("model", dropna=True)["n_layer"].nunique(dropna=True)
    mask = df["model"].isin(set(counts[counts > 1].index))
    if mask.any():
        df.loc[mask, "model"] = [
            sized_name(m, n) for m, n in zip(df.loc[mask, "model"], df.loc[mask, "n_layer"], strict=True)
        ]
    return df


def load(paths: Iterable[str | Path] | str | Path, *, predict: bool = False) -> pd.DataFrame:
    """One row per run from every ``metrics.json`` under ``paths`` (dirs, files or globs).

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
    ``df.attrs["records"]`` lists the files read (no output may be written over one).

    Unreadable files (empty, truncated or oversized JSON, too deeply nested, unknown
    version, missing required key, a set-up name that is not text, numbers too large
    for a float; a link, a FIFO, a device where a record should be: :func:`discover`) are
    logged once each by path and skipped; ``df.attrs["unreadable"]`` maps each path to the reason.

    Raises:
        FileNotFoundError: when a path does not exist.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows = []
    found, bad = discover(paths)
    for shown, why in bad.items():
        log.warning("skipping unreadable record %s: %s", shown, why)
    read: list[tuple[Path, Record, int]] = []
    for path in found:
        try:
            read.append((path, *read_record(path)))
        except RecordError as exc:
            log.warning("skipping unreadable record %s: %s", display_path(path), exc)
            bad[display_path(path)] = str(exc)
    if predict:
        fill_predictions(read)
    for path, record, version in read:
        try:
            rows.append(row(record, display_path(path.parent), version))
        except RecordError as exc:
            log.warning("skipping unreadable record %s: %s", display_path(path), exc)
            bad[display_path(path)] = str(exc)
    df = flag_duplicates(name_sizes(_frame(rows)))
    df = flag_scaling(add_scaling(pool_repeats(df, rankable(df), NUMERIC_METRICS)))
    df["prediction_error"] = [  # again after pooling: the median prediction over the median step
        prediction_error(p, m)
        for p, m in zip(df["predicted_iteration_time_s"], df["iteration_time_s_mean"], strict=True)
    ]
    df["prediction_error"] = df["prediction_error"].astype("float64")
    df.attrs["unreadable"] = bad
    df.attrs["records"] = [str(p) for p in found]  # what was read: no output may be written over it
    return df


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
