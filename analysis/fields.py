"""The cells of one record's row that take more than a lookup: the recomputed TFLOPs and their
check, the profiler breakdown's checks, the model search's probes, the memory and step-time
prediction errors, the noise flags, the load averages, the parallel layout, and the knobs an
option does not use (blanked).

Each function reads one record (:data:`analysis.schema.Record`, current version) or the row being
built (``out``) and never fails on a damaged record: a value that cannot be read is blank (None),
and a check that fails is logged once with the record's path.
"""

from __future__ import annotations

import datetime
import logging
import math
from typing import Any

from analysis.catalogue import BREAKDOWN_COLUMNS
from analysis.schema import Record
from analysis.schema import finite as _number
from flopsweep.columns import SETUP_SPECS, only_for
from flopsweep.config import ConfigError
from flopsweep.layout import COLUMN_DEGREES, MESH_DEGREES, Layout
from flopsweep.noise import noisy, overloaded
from flopsweep.plausible import MISMATCH_TOLERANCE, recompute_tflops, record_problems  # noqa: F401 - re-exported
from flopsweep.record import value_at
from flopsweep.text import figure, format_count, json_type

log = logging.getLogger("analysis")


def cell_value(value: Any) -> Any:
    """A record's value as a cell can hold it: None, str, bool, int and float as they are, a list of
    numbers and strings (``unsteady_steps``) as a list, any other structure as the placeholder
    ``<JSON object>`` or ``<JSON array>`` (never a deep nest)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value):
        return value
    return f"<JSON {'object' if isinstance(value, dict) else 'array'}>"


def int_or_none(value: Any) -> int | None:
    """A whole number that fits a pandas ``Int64`` column (``8`` or ``8.0``: ``8``; magnitude below
    2**63), else None (a bool, a fraction, NaN, inf, a string)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    return None


def cell_text(value: Any) -> str | None:
    """A text cell: None and strings as they are, anything else as ``str`` of :func:`cell_value`
    (``8`` -> ``"8"``, a dict -> ``"<JSON object>"``)."""
    if value is None or isinstance(value, str):
        return value
    return str(cell_value(value))


def _differs(recorded: Any, expected: float | None) -> bool:
    recorded = _number(recorded)
    if recorded is None or expected is None:
        return False
    return abs(recorded - expected) > MISMATCH_TOLERANCE * abs(expected)


def _fmt(value: Any) -> str:
    number = _number(value)
    return "null" if number is None else f"{figure(number, 4)}"


def check_tflops(record: Record, out: dict[str, Any], path: str) -> None:
    """Set ``model_tflops_per_device_recomputed`` (TFLOPs per device from the record's stored FLOPs,
    mean iteration time and world size: :func:`flopsweep.plausible.recompute_tflops`; None unless
    ``out["status"]`` is ``ok``) and ``tflops_mismatch`` (the recorded figure is more than
    :data:`MISMATCH_TOLERANCE` apart from it, relative); warn once naming ``path`` on a mismatch (the
    row is left out of rankings). ``out`` must hold ``status`` and ``model_tflops_per_device``."""
    expected = recompute_tflops(record) if out["status"] == "ok" else None
    out["model_tflops_per_device_recomputed"] = expected
    bad = _differs(out["model_tflops_per_device"], expected)
    out["tflops_mismatch"] = bad
    if bad:
        log.warning(
            "TFLOPs mismatch in %s: the record says %s model TFLOPs per device; its "
            "model_flops_per_iteration, mean iteration time and world size give %s, more than %.0f%% "
            "apart (left out of rankings)",
            path,
            _fmt(out["model_tflops_per_device"]),
            figure(expected, 4),
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
        return f"is a JSON {json_type(value)}, not an object"
    numbers = {k: _number(value.get(k)) for k in ("step_s", *BREAKDOWN_PARTS)}
    bad = [k for k, v in numbers.items() if v is None or v < 0]
    if bad:
        return f"{', '.join(bad)} missing, not a number or negative"
    total, step = sum(numbers[k] for k in BREAKDOWN_PARTS), numbers["step_s"]
    if step <= 0 or abs(total - step) > BREAKDOWN_TOLERANCE * step:
        return f"its parts sum to {figure(total, 4)} s, not its step_s {figure(step, 4)} s"
    return None


def check_breakdown(record: Record, out: dict[str, Any], path: str) -> None:
    """Blank the breakdown columns (:data:`analysis.catalogue.BREAKDOWN_COLUMNS`) of ``out`` when the
    record's ``metrics.breakdown`` fails :func:`breakdown_problem`, and say so in ``out["warnings"]``
    and the log (naming ``path``): never shown as if it were measured. A CUDA breakdown without
    ``optimizer_from`` keeps all but its compute/optimizer split."""
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


def search_probes(record: Record) -> list[list[float]] | None:
    """``[[n_params, tokens_per_s], ...]`` of the ok probes of the record's model search (those with
    finite, positive figures), None without a search (:data:`SEARCH_COLUMNS`)."""
    probes = value_at(record, ("run", "model_search", "probes"))
    if not isinstance(probes, list):
        return None
    points = []
    for p in probes:
        if isinstance(p, dict) and p.get("status") == "ok":
            n, rate = _number(p.get("n_params")), _number(p.get("tokens_per_s"))
            if n is not None and rate is not None and n > 0 and rate > 0:
                points.append([float(n), float(rate)])
    return points or None


LIMIT_KEYS = {"n_layer": "search.max_n_layer", "seq_len": "search.max_seq_len"}
"""The key that bounds a search of each axis (``flopsweep.modelsearch``'s ``limit_key``, which the
analysis does not import)."""


def _at_limit(search: dict, key: str, found: float | None) -> str | None:
    """``none: search.max_n_layer=8 reached`` (raise it to search further) when the
    size a search found is its ``limit``: no larger size was tried, so memory did not bound it; else None."""
    limit = _number(search.get("limit"))
    if found is None or limit is None or found != limit:
        return None
    return f"none: {LIMIT_KEYS[key]}={int(found)} reached"


def search_failed(record: Record) -> str | None:
    """``n_layer=37 (9.12B): oom`` (``seq_len=65536: oom`` for ``search.grow=seq_len``): the smallest
    probe of the record's model search above the size it found that did not train (what bounds the
    frontier); when none failed and the size found is the search's ``limit``, that limit
    (:func:`_at_limit`: ``none: search.max_n_layer=8 reached ...``: memory did not bound it); None
    without either (:data:`SEARCH_COLUMNS`)."""
    search = value_at(record, ("run", "model_search"))
    if not isinstance(search, dict) or not isinstance(search.get("probes"), list):
        return None
    found = _number(search.get("result"))
    key = "seq_len" if search.get("grow") == "seq_len" else "n_layer"
    failed = [
        p
        for p in search["probes"]
        if isinstance(p, dict)
        and p.get("status") != "ok"
        and _number(p.get(key)) is not None
        and (found is None or _number(p.get(key)) > found)
    ]
    if not failed:
        return _at_limit(search, key, found)
    first = min(failed, key=lambda p: _number(p.get(key)))
    n = _number(first.get("n_params"))
    size = f" ({format_count(n)})" if n and key == "n_layer" else ""
    return f"{key}={int(_number(first[key]))}{size}: {first.get('status')}"


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


def probe_share(record: Record) -> float | None:
    """The share of the job's wall time its step-time probes took: ``metrics.probe_share``, or for a
    record from before that key, the probes' ``wall_s`` (``metrics.predicted.layer_probe`` and
    ``.probe``) over ``run.finished_at - run.started_at`` (whole seconds: rough for short jobs); None
    when no probe ran or the times are missing."""
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    if (kept := _number(metrics.get("probe_share"))) is not None:
        return kept
    predicted = metrics.get("predicted") if isinstance(metrics.get("predicted"), dict) else {}
    walls = [
        _number(probe.get("wall_s"))
        for probe in (predicted.get("layer_probe"), predicted.get("probe"))
        if isinstance(probe, dict)
    ]
    walls = [w for w in walls if w is not None]
    run = record.get("run") if isinstance(record.get("run"), dict) else {}
    start, end = _stamp(run.get("started_at")), _stamp(run.get("finished_at"))
    if not walls or start is None or end is None or not (end - start).total_seconds() > 0:
        return None
    return sum(walls) / (end - start).total_seconds()


def _stamp(text: Any) -> datetime.datetime | None:
    try:
        stamp = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return stamp if stamp is None or stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def check_figures(record: Record, out: dict[str, Any], path: str) -> None:
    """Set ``implausible``: what of an ok record fails :func:`flopsweep.plausible.record_problems`
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
    cores = value_at(record, ("system", "cpu_count"))
    ranks = value_at(record, ("system", "nproc_per_node"))
    if overloaded(out.get("loadavg_1m_start"), out.get("loadavg_1m_end"), cores, ranks):
        flags.append("load")
    return ",".join(flags) or None


def loadavg_1m(value: Any) -> tuple[Any, Any]:
    """(start, end) 1-minute load averages of ``system.loadavg``: ``{"start": [1m, 5m, 15m], "end":
    [...]}``, or one list taken at the end (older records: start None); None for a part that is
    missing or not a non-empty list. The values are passed on unchecked."""

    def first(v: Any) -> Any:
        return v[0] if isinstance(v, list) and v else None

    if isinstance(value, dict):
        return first(value.get("start")), first(value.get("end"))
    return None, first(value)


_ONLY_FOR = {spec.name: where for spec in SETUP_SPECS if (where := only_for(spec))}
"""column -> (option column, options): blank in other rows, where the knob does nothing (v1 records
carry every key), from the option schemas (:func:`flopsweep.columns.only_for`)."""


def blank_unused(out: dict[str, Any]) -> None:
    """Blank (None) the columns of ``out`` for knobs of a backend or attention the run did not use
    (v1 records carry every key; which option owns a knob: :func:`flopsweep.columns.only_for`), and an
    empty ``tag``."""
    for column, (setup, options) in _ONLY_FOR.items():
        if out.get(setup) not in options:
            out[column] = None
    if out.get("tag") == "":
        out["tag"] = None


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
        return {**dict.fromkeys(_DEGREES, 1), "dp_shard": world}
    return None


_DEGREES = MESH_DEGREES  # ep (not a world-size factor) reads as 1 where a record predates it


def layout_columns(out: dict[str, Any], record: Record) -> None:
    """``dp`` (replicate x shard), the degrees ``dp_replicate``, ``dp_shard``, ``tp``, ``pp`` and
    the ``layout`` label (:meth:`flopsweep.layout.Layout.label`, the pipeline schedule from
    ``config.parallel.pp_schedule``) from :func:`parallel_degrees`; blank when it has none."""
    degrees = parallel_degrees(record)
    try:
        layout = Layout(**degrees) if degrees else None
    except ConfigError:  # a degree below 1: no layout to name
        layout = None
    out["dp"] = layout.dp if layout else None
    for name in COLUMN_DEGREES:
        out[name] = getattr(layout, name) if layout else None
    schedule = value_at(record, ("config", "parallel", "pp_schedule"))
    out["layout"] = layout.label(schedule if isinstance(schedule, str) else None) if layout else None
