"""Session 39 (docs/reliability-10.md #670): a plan sweep's table hid ``fits``, ``step_s`` and ``MFU``
(what the README promises) to fit 160 columns while keeping its ``source`` and ``note`` footnotes, and
a wider terminal (``COLUMNS=250``) kept 160. Now both tables (``planfit.HIDDEN_FIRST``,
``planrender.HIDDEN_FIRST``) hide the promised columns last, and their width is
:func:`flopsweep.job.planfit.width`: the terminal's columns where standard output is a terminal wider
than 160, as the analysis' tables (``analysis.cli.default_width``), else 160."""

from __future__ import annotations

import pandas as pd

from flopsweep.job import planfit, planrender
from flopsweep.job.planprint import TERMINAL_COLUMNS

PROMISED = ("MFU", "step_s", "fits")


def _frame() -> pd.DataFrame:
    row = {c: "1" for c in TERMINAL_COLUMNS} | {
        "model": "llama3.1-70b",
        "overrides": "activation_checkpointing=none batch.micro_batch_size=1",
        "status": "ok",
        "layout": "dp8",
        "prediction_source": "[1]",
        "note": "[5]",
        "predicted_budget_usd": "2040000.123456",
        "predicted_iteration_time_s": "1.936",
        "predicted_mfu": "0.463",
        "fits": "False",
    }
    return pd.DataFrame([row])


def test_the_promised_columns_are_hidden_last_and_the_footnotes_first():
    assert planfit.HIDDEN_FIRST[-3:] == PROMISED and planrender.HIDDEN_FIRST[-1] == "MFU"
    assert planfit.HIDDEN_FIRST.index("source") < planfit.HIDDEN_FIRST.index("MFU")
    assert planrender.HIDDEN_FIRST.index("source") < planrender.HIDDEN_FIRST.index("MFU")
    table, said = planfit.fitted_markdown(_frame(), TERMINAL_COLUMNS, most=160)
    hidden = said.removeprefix("hidden to fit 160 columns: ").split(" (")[0].split(", ")
    assert max(map(len, table.splitlines())) <= 160
    assert hidden[:2] == ["GPU_h", "rank"] and not set(hidden) & set(PROMISED), said
    header = table.splitlines()[0]
    assert all(f" {h} " in header for h in ("fits", "step_s", "MFU", "model", "overrides", "status"))


def test_a_wider_terminal_shows_every_column_and_a_pipe_keeps_160(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert planfit.width(terminal=True) == 250 and planfit.width(terminal=False) == 160
    monkeypatch.setenv("COLUMNS", "100")
    assert planfit.width(terminal=True) == 160
    lines = planfit.fitted_markdown(_frame(), TERMINAL_COLUMNS, most=400)
    assert len(lines) == 1 and " note " in lines[0] and " GPU_h " in lines[0]
