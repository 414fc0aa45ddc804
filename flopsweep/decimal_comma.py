"""A decimal comma in a number key's value (``cost.usd_per_gpu_hour=2,5``, which Hydra reads as a sweep of 2
and 5): the point to write instead, where the key takes it. Torch-free; apart from
:mod:`flopsweep.override_schema` (whose import by :mod:`flopsweep.checks` would close a cycle).
"""

from __future__ import annotations

import re


def decimal_comma(name: str, value: str, overrides: list[str]) -> str | None:
    """``2.5`` for ``cost.usd_per_gpu_hour=2,5`` (two whole numbers on a key that takes a float, the
    second not a power of ten's multiple: ``2,5``, ``0,75``, not ``2,10``), else None: a European price
    had been told only to add ``-m``, a sweep of 2 and 5 dollars; a point the key refuses itself
    (``budget.tokens=1,5``: no whole number) is none (:func:`flopsweep.checks.number_problem`). Read by
    :func:`flopsweep.override_multirun.sweep_without_m_problem`."""
    from omegaconf.nodes import FloatNode

    from flopsweep.checks import number_problem
    from flopsweep.override_schema import schema_node

    m = re.fullmatch(r"(\d+),(\d+)", value)
    if not m or m.group(2).endswith("0"):
        return None
    found, point = schema_node(name, overrides), f"{m.group(1)}.{m.group(2)}"
    if found is None or not isinstance(found[0], FloatNode) or number_problem(name, float(point)):
        return None  # budget.tokens=1,5: 1.5 is no whole number of tokens, so no fix of its own
    return point


ONE_VALUE_KEYS: dict[str, str] = {
    "cost.usd_per_gpu_hour": "a price (US dollars per GPU-hour)",
    "budget.tokens": "a budget (tokens to train)",
    "predict.intra_node_gbps": "a bandwidth (GB/s)",
    "predict.inter_node_gbps": "a bandwidth (GB/s)",
}
"""The number keys where ``A,B`` of two whole numbers reads as a decimal comma, never a sweep
(:func:`decimal_comma_problem`): each is a quantity of the world the run is priced or predicted in, not a
set-up (a sweep of 2 and 50 dollars re-measures one set-up to price it twice). A key where a comma sweep
is a set-up each (``batch.micro_batch_size=2,4``, ``optim.lr``, ``search.memory_budget_gib``) keeps it."""


_TWO_WHOLE = re.compile(r"(\d+),(\d+)((?:[eE][+-]?\d+)?)", re.ASCII)
"""``2,50``, ``0,75``, ``1,5e12``: two whole numbers, the second with an exponent at most."""


def _unquoted(value: str) -> str:
    """``value`` less its spaces and one pair of quotes around it (``'2,50'`` -> ``2,50``)."""
    value = value.strip()
    return value[1:-1].strip() if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value


def comma_point(key: str, value: str) -> str | None:
    """``2.50`` for ``cost.usd_per_gpu_hour``'s ``2,50`` (a key of :data:`ONE_VALUE_KEYS`, a value of two
    whole numbers, ``1,5e12`` -> ``1.5e12``), else None; None too where the key refuses the point itself
    (``budget.tokens=1,5``: no whole number of tokens, :func:`flopsweep.checks.number_problem`)."""
    from flopsweep.checks import number_problem

    m = _TWO_WHOLE.fullmatch(_unquoted(value))
    if key.lstrip("+") not in ONE_VALUE_KEYS or not m:
        return None
    point = f"{m.group(1)}.{m.group(2)}{m.group(3)}"
    return None if number_problem(key.lstrip("+"), float(point)) else point


def decimal_comma_problem(overrides: list[str]) -> str | None:
    """One line for a key of :data:`ONE_VALUE_KEYS` given two whole numbers (``cost.usd_per_gpu_hour=2,50``),
    with ``-m`` or not, else None: Hydra reads a sweep of 2 and 50 dollars, where the user wrote 2.50 (a
    plan sweep priced each set-up twice; ``plan_clusters=[H100:8@2,50]`` was refused so since session 35).
    ``Invalid config: cost.usd_per_gpu_hour=2,50: 2,50 looks like a decimal comma (Hydra reads a sweep of
    2 and 50; ...). Fix: cost.usd_per_gpu_hour=2.50.``; a sweep of both is written ``choice(2,50)``. A
    quoted one (``'2,50'``, a sweep file's plain ``usd_per_gpu_hour: 2,50``) is a string, not a number:
    the same fix. Read for the command line (``run.refusal``), a sweep file's ``hydra.sweeper.params``
    (:func:`flopsweep.conf_files.sweep_file_problem`) and its plain values (``run.FILE_VALUE_CHECKS``)."""
    from flopsweep.config import invalid_line

    for override in overrides:
        key, eq, value = override.partition("=")
        if not eq or key.startswith(("-", "~")) or (point := comma_point(key, value)) is None:
            continue
        typed = _unquoted(value)
        first, _, second = typed.partition(",")
        name = key.lstrip("+")
        why = (
            f"{typed} looks like a decimal comma (Hydra reads a sweep of {first} and {second}; "
            f"{name} is {ONE_VALUE_KEYS[name]}, one value; a sweep of both is choice({first},{second}))"
            if typed == value.strip()
            else f"{typed} looks like a decimal comma ({name} is {ONE_VALUE_KEYS[name]}, with a point)"
        )
        return invalid_line(override, why, f"{name}={point}.")
    return None
