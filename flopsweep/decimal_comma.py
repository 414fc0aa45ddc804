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
    :func:`flopsweep.override_grammar.sweep_without_m_problem`."""
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
