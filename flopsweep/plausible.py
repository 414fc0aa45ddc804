"""Plausibility of an ok record: every derived figure against the raw fields it is derived from.

Torch-free, one place: the analysis (``analysis.checks`` re-exports it: rows flagged ``check?``)
and the calibration of predictions (``predict.calibration=``, ``python -m analysis --predict``:
:func:`calibration_problems`) run the same checks, so no record the analysis would flag calibrates
a prediction. A record is a file anyone with write access to its folder can edit, and a liar can
scale every figure to match: the checks below also hold the figures to the run's own layout, clock
and GPU. The job derives its figures with one formula each (``flopsweep.metrics.compute_metrics``);
:func:`record_problems` recomputes each from the record's own raw fields and names every figure
that disagrees by more than :data:`CHECK_TOLERANCE`, or that no real run can have:

- a value of the wrong type or out of range (``"tokens_per_s": "fast"``, a list for a step time, a
  fraction for a batch size, 1e300 bytes): :func:`flopsweep.figure_types.type_problems`, for every
  key the analysis reads;
- a metric figure (any ``MetricSpec`` with a unit, or a step time) that is negative or not finite
  (``1e999`` parses as infinity);
- a step time (``iteration_time_s``'s ``mean``, ``median``, ``min``, ``max`` and ``values``) under
  :data:`MIN_STEP_S` (0 included) or over :data:`MAX_STEP_S`; measured steps that sum to more than
  the run's wall time (``run.started_at`` to ``run.finished_at``); a count of ``values`` other than
  ``config.steps.measure``;
- ``system.world_size`` that is not a positive whole number, or is not ``system.nproc_per_node`` x
  ``config.nnodes``; ``system.parallel`` degrees that are not positive whole numbers or whose mesh
  degrees (``dp_replicate`` x ``dp_shard`` x ``tp`` x ``pp`` x ``cp``) do not multiply to it;
- ``iteration_time_s``: ``mean``, ``median``, ``min``, ``max``, ``std`` and ``cv`` against its
  ``values`` (the measured steps);
- ``tokens_per_step`` = ``global_batch_size`` x ``config.model.seq_len``; ``global_batch_size`` =
  micro batch x grad accumulation x data-parallel degree (``system.parallel``; the world size for
  older records);
- ``tokens_per_s`` = ``tokens_per_step`` / mean step; ``tokens_per_s_per_device`` = ``tokens_per_s`` /
  world size;
- ``hardware_tflops_per_device`` = ``hardware_flops_per_iteration`` / (mean step x world size x 1e12)
  (the model figure is :func:`recompute_tflops`, flag ``tflops?``, :func:`tflops_problem`);
- ``mfu`` and ``hfu`` = TFLOPs / ``peak_tflops``; ``mfu_fp8`` = model TFLOPs / ``peak_tflops_fp8``;
  ``matmul_fraction`` = model TFLOPs / ``measured_matmul_tflops`` (a ratio without its denominator
  is a problem too); ``mfu``, ``hfu`` or ``mfu_fp8`` above 1 (no run beats its GPU's peak);
- energy (issue 25): ``joules_per_token`` = ``energy_j`` / (``tokens_per_step`` x measured steps);
  ``power_w_mean`` = ``energy_j`` / (sum of the step times x world size); ``usd_per_million_tokens``
  and ``budget`` against :mod:`flopsweep.cost` with ``config.cost`` and ``config.budget``;
- ``run.finished_at`` not before ``run.started_at``;
- across records (:func:`scaling_problem`, after ``analysis.load.add_scaling``): a
  ``scaling_efficiency`` above :data:`MAX_SCALING_EFFICIENCY`.

A figure whose inputs are missing (older schema versions) is not checked. The analysis flags a
failing row ``check?``, names what failed in its ``implausible`` column and a warning, and leaves
it out of rankings and plots (``analysis.load.rankable``).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
from typing import Any

from flopsweep.config import RunConfig
from flopsweep.cost import budget, usd_per_million_tokens
from flopsweep.figure_types import as_number, type_problems
from flopsweep.identity.versions import Record
from flopsweep.layout import MESH_DEGREES
from flopsweep.limits import MAX_BY_KEY
from flopsweep.record import METRIC_SPECS
from flopsweep.safe_read import RecordError
from flopsweep.text import figure, json_type, plural

__all__ = [
    "CHECK_TOLERANCE",
    "MAX_SCALING_EFFICIENCY",
    "MAX_STEP_S",
    "MIN_STEP_S",
    "MISMATCH_TOLERANCE",
    "calibration_problems",
    "record_problems",
    "recompute_tflops",
    "scaling_problem",
    "tflops_problem",
]

CHECK_TOLERANCE = 0.01
"""Largest relative difference between a recorded figure and the one recomputed from its raw fields."""

MAX_SCALING_EFFICIENCY = 1.2
"""Largest plausible weak-scaling efficiency (tokens/s per device over the baseline's): more ranks
never make a device much faster; 1.1 or so is cache and clock noise, 14.77 is a bad baseline or a
bad record."""

MIN_STEP_S = 1e-5
"""The shortest plausible step time, seconds: a training step launches a forward and a backward
kernel at least, some microseconds each on any GPU (the committed records' fastest step: 5 ms, a
tiny model on the CPU)."""

MAX_STEP_S = float(MAX_BY_KEY["timeout_s"])
"""The longest plausible step time, seconds: a week, the largest ``timeout_s`` a run may ask for
(the job is stopped then, measured steps and all)."""

MISMATCH_TOLERANCE = 0.01
"""Relative difference between recorded and recomputed model TFLOPs that sets ``tflops_mismatch``."""

_NUMERIC_PATHS = [spec.path or (spec.key,) for spec in METRIC_SPECS if spec.unit]


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def _fmt(value: float) -> str:
    return f"{figure(value, 4)}"


def _bad_numbers(metrics: dict[str, Any]) -> list[str]:
    """Metric figures that are negative or not finite, step values included."""
    out = []
    named = [(".".join(p), as_number(_get(metrics, *p))) for p in _NUMERIC_PATHS]
    values = _get(metrics, "iteration_time_s", "values")
    if isinstance(values, list):
        named += [(f"iteration_time_s.values[{i}]", as_number(v)) for i, v in enumerate(values)]
    for name, value in named:
        if value is None:
            continue
        if not math.isfinite(value):
            out.append(f"{name} is not finite")
        elif value < 0:
            out.append(f"{name} {_fmt(value)} is negative")
    return out


def _compare(name: str, recorded: Any, expected: float | None, how: str, floor: float = 0.0) -> str | None:
    """``name X != how Y`` when ``recorded`` is over :data:`CHECK_TOLERANCE` x max(|expected|,
    ``floor``) from ``expected``; None when it agrees or either is missing or not finite."""
    got = as_number(recorded)
    if got is None or expected is None or not math.isfinite(got) or not math.isfinite(expected):
        return None
    if abs(got - expected) <= CHECK_TOLERANCE * max(abs(expected), floor) + 1e-12:
        return None
    return f"{name} {_fmt(got)} != {how} {_fmt(expected)}"


def _step_stats(metrics: dict[str, Any]) -> list[str | None]:
    """``iteration_time_s``'s summary against its ``values`` (as ``flopsweep.metrics._summary``)."""
    it = _get(metrics, "iteration_time_s")
    values = [as_number(v) for v in _get(it, "values") or []] if isinstance(it, dict) else []
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return []
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else None  # one value: no spread, null
    expected = {
        "mean": (mean, 0.0),
        "median": (statistics.median(values), 0.0),
        "min": (min(values), 0.0),
        "max": (max(values), 0.0),
        "std": (std, mean),  # steady steps have a std near 0: compare on the mean's scale
        "cv": (std / mean if std is not None and mean > 0 else None, 1.0),
    }
    return [
        _compare(f"iteration_time_s.{key}", it.get(key), value, f"the {key} of its values", floor)
        for key, (value, floor) in expected.items()
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b and math.isfinite(a) and math.isfinite(b) else None


def _data_parallel(record: Record, world: float | None) -> float | None:
    """The data-parallel degree, ``dp_replicate x dp_shard`` of ``system.parallel`` (tensor and
    pipeline parallel ranks share a batch); the world size for a record without it (older records
    were pure data parallel)."""
    degrees = _get(record, "system", "parallel")
    if isinstance(degrees, dict):
        replicate, shard = as_number(degrees.get("dp_replicate")), as_number(degrees.get("dp_shard"))
        if replicate and shard and replicate > 0 and shard > 0:
            return replicate * shard
    return world


def _rates(record: Record) -> list[str | None]:
    m, cfg = record.get("metrics") or {}, record.get("config") or {}
    mean = as_number(_get(m, "iteration_time_s", "mean"))
    mean = mean if mean and mean > 0 else None
    world = as_number(_get(record, "system", "world_size"))
    world = world if world and world > 0 else None
    dp = _data_parallel(record, world)
    tokens, batch = as_number(m.get("tokens_per_step")), as_number(m.get("global_batch_size"))
    mbs, accum = (
        as_number(_get(cfg, "batch", "micro_batch_size")),
        as_number(_get(cfg, "batch", "grad_accum")),
    )
    seq = as_number(_get(cfg, "model", "seq_len"))
    rate = as_number(m.get("tokens_per_s"))
    hw = _ratio(
        as_number(m.get("hardware_flops_per_iteration")), mean * world * 1e12 if mean and world else None
    )
    return [
        _compare(
            "global_batch_size",
            batch,
            mbs * accum * dp if mbs and accum and dp else None,
            "micro batch x grad accum x data-parallel degree",
        ),
        _compare("tokens_per_step", tokens, batch * seq if batch and seq else None, "global batch x seq_len"),
        _compare("tokens_per_s", rate, _ratio(tokens, mean), "tokens_per_step / mean step"),
        _compare(
            "tokens_per_s_per_device",
            m.get("tokens_per_s_per_device"),
            _ratio(rate, world),
            "tokens_per_s / world size",
        ),
        _compare(
            "hardware_tflops_per_device",
            m.get("hardware_tflops_per_device"),
            hw,
            "hardware FLOPs / (mean step x world size)",
        ),
    ]


_FRACTIONS = (  # ratio key, numerator key, denominator key
    ("mfu", "model_tflops_per_device", "peak_tflops"),
    ("hfu", "hardware_tflops_per_device", "peak_tflops"),
    ("mfu_fp8", "model_tflops_per_device", "peak_tflops_fp8"),
    ("matmul_fraction", "model_tflops_per_device", "measured_matmul_tflops"),
)


def _fractions(metrics: dict[str, Any]) -> list[str | None]:
    out: list[str | None] = []
    for key, top, bottom in _FRACTIONS:
        value, denominator = as_number(metrics.get(key)), as_number(metrics.get(bottom))
        if value is not None and not denominator:
            out.append(f"{key} {_fmt(value)} without {bottom}")
            continue
        out.append(
            _compare(key, value, _ratio(as_number(metrics.get(top)), denominator), f"{top} / {bottom}")
        )
    return out


def _energy(record: Record) -> list[str | None]:
    """Energy per token, power per GPU, dollars and the budget against their raw fields, with the
    formulas of :mod:`flopsweep.cost`."""
    m, cfg = record.get("metrics") or {}, record.get("config") or {}
    values = [as_number(v) for v in _get(m, "iteration_time_s", "values") or []]
    window = sum(values) if values and None not in values else None
    world = as_number(_get(record, "system", "world_size"))
    energy, tokens, rate = (
        as_number(m.get("energy_j")),
        as_number(m.get("tokens_per_step")),
        as_number(m.get("tokens_per_s")),
    )
    out = [
        _compare(
            "joules_per_token",
            m.get("joules_per_token"),
            _ratio(energy, tokens * len(values) if tokens else None),
            "energy_j / tokens measured",
        ),
        _compare(
            "power_w_mean",
            m.get("power_w_mean"),
            _ratio(energy, window * world if window and world else None),
            "energy_j / (measured seconds x world size)",
        ),
    ]
    if not (rate and rate > 0 and world and world > 0):
        return out
    price = as_number(_get(cfg, "cost", "usd_per_gpu_hour"))
    usd = usd_per_million_tokens(price, world=int(world), tokens_per_s=rate)
    out.append(
        _compare("usd_per_million_tokens", m.get("usd_per_million_tokens"), usd, "cost.usd_per_gpu_hour")
    )
    spent = m.get("budget")
    expected = budget(
        as_number(_get(cfg, "budget", "tokens")),
        tokens_per_s=rate,
        world=int(world),
        joules_per_token=as_number(m.get("joules_per_token")),
        usd_per_gpu_hour=price,
    )
    if isinstance(spent, dict) and expected:
        out += [
            _compare(f"budget.{k}", spent.get(k), v, f"budget.tokens at {k}") for k, v in expected.items()
        ]
    return out


def _whole(value: Any) -> int | None:
    """A positive whole number (``8`` or ``8.0``), else None."""
    number = as_number(value)
    if number is None or not math.isfinite(number) or number <= 0 or not number.is_integer():
        return None
    return int(number)


def _layout(record: Record) -> list[str | None]:
    """``system.world_size`` a positive whole number, equal to ``nproc_per_node`` x ``config.nnodes``
    and to the product of the mesh degrees of ``system.parallel`` (a degree a record predates reads
    as 1), each of them a positive whole number."""
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    raw = system.get("world_size")
    world = _whole(raw)
    out: list[str | None] = []
    if raw is not None and world is None:
        return [f"system.world_size {str(raw)[:40]} is not a positive whole number"]
    nproc, nodes = _whole(system.get("nproc_per_node")), _whole(_get(record, "config", "nnodes"))
    if world and nproc and nodes and nproc * nodes != world:
        out.append(f"system.world_size {world} != nproc_per_node {nproc} x nnodes {nodes}")
    degrees = system.get("parallel")
    if not isinstance(degrees, dict):
        return out
    bad = [k for k in (*MESH_DEGREES, "ep") if degrees.get(k) is not None and _whole(degrees[k]) is None]
    if bad:
        phrase = "system.parallel.{} {} is not a positive whole number"
        return out + [phrase.format(k, str(degrees[k])[:40]) for k in bad]
    product = math.prod(_whole(degrees.get(k)) or 1 for k in MESH_DEGREES)
    if world and product != world:
        names = " x ".join(MESH_DEGREES)
        out.append(f"system.parallel {names} = {product} != system.world_size {world}")
    return out


def _when(run: Any, key: str) -> datetime.datetime | None:
    text = _get(run, key)
    try:
        stamp = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return stamp if stamp is None or stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def _step_bounds(record: Record) -> list[str | None]:
    """Step times within [:data:`MIN_STEP_S`, :data:`MAX_STEP_S`], the measured steps within the
    run's wall time, and as many of them as ``config.steps.measure`` asked for."""
    it = _get(record, "metrics", "iteration_time_s")
    if not isinstance(it, dict):
        return []
    raw = it.get("values")
    values = [as_number(v) for v in raw] if isinstance(raw, list) else []
    named = [(f"iteration_time_s.{k}", as_number(it.get(k))) for k in ("mean", "median", "min", "max")]
    named += [(f"iteration_time_s.values[{i}]", v) for i, v in enumerate(values)]
    out: list[str | None] = []
    for name, value in named:
        if value is None or not math.isfinite(value) or value < 0:
            continue  # missing, or named by _bad_numbers
        if value < MIN_STEP_S:
            out.append(f"{name} {_fmt(value)} s is under {MIN_STEP_S:.5f} s, faster than a kernel launch")
        elif value > MAX_STEP_S:
            out.append(
                f"{name} {_fmt(value)} s is over a week ({figure(MAX_STEP_S, 6)} s), the longest timeout_s"
            )
        if len(out) >= 3:  # a hostile list of 100,000 steps: three phrases say enough
            break
    measure = _whole(_get(record, "config", "steps", "measure"))
    if isinstance(raw, list) and measure and len(raw) != measure:
        out.append(f"iteration_time_s has {len(raw)} values, config.steps.measure {measure}")
    start, end = _when(record.get("run"), "started_at"), _when(record.get("run"), "finished_at")
    if start and end and values and all(v is not None and math.isfinite(v) for v in values):
        wall, spent = (end - start).total_seconds(), math.fsum(values)
        if spent > wall * (1 + CHECK_TOLERANCE) + 1.0:
            out.append(
                f"the measured steps take {_fmt(spent)} s, more than the run's {_fmt(wall)} s from "
                "run.started_at to run.finished_at"
            )
    return out


_PEAK_FRACTIONS = ("mfu", "hfu", "mfu_fp8")
"""Fractions of the GPU's peak: none can be above 1."""


def _above_peak(metrics: dict[str, Any]) -> list[str | None]:
    out: list[str | None] = []
    for key in _PEAK_FRACTIONS:
        value = as_number(metrics.get(key))
        if value is not None and math.isfinite(value) and value > 1 + CHECK_TOLERANCE:
            out.append(f"{key} {_fmt(value)} is above 1: no run beats its GPU's peak")
    return out


def _timestamps(run: Any) -> str | None:
    start, end = _when(run, "started_at"), _when(run, "finished_at")
    if start and end and end < start:
        return f"run.finished_at {run['finished_at']} is before run.started_at {run['started_at']}"
    return None


CONFIG_GROUPS = tuple(
    f.name
    for f in dataclasses.fields(RunConfig)
    if f.type.endswith("Config") and f.name != "activation_checkpointing"  # old records: a boolean
)
"""The ``config.<group>`` keys that hold an object in every record (``backend``, ``model``, ``batch``, ...:
the :class:`flopsweep.config.RunConfig` fields that are config groups, less ``activation_checkpointing``,
a boolean in records before its policies)."""


def section_problems(record: Any) -> list[str]:
    """One phrase per section of ``record`` of the wrong JSON type: ``record`` itself, ``config``,
    ``run``, ``system``, ``metrics`` and ``model`` objects, each ``config.<group>`` of
    :data:`CONFIG_GROUPS` an object, ``warnings`` a list of text. A section written as ``null`` is of
    the wrong type like a list or a text (``"config": null``, ``config.backend: null``: no set-up to
    read; no writer of any schema writes one); only an absent one is allowed (an older record lacks
    ``config.cost``, ...), and ``"model": null`` in a record that is not ``ok`` (its figures are blank).
    A record with such a section cannot be read as a run's (``config.backend: ["ddp"]`` has no
    backend name): the analysis skips it as unreadable, resume runs it again, the tuner and
    ``predict.calibration`` never use it. Empty for a record whose sections all are."""
    if not isinstance(record, dict):
        return [f"the record is a JSON {json_type(record)}, not an object"]
    out = []
    for key in ("config", "run", "system", "metrics", "model"):
        # written as null: a wrong type ("config": null has no set-up); absent: an old record's, allowed
        wrong = key in record and (key != "model" or record.get("status") == "ok")  # failed: model null
        if not isinstance(record.get(key), dict) and wrong:
            out.append(f"{key} is a JSON {json_type(record[key])}, not an object")
    config = record.get("config")
    for group in CONFIG_GROUPS if isinstance(config, dict) else ():
        if group in config and not isinstance(config[group], dict):  # older records lack some groups
            out.append(f"config.{group} is a JSON {json_type(config[group])}, not an object")
    warnings = record.get("warnings")
    if warnings is not None and not (
        isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)
    ):
        out.append(f"warnings is a JSON {json_type(warnings)}, not a list of text")
    return out


def record_problems(record: Record) -> list[str]:
    """Every way an ``ok`` record's figures disagree with its raw fields or cannot be real (module
    doc), one short phrase each; empty for a record that passes, or one that is not ``ok`` (its
    metrics are blank in the analysis)."""
    if not isinstance(record, dict) or record.get("status") != "ok":
        return []
    if sections := section_problems(record):  # the checks below read these sections
        return sections
    metrics = record.get("metrics")
    if not isinstance(metrics, dict):
        return []
    found: list[str | None] = [*type_problems(record)]
    found += _bad_numbers(metrics) + _step_stats(metrics) + _rates(record) + _fractions(metrics)
    found += _layout(record) + _step_bounds(record) + _above_peak(metrics) + _energy(record)
    found.append(_timestamps(record.get("run")))
    return [p for p in found if p]


def scaling_problem(efficiency: Any, device_name: Any = None) -> str | None:
    """The phrase naming a GPU run's ``scaling_efficiency`` above :data:`MAX_SCALING_EFFICIENCY` (a
    row's ``implausible``), None for a plausible, blank or non-numeric one, and for a CPU run
    (``device_name`` ``cpu``: its ranks share the cores with whatever else the machine runs, so a
    one-rank baseline can be several times slower; measured 6.5 on a loaded 2-core machine)."""
    value = as_number(efficiency)
    if value is None or not value > MAX_SCALING_EFFICIENCY or device_name == "cpu":  # NaN: no baseline
        return None
    return (
        f"scaling_efficiency {_fmt(value)} above {MAX_SCALING_EFFICIENCY}: a device cannot be that much "
        "faster with more ranks (check the baseline's record)"
    )


def recompute_tflops(record: Record) -> float | None:
    """Model TFLOPs per device recomputed from the record's stored FLOPs:
    ``metrics.model_flops_per_iteration / (metrics.iteration_time_s.mean x system.world_size x 1e12)``.

    Returns:
        None when a needed value is missing, not positive or not a number.

    Raises:
        RecordError: when the inputs are numbers but the result overflows a float.
    """
    flops = as_number(_get(record, "metrics", "model_flops_per_iteration"))
    t = as_number(_get(record, "metrics", "iteration_time_s", "mean"))
    world = _get(record, "system", "world_size")
    if flops is None or not math.isfinite(flops) or t is None or not math.isfinite(t) or t <= 0:
        return None
    if not isinstance(world, int) or isinstance(world, bool) or world <= 0:
        return None
    try:
        out = flops / (t * world * 1e12)
    except (OverflowError, ZeroDivisionError):
        out = math.inf
    if not math.isfinite(out):
        raise RecordError(
            f"recomputed model TFLOPs overflow: model_flops_per_iteration {figure(flops, 4)} over "
            f"{figure(t, 4)} s x {plural(world, 'device')}"
        )
    return out


def tflops_problem(record: Record) -> str | None:
    """The phrase naming an ok record's ``model_tflops_per_device`` more than
    :data:`MISMATCH_TOLERANCE` from :func:`recompute_tflops` (the analysis' ``tflops?``), or None.

    Raises:
        RecordError: as :func:`recompute_tflops`.
    """
    if record.get("status") != "ok":
        return None
    expected = recompute_tflops(record)
    recorded = as_number(_get(record, "metrics", "model_tflops_per_device"))
    if expected is None or recorded is None or not math.isfinite(recorded):
        return None
    if abs(recorded - expected) <= MISMATCH_TOLERANCE * abs(expected):
        return None
    return (
        f"model_tflops_per_device {_fmt(recorded)} != model_flops_per_iteration / (mean step x world "
        f"size) {_fmt(expected)}"
    )


def usable_problems(record: Any) -> list[str]:
    """Why an ``ok`` record may not be used: the one decision that resume, the tuner and
    ``predict.calibration`` share with the analysis' rankings. :func:`section_problems` (a section of
    the wrong type), :func:`record_problems` and :func:`tflops_problem` (a step time of 0, infinite
    or of 1e300 s, ``"tokens_per_s": "fast"``, degrees that do not multiply to the world size, a
    ``model_tflops_per_device`` its FLOPs and step time disagree with, ...). Empty for a record
    that may be used, or that is not ``ok`` (nothing uses its figures); a record that is not a JSON
    object is its own phrase."""
    if not isinstance(record, dict):
        return section_problems(record)
    if record.get("status") != "ok":
        return []
    if sections := section_problems(record):
        return sections
    found = record_problems(record)
    try:
        if why := tflops_problem(record):
            found.append(why)
    except RecordError as exc:
        found.append(str(exc))
    return found


def calibration_problems(record: Record) -> list[str]:
    """Why an ok record may not calibrate a prediction: :func:`usable_problems` (the same decision
    as resume's, the tuner's and the analysis' rankings')."""
    return usable_problems(record)
