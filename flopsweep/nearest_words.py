"""What a nearest compute's ``source`` says that a plan reads back (:mod:`flopsweep.nearest`, whose names
these stay: ``nearest.scaled_from``, ``nearest.unmeasured_degrees``): the GPU kind it was scaled from and
the layout degrees no record of it measured. Torch-free."""

from __future__ import annotations

import re

SCALED = "scaled by the datasheet"
"""What a nearest compute's source says after ``measured on GPU, `` where the set-up was measured on
another GPU kind and carried over by the datasheet peak ratio (:func:`scaled_from` reads it)."""
_SCALED_FROM = re.compile(rf"measured on (?P<gpu>[^;,]+), {SCALED} ")


_DEGREE_DIFFERS = re.compile(r"\bparallel\.(?P<degree>tp|pp|cp|ep) (?P<mine>\d+) vs 1\b")


def unmeasured_degrees(source: str) -> list[str]:
    """The layout degrees (``parallel.tp``, ``pp``, ``cp``, ``ep``) a nearest compute's target runs above 1
    where its nearest record ran them at 1, read from the ``source``'s differences (:func:`differences`:
    ``parallel.cp 8 vs 1``), in that order; empty where none. What such a degree costs beyond its modelled
    traffic no record of that prediction measured: its expected error is unmeasured
    (:data:`flopsweep.plan_assess.UNMEASURED_DEGREE`)."""
    return [f"parallel.{m['degree']}" for m in _DEGREE_DIFFERS.finditer(source or "") if int(m["mine"]) > 1]


def scaled_from(source: str) -> str | None:
    """The GPU kind a nearest compute's ``source`` was measured on where it is not the target's (its
    step scaled by the datasheet peak ratio, :func:`flopsweep.nearest._compute`); None where it was the
    same kind. A prediction carried across GPU kinds has the error measured for that pair of kinds, if any
    (:data:`flopsweep.plan_assess.ACROSS_KINDS_ERROR`, docs/plan.md)."""
    match = _SCALED_FROM.search(source or "")
    return match.group("gpu") if match else None
