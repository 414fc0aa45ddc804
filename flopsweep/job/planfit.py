"""The plan's terminal tables within :data:`WIDTH` characters: the one place that says how wide a plan
table may be, and which columns a single plan's table (:func:`flopsweep.job.plantable.plan_table`) hides
to fit, naming them; the table over clusters hides its own
(:data:`flopsweep.job.planrender.HIDDEN_FIRST`). Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WIDTH = 160
"""The widest terminal table of a plan, in characters (the analysis' default is 120, ``--width``)."""

HIDDEN_FIRST = ("fits", "GPU_h", "step_s", "rank", "MFU", "pred_world")
"""The columns :func:`fitted_markdown` hides, in this order, until a single plan's table fits
:data:`WIDTH` (with ``cost.usd_per_gpu_hour`` and ``budget.tokens`` it was 177 wide): each said again in
another (``fits`` in ``status``, ``GPU_h`` in ``days``, ``step_s`` in ``tokens/s/GPU``) or least read;
never a column of what the job is (``model``, ``overrides``, ``world``, ``layout``), which tells rows
apart."""


def fitted_markdown(frame: Any, headers: Mapping[str, str]) -> list[str]:
    """``frame`` (a pandas frame of text cells, named by ``plan.csv`` columns) as a markdown table under
    ``headers``' names, within :data:`WIDTH` characters where hiding :data:`HIDDEN_FIRST` makes it fit,
    then, where it hid some, the line naming them: ``[table]`` or ``[table, "hidden to fit 160 columns:
    fits, GPU_h (the file keeps every column)"]``."""
    hidden: list[str] = []
    named = {v: k for k, v in headers.items()}
    table = frame.rename(columns=dict(headers)).to_markdown(index=False)
    for name in HIDDEN_FIRST:
        if max(map(len, table.splitlines())) <= WIDTH:
            break
        if named.get(name) in frame.columns:
            frame = frame.drop(columns=named[name])
            hidden.append(name)
            table = frame.rename(columns=dict(headers)).to_markdown(index=False)
    said = f"hidden to fit {WIDTH} columns: {', '.join(hidden)} (the file keeps every column)"
    return [table, said] if hidden else [table]
