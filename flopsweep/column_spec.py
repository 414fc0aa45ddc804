"""How each column outside the set-up columns is shown: the spec (:class:`ColumnSpec`, :data:`FORMATS`,
:data:`TABLE`) and every such column's (:data:`COLUMN_SPECS`: the default table's columns in order, then the
rest). Split out of :mod:`flopsweep.columns` by topic, which hands on every name here
(``flopsweep.columns.COLUMN_SPECS`` is this list: the analysis imports it there); the set-up columns are
:data:`flopsweep.columns.SETUP_SPECS`. Torch-free; imports nothing of flopsweep."""

from __future__ import annotations

from dataclasses import dataclass

FORMATS = ("", "percent", "thousands", "times")
"""How a number cell reads: ``12.3%``, ``12,345``, ``1.23x``; "": ``.4g`` (``12,345`` for big integers)."""
TABLE = ("", "always", "some")
"""Where the default table shows a column (:attr:`ColumnSpec.table`)."""
HIDE_SETUP = 100
"""The :attr:`ColumnSpec.hide` rank of the set-up columns (hidden last declared first, the ``table``
ones after the rest, ``model`` never): lower ranks are hidden before them, higher ones after."""


@dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """How one column outside :data:`SETUP_SPECS` is shown: a metric's presentation (its header,
    unit, description and direction are its ``MetricSpec``'s) or a column the analysis makes.
    ``analysis.catalogue`` merges them into one spec per column, which every output reads.

    Attributes:
        name: the column.
        header: short header in the terminal, markdown and HTML tables ("": the metric's, else the name).
        description: the legend's line ("": the metric's, else no legend entry).
        kind: :data:`flopsweep.setup_spec.KINDS` of a column the analysis makes (None: a metric, typed by
            its unit or values).
        better: ``higher`` or ``lower`` for a figure of merit the analysis makes (metrics: their own).
        format: one of :data:`FORMATS` ("": percent for a metric of unit ``1``, thousands for ``1/s``).
        table: :data:`TABLE`: in the default table ``always``, where ``some`` row has a value, or not ("").
        hide: ``--width`` hides lowest first (:data:`HIDE_SETUP`); None: only when blank in every row.
        interval: carries a 95% interval (``<name>_ci_low``, ``<name>_ci_high``: ``analysis.spread``).
    """

    name: str
    header: str = ""
    description: str = ""
    kind: str | None = None
    better: str | None = None
    format: str = ""
    table: str = ""
    hide: int | None = None
    interval: bool = False


C = ColumnSpec
COLUMN_SPECS: list[ColumnSpec] = [
    # The default table after its set-up columns, in order (table="always" or "some").
    C(name="status", kind="text", table="always"),
    C(name="model_tflops_per_device", table="always", interval=True),
    C(name="model_tflops_per_device_ci_low", table="always", hide=17),
    C(name="model_tflops_per_device_ci_high", table="always", hide=16),
    C(
        name="repeats",
        header="reps",
        description="rounds pooled into the row (repeats=): its step their mean, its rates and step costs "
        "that step's, every other figure of merit their mean, as every other number (energy too); checks "
        "recomputed from those; text their shared value, blank where they differ; 1 for one run",
        kind="int",
        table="always",
        hide=10,
    ),
    C(name="mfu", table="some", hide=HIDE_SETUP + 2, interval=True),
    C(name="hfu", table="some", hide=15, interval=True),
    C(name="tokens_per_s", table="always", interval=True),
    C(name="iteration_time_s_mean", table="always"),
    C(
        name="scaling_efficiency",
        header="scale_eff",
        description="tokens/s per device / the same set-up's tokens/s on one device (weak scaling)",
        better="higher",
        table="some",
    ),
    C(name="predicted_iteration_time_s", table="some", hide=8),
    C(
        name="prediction_error",
        header="pred_err",
        description="(predicted - measured) / measured mean step time: above 0, the run was faster "
        "than predicted",
        kind="float",
        table="some",
        hide=9,
    ),
    C(
        name="scaling_baseline",
        header="scale_base",
        description="what scale_eff divides by when not the same set-up's 1-rank runs (blank)",
        table="some",
    ),
    C(name="joules_per_token", table="some", hide=HIDE_SETUP + 1),
    C(name="power_w_mean", table="some", hide=7),
    C(name="usd_per_million_tokens", table="some", hide=6),
    C(name="budget_gpu_hours", table="some", hide=5),
    C(name="budget_days", table="some", hide=4),
    C(name="budget_energy_kwh", table="some", hide=3),
    C(name="budget_usd", table="some", hide=2),
    C(name="peak_cuda_allocated_gib", table="some", hide=HIDE_SETUP + 3),
    C(name="peak_cuda_reserved_gib", table="some", hide=13),
    C(name="predicted_peak_gib", table="some", hide=12),
    C(
        name="peak_memory_error",
        header="mem_err",
        description="(predicted - measured) / measured peak allocated GPU memory (pred_GiB, alloc_GiB)",
        kind="float",
        format="percent",
        table="some",
        hide=14,
    ),
    C(name="peak_host_rss_gib", table="always", hide=11),
    C(name="breakdown_compute_s", table="some"),
    C(name="breakdown_optimizer_s", table="some"),
    C(name="breakdown_exposed_comm_s", table="some"),
    C(name="breakdown_idle_s", table="some"),
    # Shown where asked for (--columns, csv, json), or added by a query.
    C(name="tokens_per_s_per_device", interval=True),
    C(name="hardware_tflops_per_device", interval=True),
    C(name="error", kind="text", hide=1),
    C(name="error_type", kind="text"),
    C(name="error_phase", header="phase", description="phase of the error", kind="text"),
    C(name="run_id", kind="text"),
    C(
        name="run_wall_s",
        description="seconds from the job's start to its record (run.wall_s): launch, probes, steps",
        kind="float",
    ),
    C(
        name="speedup",
        description="the run's ranking metric over the baseline set-up's",
        better="higher",
        format="times",
    ),
    C(name="speedup_ci_low", format="times"),
    C(name="speedup_ci_high", format="times"),
    C(
        name="model_tflops_per_device_recomputed",
        header="TFLOPs_recomp",
        description="model_flops_per_iteration / (mean step time x world size); pooled: the pooled step's",
        kind="float",
    ),
    C(
        name="loadavg_1m_start",
        description="the host's 1-minute load average when the job started",
        kind="float",
    ),
    C(name="loadavg_1m_end", description="the host's 1-minute load average when the job ended", kind="float"),
    C(name="dp", kind="float"),
    C(
        name="setup_id",
        description="the run's config less its rank count (nproc_per_node, nnodes) and run controls, hashed",
    ),
    C(name="base_setup_id", description="setup_id without the parallel layout (config.parallel)"),
    C(
        name="code_id",
        description="the code that measured the run (a clean checkout's commit; torch, CUDA, DeepSpeed, "
        "Python), hashed; blank where unknown or edited",
    ),
    C(name="repeat", kind="int"),
    C(
        name="ci_over",
        description="what the 95% intervals are over: repeats (rounds of repeats=) or steps "
        "(one run's steps)",
    ),
    C(name="schema_version", kind="int"),
    C(
        name="flags",
        description="dup-id: run id shared; tflops?: TFLOPs fail the recomputation (not ranked); "
        "check?: a value of the wrong type or range, or a figure that fails its raw fields (not ranked, "
        "column implausible); warn: warnings; "
        "noisy: step CV over 5%; load: the host lacked idle cores; tie?: the best two's 95% intervals "
        "overlap",
    ),
    C(
        name="implausible",
        description="the values of the record of the wrong type or range, and the figures that fail their "
        "raw fields (analysis.checks)",
    ),
]
"""The presentation of every column outside :data:`SETUP_SPECS` that needs one: the default table's
(in its order), then the rest. A metric shown in every output is its ``MetricSpec`` line
(:data:`flopsweep.record.METRIC_SPECS`) plus, to join the default table, one line here."""
del C
