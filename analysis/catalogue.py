"""The column catalogue: one :class:`flopsweep.columns.ColumnSpec` per column of the analysis, merged
from the declarations, and what every output derives from it.

Three declarations, all torch-free, feed it: the set-up columns (:data:`flopsweep.columns.SETUP_SPECS`),
the metric columns (:data:`flopsweep.record.METRIC_SPECS`: header, unit, description, which way is
better) and the presentation of metrics and of the columns the analysis makes
(:data:`flopsweep.columns.COLUMN_SPECS`: header, format, the default table, the order ``--width``
hides in). :data:`SPECS` is the merge; :data:`SHORT`, :data:`DESCRIPTIONS`, :data:`BETTER`,
:data:`TABLE_COLUMNS`, :data:`OPTIONAL`, :data:`DROP_ORDER` and the column types are read from it, and
the one view (:mod:`analysis.display`) that the terminal, markdown, CSV, JSON, HTML and notebook
outputs draw from reads the same. Adding a metric shown everywhere is its ``MetricSpec`` line plus,
to join the default table, its ``ColumnSpec`` line.

Imports no other analysis module (:mod:`analysis.spread` and :mod:`analysis.load` import this one).
"""

from __future__ import annotations

import dataclasses

from flopsweep.columns import COLUMN_SPECS, HIDE_SETUP, SETUP_SPECS, ColumnSpec, kind, only_for
from flopsweep.record import METRIC_SPECS, PRE_RUN_METRICS, MetricSpec

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
    ("run_wall_s", ("run", "wall_s"), "wall_s"),
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
"""Metric columns: blank for every run whose status is not ok, whatever its ``metrics`` say, but the
:data:`PRE_RUN_COLUMNS`, read from its ``run.before_run``."""
PRE_RUN_FIELDS: list[MetricSpec] = [spec for spec in METRIC_FIELDS if spec.key in PRE_RUN_METRICS]
"""The specs of :data:`PRE_RUN_COLUMNS`."""
PRE_RUN_COLUMNS: list[str] = [spec.name for spec in PRE_RUN_FIELDS]
"""The metric columns known before the run (:data:`flopsweep.record.PRE_RUN_METRICS`: ``predicted_peak_gib``
and the ``predicted_*`` step-time prediction): for a run whose status is not ok, read from its
``run.before_run`` (:data:`flopsweep.record.BEFORE_RUN`; its ``metrics`` are all null), so an ``oom`` row
shows what the estimate said; blank where the record has none. Never a measured figure:
``peak_memory_error`` and ``prediction_error`` stay blank there, with no measured figure to compare."""
BREAKDOWN_COLUMNS: list[str] = [spec.name for spec in METRIC_FIELDS if spec.key == "breakdown"]
"""The ``breakdown_*`` columns (``profile=true``)."""
NUMERIC_METRICS: list[str] = [spec.name for spec in METRIC_FIELDS if spec.unit]
"""Metric columns with a unit: always float64 (others are typed by their values)."""

_INTERVALS = {spec.name for spec in COLUMN_SPECS if spec.interval}
CI_METRICS = tuple(name for name in METRIC_COLUMNS if name in _INTERVALS)
"""The rates that carry an interval (``<name>_ci_low``, ``<name>_ci_high``): :attr:`ColumnSpec.interval`."""
CI_COLUMNS = [f"{m}_ci_{end}" for m in CI_METRICS for end in ("low", "high")]
"""The interval columns, in :data:`CI_METRICS` order."""

PARALLEL_COLUMNS = ["dp"]
"""The data-parallel degree (``dp_replicate x dp_shard`` of ``system.parallel``): how many
different batches one step sees. A record without ``system.parallel`` (written before the layout
was recorded) was pure data parallel: ``dp`` is its world size (``analysis.fields.parallel_degrees``)."""

MEMORY_COLUMNS = ["peak_memory_error"]
"""How far the plan's memory estimate was from the measured peak: ``peak_memory_error`` =
(``predicted_peak_gib`` - ``peak_cuda_allocated_gib``) / ``peak_cuda_allocated_gib`` (blank on the
CPU and for records without a prediction)."""

DERIVED_COLUMNS = [
    "scaling_efficiency",
    "scaling_baseline",
    "setup_id",
    "base_setup_id",
    "code_id",
    "prediction_error",
]
"""Columns computed across records (``analysis.load.add_scaling``), after the per-record ones."""
REPEAT_COLUMNS = ["repeat", "repeat_group", "repeats", "ci_over", *CI_COLUMNS, "noise"]
"""The round of a ``repeats=`` sweep (``run.repeat``, ``run.repeat_group``), how many rounds a row
pools (1 for one run), what its 95% intervals are over (``repeats`` or ``steps``), the intervals
(:mod:`analysis.spread`), and its noise flags (``noisy``, ``load``: :mod:`flopsweep.noise`)."""

SEARCH_COLUMNS = ["search_probes", "search_failed"]
"""``search.model=largest``'s probes that trained (``run.model_search.probes``): a list of
``[n_params, tokens_per_s]``, the tokens/s of each probe's one measured step (indicative); the
frontier plot draws them (:func:`analysis.plots.plot_frontier`). Blank without a search."""

CHECK_COLUMNS = [
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
    + CHECK_COLUMNS
)
"""Every column of ``analysis.load.load``: set-up, status, metrics (spec order), error and run, checks."""

_UNIT_FORMAT = {"1": "percent", "1/s": "thousands"}


def _metric(spec: MetricSpec) -> ColumnSpec:
    return ColumnSpec(
        name=spec.name,
        header=spec.header,
        description=spec.description,
        better=spec.better,
        format=_UNIT_FORMAT.get(spec.unit, ""),
    )


def _interval(metric: ColumnSpec, end: str) -> ColumnSpec:
    where = "low end" if end == "low" else "high end"
    return ColumnSpec(
        name=f"{metric.name}_ci_{end}",
        header=f"{metric.header}_{end[:2]}95",
        description=f"{where} of the 95% interval of {metric.name} (over repeats or steps: ci_over)",
        kind="float",
        format=metric.format,
    )


def _merge(base: ColumnSpec | None, spec: ColumnSpec) -> ColumnSpec:
    """``spec`` with the fields it leaves at their defaults taken from ``base``."""
    if base is None:
        return spec
    default = ColumnSpec(name=spec.name)
    given = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v != getattr(default, k)})


def _specs() -> dict[str, ColumnSpec]:
    specs = {s.name: ColumnSpec(name=s.name, header=s.header, description=s.description) for s in SETUP_SPECS}
    specs |= {name: ColumnSpec(name=name, header=header) for name, _, header in RUN_FIELDS}
    specs |= {spec.name: _metric(spec) for spec in METRIC_FIELDS}
    for spec in COLUMN_SPECS:
        specs[spec.name] = _merge(specs.get(spec.name), spec)
    for m in CI_METRICS:
        for end in ("low", "high"):
            name = f"{m}_ci_{end}"
            specs[name] = _merge(_interval(specs[m], end), specs.get(name, ColumnSpec(name=name)))
    return {name: dataclasses.replace(s, header=s.header or name) for name, s in specs.items()}


SPECS: dict[str, ColumnSpec] = _specs()
"""Every column's spec, merged (module doc): set-up, run fields, metrics, intervals, the analysis' own."""

SETUP_NAMES = [spec.name for spec in SETUP_SPECS]


def header(column: object) -> object:
    """The column's short header (its spec's); a column outside the catalogue keeps its name."""
    spec = SPECS.get(column) if isinstance(column, str) else None
    return spec.header if spec else column


SHORT: dict[str, str] = {name: spec.header for name, spec in SPECS.items()}
"""Short header of each column (the terminal, markdown and HTML tables); csv/json keep full names."""
DESCRIPTIONS: dict[str, str] = {name: spec.description for name, spec in SPECS.items() if spec.description}
"""One line per column for the legend under a table."""
BETTER: dict[str, str] = {name: spec.better for name, spec in SPECS.items() if spec.better}
"""Which way each figure of merit is better, ``higher`` or ``lower``: the metric columns from
``MetricSpec.better`` (:data:`flopsweep.record.METRIC_SPECS`), plus the columns the analysis
derives (``ColumnSpec.better``). Sorting, ``table``, ``best`` and ``compare`` follow it."""
HIGHER_IS_BETTER = {name for name, way in BETTER.items() if way == "higher"}
"""Columns ranked descending (tokens/s, TFLOPs, MFU, HFU, scaling efficiency, speedup)."""
LOWER_IS_BETTER = {name for name, way in BETTER.items() if way == "lower"}
"""Columns ranked ascending (step times, memory)."""
FORMAT: dict[str, str] = {name: spec.format for name, spec in SPECS.items() if spec.format}
"""How each number column's cells read (:data:`flopsweep.columns.FORMATS`); others by value."""

_KINDS = {spec.name: kind(spec) for spec in SETUP_SPECS} | {n: s.kind for n, s in SPECS.items() if s.kind}
INT_COLUMNS = tuple(c for c, k in _KINDS.items() if k == "int")
FLOAT_COLUMNS = tuple(c for c, k in _KINDS.items() if k == "float")
BOOL_COLUMNS = tuple(c for c, k in _KINDS.items() if k == "bool")
TEXT_COLUMNS = tuple(c for c, k in _KINDS.items() if k == "text")

_TABLE = [spec for spec in COLUMN_SPECS if spec.table]
TABLE_COLUMNS = [
    *(spec.name for spec in SETUP_SPECS if spec.show == "table"),
    *(spec.name for spec in _TABLE),
]
"""The default table: what the README calls the comparison table (mean iteration time: the rates
use it): the ``table`` set-up columns, then the :data:`flopsweep.columns.COLUMN_SPECS` with a ``table``."""
OPTIONAL = [
    *(spec.name for spec in _TABLE if spec.table == "some"),
    *(spec.name for spec in SETUP_SPECS if only_for(spec)),
]
"""Columns the default table shows only when some row has a value: metrics, and the knobs of some
options only (``zero_stage``)."""
PREDICTION_COLUMNS = ["predicted_iteration_time_s", "prediction_error"]
"""The prediction columns of the default table (``metrics.predicted``, ``--predict``), shown only
where some row has a value (records from before the prediction have none)."""
ENERGY_UNITS = ("J", "W", "USD", "kWh", "GPU h", "days")
_UNITS = {spec.name: spec.unit for spec in METRIC_FIELDS}
ENERGY_COLUMNS = [spec.name for spec in _TABLE if _UNITS.get(spec.name) in ENERGY_UNITS]
"""The energy and cost columns of the default table, shown only where some row has a value (GPU
runs with NVML's counter; a price, ``cost.usd_per_gpu_hour``; a budget, ``budget.tokens``)."""


def _drop_order() -> list[str]:
    ranked = sorted((s for s in SPECS.values() if s.hide is not None), key=lambda s: s.hide)
    show = {spec.name: spec.show for spec in SETUP_SPECS}
    setup = [c for c in reversed(SETUP_NAMES) if show[c] != "table"]
    setup += [c for c in reversed(SETUP_NAMES) if show[c] == "table" and c != "model"]
    return [
        *(s.name for s in ranked if s.hide < HIDE_SETUP),
        *setup,
        *(s.name for s in ranked if s.hide >= HIDE_SETUP),
    ]


DROP_ORDER = _drop_order()
"""The order ``--width`` hides the default table's columns in (:attr:`ColumnSpec.hide`; those the
same in every row first: ``analysis.display.drop_order``); a set-up column that tells rows apart is
never hidden."""
