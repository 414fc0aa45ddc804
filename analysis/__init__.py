"""Gather ``metrics.json`` records into a pandas DataFrame: tables, comparisons, plots, reports.

The JSON records are the only input: nothing here parses directory names or logs.
The TFLOPs figures are read from the records; :func:`load` recomputes the model
TFLOPs from each record's stored FLOPs only to flag records that disagree with
themselves (left out of rankings). Columns, units, short headers, formats and which way
is better come from one spec per column (:mod:`analysis.catalogue`, from
:data:`flopsweep.record.METRIC_SPECS` and :mod:`flopsweep.columns`). Nothing here imports torch
or the model code: only flopsweep's torch-free modules (:mod:`flopsweep.record`,
:mod:`flopsweep.files`, :mod:`flopsweep.text`, :mod:`flopsweep.columns`).

    df = load("multirun/2026-11-29")            # one row per run, failed runs included
    best(df, by=["model"])                      # best ok run per model (model TFLOPs)
    compare(df, baseline={"backend": "fsdp"})   # adds a speedup column
    pivot(df, index="model", columns="backend", values="model_tflops_per_device")
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m analysis, its package imported as -m locates it: a Ctrl-C in the
    # imports below (pandas, matplotlib: 0.6 s) is one line and 130 (analysis.cli.run_entry hands it back)
    from flopsweep.signals import ANALYSIS_LINE, stop_as_it_starts

    stop_as_it_starts(ANALYSIS_LINE)

from analysis.blanks import blank_notes, why_blank
from analysis.display import compact, flat_pivot, for_display, legend, render, summary
from analysis.frontier import frontier_points, frontier_table, searched
from analysis.headline import headline
from analysis.load import COLUMNS, ENERGY_COLUMNS, METRIC_COLUMNS, RANK_METRIC, TABLE_COLUMNS, load, table
from analysis.plots import PLOTS, PlotSkipped, make_plots, pareto_front, png_bytes, save_plots, write_pngs
from analysis.query import (
    SETUP_COLUMNS,
    AnalysisError,
    ColumnError,
    best,
    compare,
    pivot,
    select,
    sort_runs,
)
from analysis.schema import RecordError, read_record, upgrade_v0_to_v1, upgrade_v1_to_v2

__all__ = [
    "COLUMNS",
    "ENERGY_COLUMNS",
    "METRIC_COLUMNS",
    "PLOTS",
    "RANK_METRIC",
    "SETUP_COLUMNS",
    "TABLE_COLUMNS",
    "AnalysisError",
    "ColumnError",
    "RecordError",
    "best",
    "blank_notes",
    "compact",
    "flat_pivot",
    "frontier_points",
    "frontier_table",
    "headline",
    "compare",
    "for_display",
    "legend",
    "load",
    "make_plots",
    "pareto_front",
    "pivot",
    "png_bytes",
    "read_record",
    "render",
    "PlotSkipped",
    "save_plots",
    "searched",
    "select",
    "sort_runs",
    "summary",
    "table",
    "upgrade_v0_to_v1",
    "upgrade_v1_to_v2",
    "why_blank",
    "write_pngs",
]
