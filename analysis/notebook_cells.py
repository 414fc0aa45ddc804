"""The results notebook's cells, the one source of them: ``(kind, id, source)`` in order
(:data:`CELLS`), and :func:`load_results`, which the notebook's load cell calls in the kernel.

The cells use the :mod:`analysis` API alone (tables through :func:`analysis.for_display` and
:func:`analysis.legend`, the view every output draws); :mod:`analysis.notebook` builds, executes
and writes the notebook from them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

_INTRO = """\
# flopsweep results

Every `metrics.json` under `RESULTS` (the parameters cell below) as one table, the best set-ups
and the plots, built only on the `analysis` API (`load`, `best`, `compare`, `pivot`,
`make_plots`), the same code as `python -m analysis`. The cells come from `analysis/notebook.py`:
`python -m analysis DIR --notebook OUT.ipynb` writes and executes this notebook for any results
directory. A relative path in `RESULTS` starts at this notebook's folder; a copy moved elsewhere
needs `RESULTS` set to where its records are.

Failed runs (oom, error, invalid) keep their rows with blank metrics; they never count in a best
or an average. Warnings name unreadable records, duplicate run ids and records whose model TFLOPs
disagree with their own stored FLOPs (those are left out of every ranking)."""

_PARAMETERS = """\
# Parameters (papermill's tag "parameters").
# RESULTS: the records to read, a path or a list of paths (sweep or run directories, metrics.json
# files, globs); a relative path starts at this notebook's folder.
RESULTS = {value}"""

_IMPORT = """\
# Import analysis.
# The installed package (python -m analysis --notebook runs the kernel with its own analysis); no
# folder is searched for one.
import os

import pandas as pd
from IPython.display import Image, Markdown, display

pd.set_option("display.max_rows", None, "display.max_columns", None)  # every run, every column

try:
    import analysis
    from analysis.notebook import load_results
except ImportError as exc:
    raise ImportError(
        f"this kernel cannot import the analysis package ({exc}): pip install -e PATH_TO_FLOPSWEEP"
    ) from None

# The notebook's folder, where a relative path in RESULTS starts: the kernel's working directory
# under Jupyter; python -m analysis --notebook runs the kernel in a private directory and names it.
HERE = os.environ.get("FLOPSWEEP_NOTEBOOK_DIR") or os.getcwd()"""

_LOAD = """\
# Load the records.
# One row per run, failed runs included.
paths = [RESULTS] if isinstance(RESULTS, (str, os.PathLike)) else list(RESULTS)
df = load_results(paths, HERE, predict=True)  # runs without metrics.predicted get one (--predict)
if df.empty:
    raise ValueError(f"no readable metrics.json under {', '.join(map(str, paths))}; {analysis.summary(df)}")
print(f"{', '.join(map(str, paths))}: {analysis.summary(df)}")"""

NOTEBOOK_DIR_ENV = "FLOPSWEEP_NOTEBOOK_DIR"
"""The kernel's environment variable that names the notebook's folder (:func:`execute` sets it; the
kernel runs elsewhere, in a private directory)."""


def load_results(
    paths: Sequence[str | os.PathLike], folder: str | os.PathLike, *, predict: bool = False
) -> Any:
    """:func:`analysis.load` of the notebook's ``RESULTS``, each relative path taken from ``folder`` (the
    notebook's) without changing the working directory (``start=folder``), so that ``run_dir`` and the
    records a ``predicted_source`` names are relative to ``folder`` as ``RESULTS`` spells them.
    ``predict``: as ``python -m analysis --predict`` (:func:`analysis.load.fill_predictions`).

    Raises:
        FileNotFoundError: a path that neither exists nor matches a glob, naming ``folder`` and the
            parameters cell.
    """
    from analysis.load import load

    try:
        return load(paths, predict=predict, start=folder)
    except FileNotFoundError as exc:
        where = os.fspath(folder)
        raise FileNotFoundError(f"{exc} (from {where}): set RESULTS in the parameters cell") from None


CELLS: list[tuple[str, str, str]] = [
    ("markdown", "intro", _INTRO),
    ("code", "parameters", _PARAMETERS),
    ("code", "import", _IMPORT),
    ("code", "load", _LOAD),
    (
        "markdown",
        "verdict-doc",
        """\
## Verdict

The winning set-up by model TFLOPs per device, its 95% interval, the runner-up, and whether the
winner beats it (their intervals do not overlap); then the chart the sweep calls for: a bar per
set-up when each was run at one micro batch (a backend or layout sweep), lines when a set-up was run
at several. Set-ups are named by the knobs that differ between them.""",
    ),
    (
        "code",
        "verdict",
        """\
# The verdict, then the chart of the set-ups (the first plot; the others are at the end).
# 72 dots per inch, a 256-colour palette (a third of the bytes of RGBA, the same picture): the
# nine-panel plots of the H200 records are 1555 x 4099 pixels, about 0.25 MB each here.
print("\\n".join(analysis.headline(df)))
charts, skipped = analysis.make_plots(df)  # name -> figure, in analysis.PLOTS' order
first = next(iter(charts), None)
if first is not None:
    display(Image(analysis.png_bytes(charts[first], dpi=72, palette=True), metadata={"alt": first}))""",
    ),
    (
        "markdown",
        "runs-doc",
        """\
## All runs

The best first (model TFLOPs per device); failed runs last. Units are in the headers: model
TFLOPs per device (10¹² FLOP/s: model FLOPs, attention counted at the blocks computed, no
recompute), tokens per second over all ranks, the mean iteration time in seconds (the one the
rates come from), memory in GiB. The legend under the table explains the short headers.""",
    ),
    (
        "code",
        "runs",
        """\
# All runs, the best first.
runs = analysis.compact(analysis.table(df, columns=list(df.columns)))
display(analysis.for_display(runs))
print(analysis.legend(list(runs.columns)))""",
    ),
    (
        "markdown",
        "best-doc",
        "## Best set-up per model\n\nThe ok run with the most model TFLOPs per device for each model.",
    ),
    (
        "code",
        "best",
        """\
# Best set-up per model.
analysis.for_display(analysis.compact(analysis.best(df, by=["model"], metric=analysis.RANK_METRIC)))""",
    ),
    (
        "markdown",
        "baseline-doc",
        """\
## Against a baseline

Speedup of each run over the FSDP run with the same set-up otherwise (model, attention,
precision, micro batch, world size, ...).""",
    ),
    (
        "code",
        "baseline",
        """\
# Speedup over the matching FSDP run.
baseline = {"backend": "fsdp"}
if analysis.select(df[df.status == "ok"], baseline).empty:
    print("no ok run with backend=fsdp in these results: no baseline comparison")
else:
    speedups = analysis.sort_runs(analysis.compare(df, baseline=baseline), "speedup")
    display(analysis.for_display(analysis.compact(speedups)))""",
    ),
    (
        "markdown",
        "pivot-doc",
        """\
## Model TFLOPs per device by model and backend

The best ok run of each cell; a failed-only cell shows its status.""",
    ),
    (
        "code",
        "pivot",
        """\
# Model TFLOPs per device by model and backend.
table = analysis.pivot(
    df, index="model", columns=["backend", "zero_stage"], values=analysis.RANK_METRIC, mark_failed=True
)
analysis.for_display(analysis.flat_pivot(table))""",
    ),
    (
        "markdown",
        "energy-doc",
        """\
## Energy and cost

GPU joules per token (NVML's energy counter over the measured steps, all GPUs), mean power per GPU
in watts, and, where the runs set `cost.usd_per_gpu_hour` and `budget.tokens`, US dollars per
million tokens and what the budget costs at the measured rate (GPU-hours, days on the run's GPUs,
kWh, dollars). The least energy per token first. CPU runs and records made before the energy reader
have none.""",
    ),
    (
        "code",
        "energy",
        """\
# Energy and cost, the least joules per token first.
energy = [c for c in analysis.ENERGY_COLUMNS if c in df and df[c].notna().any()]
if not energy:
    print("no run recorded its GPU energy (CPU runs and older records have none)")
else:
    ranked = analysis.table(df, columns=list(df.columns), metric="joules_per_token")
    shown = analysis.compact(ranked[ranked["joules_per_token"].notna()])
    setup = [c for c in shown.columns if c in analysis.SETUP_COLUMNS or c == "status"]
    display(analysis.for_display(shown[[*setup, "tokens_per_s", *energy]]))""",
    ),
    (
        "markdown",
        "frontier-doc",
        """\
## The memory frontier

The largest model each set-up trained (backend, checkpointing policy, offload, precision, ...; runs
with `search.model=largest`, and any other size of the same set-up), at its best micro batch: its
parameters, tokens per second and MFU, and the smallest larger size that did not train. The
`frontier` plot draws every size of each set-up, the largest starred.""",
    ),
    (
        "code",
        "frontier",
        """\
# The largest model per set-up, the largest first.
if not analysis.searched(df):
    print("no run searched the largest model (search.model=largest: sweep/frontier-*.yaml)")
else:
    display(analysis.for_display(analysis.frontier_table(df)))""",
    ),
    (
        "markdown",
        "predicted-doc",
        """\
## Predicted against measured

The step time `flopsweep.predict` gives each run before it ran (`metrics.predicted`); a run recorded
without one gets it here from the other records (as `python -m analysis --predict`): calibrated from
the one-GPU run of the same set-up, bandwidth and overlap from the probes and profiles among them, or
uncalibrated (FLOPs at a stated fraction of the measured GEMM rate). `prediction_error` is
(predicted - measured) / measured; the largest first.""",
    ),
    (
        "code",
        "predicted",
        """\
# Predicted against measured step time, the largest error first.
known = df[df["prediction_error"].notna()]
if known.empty:
    print("no run has a prediction (no calibration, no GEMM rate among these records)")
else:
    known = known.loc[known["prediction_error"].abs().sort_values(ascending=False).index]
    setup = [c for c in analysis.compact(known).columns if c in analysis.SETUP_COLUMNS and c != "world_size"]
    figures = ["world_size", "iteration_time_s_mean", "predicted_iteration_time_s", "prediction_error"]
    display(analysis.for_display(known[[*setup, *figures, "predicted_source"]]))""",
    ),
    (
        "markdown",
        "plots-doc",
        """\
## Plots

Peak GPU memory against micro batch size (a line per backend, a panel per model, at most nine
models: the best; a bar per set-up when each has one micro batch), tokens per second against
sequence length when the sweep varies it, tokens per second against GPU joules per token with
each model's Pareto front ringed (runs with energy only), and predicted against measured step
time. An × marks a failed run at its micro batch size.""",
    ),
    (
        "code",
        "plots",
        """\
# Plots (PNG). The first one is drawn under the verdict.
for name, fig in list(charts.items())[1:]:
    png = analysis.png_bytes(fig, dpi=72, palette=True)
    display(Markdown(f"### {name}"), Image(png, metadata={"alt": name}))
for name, reason in skipped.items():
    print(f"skipped {name}: {reason}")""",
    ),
]
"""The notebook's cells, in order: ``(kind, id, source)``, kind ``markdown`` or ``code``."""
