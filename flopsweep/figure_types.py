"""The type and range of every value of an ok record that the analysis reads (:func:`type_problems`).

A record is a file anyone with write access to its folder can edit. A value of the wrong type
(``"tokens_per_s": "fast"``, ``"iteration_time_s": {"mean": [1, 2]}``) used to read as a blank cell
while the row stayed ``ok``, kept its other figures and was ranked, even called a tie with the best.
:func:`flopsweep.plausible.record_problems` now names each such value, so the analysis flags the row
``check?`` (left out of rankings, plots and the verdict) and no prediction calibrates from it
(:func:`flopsweep.plausible.calibration_problems`). What each key must hold, null always allowed
(not measured, or a record from before the key):

- a metric with a unit (:data:`flopsweep.record.METRIC_SPECS`: seconds, tokens/s, TFLOP/s, bytes,
  J, W, USD, ...): a number (not text, a list, an object or a bool), at most :data:`MAX_FIGURE`
  (bytes: :data:`MAX_BYTES`); a ``count`` unit a whole number. Negative and non-finite numbers are
  :func:`flopsweep.plausible.record_problems`' own phrases;
- the unit-less metrics, each as :data:`UNITLESS` says (``global_batch_size`` a whole number >= 1,
  ``loss_finite`` true or false, ``unsteady_steps`` a list of whole numbers, ...);
- the containers the figures sit in (``iteration_time_s``, ``budget``, ``predicted`` objects;
  ``iteration_time_s.values`` a list of numbers) and the fields of ``iteration_time_s`` no spec
  names (``min``, ``max``, ``std``);
- the set-up (:data:`flopsweep.columns.SETUP_SPECS`: ``config.*``, ``model.*``, ``system.*`` paths)
  by each column's kind (:func:`flopsweep.columns.kind`): ``int`` a whole number (at most the config
  key's :data:`flopsweep.limits.MAX_BY_KEY`), ``bool`` true or false, ``float`` a number, ``text``
  text (``system.parallel`` is :func:`flopsweep.plausible`'s ``_layout``'s);
- :data:`OTHER_KEYS`: the run fields, host figures and config keys the checks and columns read
  (``run.wall_s``, ``run.repeat``, ``system.cpu_count``, ``system.loadavg``, ``config.steps.measure``,
  ``config.cost.usd_per_gpu_hour``, ...), and the probes of a model search. ``run.before_run`` (what a
  record that is not ``ok`` knew before its run; an ok record has none) is checked where an ok record
  holds one; in a record that is not ``ok``, which these checks skip, the analysis reads a value of the
  wrong type there as a blank cell (:func:`analysis.load.row`).

Each problem is one phrase naming the key, the value (cut to :data:`SHOWN` characters) and what was
expected: ``metrics.tokens_per_s "fast": expected a number >= 0 (1/s), not text``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from flopsweep.columns import SETUP_SPECS, kind
from flopsweep.config import typed_form
from flopsweep.limits import MAX_BY_KEY
from flopsweep.record import METRIC_SPECS
from flopsweep.text import json_type

__all__ = ["MAX_BYTES", "MAX_FIGURE", "OTHER_KEYS", "UNITLESS", "type_problems"]

MAX_FIGURE = 1e30
"""The largest plausible figure of any unit: the FLOPs of one step of a 10^12-parameter model over
10^8 tokens are 6 x 10^20; 1e300 is an edit, and sums of it overflow to infinity."""

MAX_BYTES = float(2**60)
"""The largest plausible memory figure, bytes (an exbibyte: no machine has one)."""

SHOWN = 40
"""Characters of a wrong value shown in its phrase (a hostile record may hold megabytes)."""

MAX_PROBLEMS = 8
"""Phrases at most, in all: a record of 100,000 bad step values names the first few."""


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a number"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, allow_nan=True, default=str)
    except (ValueError, RecursionError):  # too deep a structure for one line: its type says enough
        text = json_type(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def as_number(value: Any) -> float | None:
    """A number (bools and text are not) as a float, ``inf`` for an int too large for one; else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


Check = Callable[[Any], "str | None"]
"""A value -> None when it is what the key must hold, else what was expected (``a number >= 0``)."""


def number(limit: float = MAX_FIGURE, unit: str = "", *, named: bool = False) -> Check:
    """A finite number >= 0, at most ``limit``. ``named``: a metric figure whose non-finite or negative
    value :func:`flopsweep.plausible.record_problems` names in its own phrase (not twice)."""
    expected = f"a number >= 0{f' ({unit})' if unit else ''}"

    def check(value: Any) -> str | None:
        got = as_number(value)
        if got is None or (not named and not (math.isfinite(got) and got >= 0)):
            return expected
        return f"at most {typed_form(limit)}" if math.isfinite(got) and got > limit else None

    return check


def any_number(value: Any) -> str | None:
    """A number, of any sign, NaN allowed (a loss: ``loss_finite`` says whether it was finite)."""
    return None if as_number(value) is not None else "a number"


def whole(low: int = 0, high: float = MAX_FIGURE) -> Check:
    """A whole number (``8`` or ``8.0``) from ``low`` to ``high``."""
    expected = f"a whole number >= {low}" + (f" and <= {typed_form(high)}" if high < MAX_FIGURE else "")

    def check(value: Any) -> str | None:
        got = as_number(value)
        ok = got is not None and math.isfinite(got) and got.is_integer() and low <= got <= high
        return None if ok else expected

    return check


def flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else "text"


def scalar(value: Any) -> str | None:
    """A set-up name: text, or a number or flag that the config may hold there (``tag=1``)."""
    return None if not isinstance(value, (dict, list)) else "text"


def obj(value: Any) -> str | None:
    return None if isinstance(value, dict) else "an object"


def list_of(item: Check, what: str) -> Check:
    """A list whose every item passes ``item`` (null items are not allowed)."""

    def check(value: Any) -> str | None:
        if not isinstance(value, list) or any(v is None or item(v) for v in value):
            return f"a list of {what}"
        return None

    return check


UNITLESS: dict[str, Check] = {
    "global_batch_size": whole(1),
    "tokens_per_step": whole(1),
    "peak_tflops_source": text,
    "per_rank": list_of(obj, "objects (one per rank)"),
    "loss_first": any_number,
    "loss_last": any_number,
    "loss_finite": flag,
    "warmup_steps": whole(0),
    "unsteady_steps": list_of(whole(0), "whole numbers (step indices)"),
    "recompute": text,
    "fp8_layers": whole(0),
    "flops_convention": text,
    "throttle_reasons": list_of(text, "texts"),
    "energy_reason": text,
    "predicted.source": text,
    "predicted.compute_source": text,
}
"""What each metric of :data:`flopsweep.record.METRIC_SPECS` without a unit must hold, by its dotted
path in ``metrics`` (a test keeps it complete)."""


def _metric_checks() -> list[tuple[tuple[str, ...], Check]]:
    out: list[tuple[tuple[str, ...], Check]] = []
    for spec in METRIC_SPECS:
        path = spec.path or (spec.key,)
        if path[0] == "breakdown":
            continue  # analysis.fields.breakdown_problem's: its columns blanked, flagged breakdown?
        if not spec.unit:
            out.append((("metrics", *path), UNITLESS[".".join(path)]))
        elif spec.unit == "count":
            out.append((("metrics", *path), whole(0)))
        else:
            limit = {"bytes": MAX_BYTES, "GiB": MAX_BYTES / 2**30}.get(spec.unit, MAX_FIGURE)
            unit = spec.unit if spec.unit not in ("1", "tokens") else ""
            out.append((("metrics", *path), number(limit, unit, named=True)))
    out += [(("metrics", "iteration_time_s", key), number(unit="s")) for key in ("min", "max", "std")]
    return out


def _setup_checks() -> list[tuple[tuple[str, ...], Check]]:
    out: list[tuple[tuple[str, ...], Check]] = []
    for spec in SETUP_SPECS:
        keys = tuple(spec.keys)
        if keys[0] not in ("config", "model", "system") or keys[:2] == ("system", "parallel"):
            continue  # the layout: plausible._layout's own phrases
        if keys == ("system", "world_size"):
            continue  # plausible._layout's own phrase
        found = kind(spec)
        if found == "int":
            high = MAX_BY_KEY.get(".".join(keys[1:]), MAX_FIGURE) if keys[0] == "config" else MAX_FIGURE
            out.append((keys, whole(0, high)))
        elif found == "bool":
            out.append((keys, flag))
        elif found == "float":
            out.append((keys, number()))
        elif keys[0] != "model":
            out.append((keys, scalar))
    return out


OTHER_KEYS: dict[tuple[str, ...], Check] = {
    ("metrics", "iteration_time_s"): obj,
    ("metrics", "iteration_time_s", "values"): list_of(any_number, "numbers (the measured step times, s)"),
    ("metrics", "budget"): obj,
    ("metrics", "predicted"): obj,
    ("metrics", "predicted", "layer_probe", "wall_s"): number(unit="s"),
    ("metrics", "predicted", "probe", "wall_s"): number(unit="s"),
    ("run", "wall_s"): number(unit="s"),
    ("run", "repeat"): whole(0),
    ("run", "repeats"): whole(1),
    ("run", "repeat_group"): text,
    ("run", "started_at"): text,
    ("run", "finished_at"): text,
    ("run", "model_search"): obj,
    ("run", "model_search", "probes"): list_of(obj, "objects (one per probe)"),
    ("run", "model_search", "result"): whole(0),
    ("run", "before_run"): obj,
    ("run", "before_run", "predicted_peak_gib"): number(MAX_BYTES / 2**30, "GiB"),
    ("run", "before_run", "predicted"): obj,
    ("system", "nproc_per_node"): whole(1),
    ("system", "cpu_count"): whole(1),
    ("config", "steps", "measure"): whole(1),
    ("config", "cost", "usd_per_gpu_hour"): number(unit="USD"),
    ("config", "budget", "tokens"): number(unit="tokens"),
}
"""The other keys the analysis and the checks read, and what each must hold."""

_PROBE_KEYS: dict[str, Check] = {
    "n_params": whole(0),
    "n_layer": whole(0),
    "seq_len": whole(0),
    "tokens_per_s": number(unit="1/s"),
    "status": text,
}
"""The keys of each probe of ``run.model_search.probes`` the frontier reads."""

CHECKS: list[tuple[tuple[str, ...], Check]] = [*_metric_checks(), *_setup_checks(), *OTHER_KEYS.items()]
"""Every (path, check) :func:`type_problems` applies."""


def _at(tree: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    """``(found, value)`` at ``path``; not found when a level above is missing or not an object (that
    level's own check names it)."""
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return False, None
        tree = tree[key]
    return True, tree


def _loadavg(value: Any) -> str | None:
    """``system.loadavg``: ``{"start": [1m, 5m, 15m], "end": [...]}`` or one list (older records)."""
    numbers = list_of(number(), "numbers")
    if isinstance(value, dict):
        good = all(v is None or not numbers(v) for v in value.values())
        return None if good else "an object of lists of numbers"
    return None if not numbers(value) else "a list of numbers, or {start: [...], end: [...]}"


def _found(record: Any) -> Iterator[tuple[str, Any, str]]:
    for path, check in CHECKS:
        there, value = _at(record, path)
        if there and value is not None and (expected := check(value)):
            yield ".".join(path), value, expected
    there, value = _at(record, ("system", "loadavg"))
    if there and value is not None and (expected := _loadavg(value)):
        yield "system.loadavg", value, expected
    there, probes = _at(record, ("run", "model_search", "probes"))
    for i, probe in enumerate(probes if there and isinstance(probes, list) else []):
        for key, check in _PROBE_KEYS.items():
            value = probe.get(key) if isinstance(probe, dict) else None
            if value is not None and (expected := check(value)):
                yield f"run.model_search.probes[{i}].{key}", value, expected


def type_problems(record: Any) -> list[str]:
    """One phrase per value of ``record`` that is not what its key must hold (module doc), at most
    :data:`MAX_PROBLEMS`: ``metrics.tokens_per_s "fast": expected a number >= 0 (1/s), not text``.
    Empty for a record whose values all are (absent and null ones pass)."""
    out = []
    for name, value, expected in _found(record):
        what = _kind_of(value)
        said = f"expected {expected}" + ("" if expected.startswith((what, "at most")) else f", not {what}")
        out.append(f"{name} {_shown(value)}: {said}")
        if len(out) >= MAX_PROBLEMS:
            break
    return out
