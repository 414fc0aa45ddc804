"""Which Hydra overrides make a job what it is, and when two lists of them are the same.

Torch-free and free of the job: ``resume=true`` (:func:`flopsweep.job.resume.other_run_problem`)
and the sweep callback (:func:`flopsweep.callbacks.other_sweep_problem`) compare overrides with it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flopsweep.config import RUN_CONTROL_KEYS


def defining_overrides(overrides: list[str]) -> list[str]:
    """The overrides that decide what a job measures, sorted: without those of
    :data:`~flopsweep.config.RUN_CONTROL_KEYS` (``resume``, ``fault``, ``timeout_s``...) and ``hydra.*``."""
    kept = []
    for line in overrides:
        key = str(line).split("=", 1)[0].lstrip("+~")
        if key.split(".")[0] not in RUN_CONTROL_KEYS and not key.startswith("hydra."):
            kept.append(str(line))
    return sorted(kept)


def same_overrides(theirs: list[str], ours: list[str]) -> bool:
    """Whether two lists of overrides set the same keys to the same values, in any order: equal as
    text, or equal as parsed by Hydra's override grammar (``optim.lr=0.035``, ``optim.lr=0.0350`` and
    ``optim.lr=3.5e-2`` are one float; ``true`` and ``True`` one bool). A key keeps its prefix and
    package (``+a``, ``++a``, ``~a``, ``a@pkg`` are different keys); values compare with their type
    (``1``, ``1.0``, ``true`` and ``'1'`` differ), a list in order, a dict in any key order, a sweep
    by what it sweeps (``a=1,2`` is ``a=choice(1,2)``). When either list does not parse, only the
    text comparison counts. Order never counts, as in :func:`defining_overrides` (which sorts), also
    between two overrides of one key, of which Hydra applies the last."""
    if sorted(map(str, theirs)) == sorted(map(str, ours)):
        return True
    parsed = [_parsed_overrides(theirs), _parsed_overrides(ours)]
    return None not in parsed and parsed[0] == parsed[1]


def _parsed_overrides(overrides: list[str]) -> list[tuple[str, Any]] | None:
    """``(key element, canonical value)`` of each override, sorted (see :func:`same_overrides`);
    None when Hydra's grammar refuses one of them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    except (HydraException, ValueError, TypeError):
        return None
    pairs = [(o.get_key_element(), _canonical_value(o.value())) for o in parsed]
    return sorted(pairs, key=repr)


def _canonical_value(value: Any) -> Any:
    """A parsed override value as a comparable, hashable tree tagged with its type: a float by its
    shortest ``repr`` (so ``nan`` equals ``nan``; ``True == 1`` and ``1 == 1.0`` in Python, not here)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical_value(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(map(repr, value))))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _canonical_value(v)) for k, v in value.items())))
    if dataclasses.is_dataclass(value):  # a sweep: ChoiceSweep, RangeSweep, IntervalSweep, Glob
        fields = [f.name for f in dataclasses.fields(value) if f.name != "simple_form"]  # a,b is choice(a,b)
        return (type(value).__name__, tuple((f, _canonical_value(getattr(value, f))) for f in fields))
    return (type(value).__name__, repr(value))
