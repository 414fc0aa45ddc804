"""Strict JSON for what the analysis and the tuner write (``flopsweep-analysis --format json``,
``tune.json``): a number JSON cannot hold is ``null``, and the object that held it says why.

JSON (RFC 8259, section 6) has no ``Infinity`` or ``NaN``; Python's ``json.dumps`` writes them unless
``allow_nan=False``, and a reader in another language (``jq``, a browser's ``JSON.parse``) refuses the
file. So every writer here goes through :func:`dumps`, which never writes them: each non-finite float
(``inf``, ``-inf``, ``nan``) becomes ``null``, and the object it sat in gains the key :data:`NULLS_KEY`
mapping its key to why (:func:`why`), e.g. a prediction that came out inf::

    {"predicted": null, "nulls": {"predicted": "inf: not a finite number (JSON has none)"}}

An interval end at ``inf`` (a ``--baseline`` speedup's before session 34,
:func:`analysis.significance.speedup_interval`; a rate's before session 33,
:func:`analysis.spread.rate_ends`) is named :data:`UNBOUNDED`.

A ``null`` without a :data:`NULLS_KEY` entry is no value (not measured, a blank cell, no interval). In a
list, the entry is named by its index (``"values[2]"``) in the object that holds the list. Torch-free.
"""

from __future__ import annotations

import json
import math
from typing import Any

NULLS_KEY = "nulls"
"""The key an object gains, where a non-finite number of it was written null: ``{key: why}``."""
UNBOUNDED = "inf: no upper bound (the step's 95% interval reaches 0 s)"
"""Why an interval's high end (a key ending ``ci_high``) is null: the rate's interval has no upper bound."""


def why(key: str, value: float) -> str:
    """Why ``value`` (inf, -inf or nan) under ``key`` is written null: :data:`UNBOUNDED` for an
    interval's high end (``..._ci_high``, ``ci_high``) at ``inf``, else the value and that JSON has no
    such number."""
    if value == math.inf and key.endswith("ci_high"):
        return UNBOUNDED
    name = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{name}: not a finite number (JSON has none)"


def nulled(value: Any) -> Any:
    """``value`` (dicts, lists, tuples, scalars) with every non-finite float ``null`` and each object
    that held one, directly or in a list it holds, given :data:`NULLS_KEY` (merged with one it has).
    A non-finite float at the top, or in a list at the top, has no object to say why: it is null."""
    return _nulled(value, None)


def _nulled(value: Any, said: dict[str, str] | None, key: str = "") -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        if said is not None:
            said[key] = why(key, value)
        return None
    if isinstance(value, dict):
        own: dict[str, str] = {}
        out = {k: _nulled(v, own, str(k)) for k, v in value.items()}
        if own:
            before = out.get(NULLS_KEY)
            out[NULLS_KEY] = {**before, **own} if isinstance(before, dict) else own
        return out
    if isinstance(value, (list, tuple)):
        return [_nulled(v, said, f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`nulled` ``value``, with ``allow_nan=False`` (``kwargs``: ``indent``,
    ``default``, ...): never ``Infinity`` or ``NaN``.

    Raises:
        ValueError: never for a float; ``TypeError`` for a value JSON cannot hold without ``default``.
    """
    return json.dumps(nulled(value), allow_nan=False, **kwargs)
