"""The lines ``python -m analysis`` writes around its table: under it (:func:`spread_lines`: the verdict
of the best two's intervals, :data:`CPU_NOTE`; :func:`frontier_notes`), in the footer on stderr
(:func:`excluded_note`, :func:`implausible_note`, :func:`frontier_stderr_lines`, :func:`shown_note`) and
in the HTML report (:func:`load_notes`). Each is a plain line; :mod:`analysis.__main__` writes them.
"""

from __future__ import annotations

import argparse

import pandas as pd

from analysis.cli import column_name, sort_spec
from analysis.frontier import frontier_rows, grew_sequence, no_frontier, unmeasured_lines
from analysis.load import rankable
from analysis.significance import verdict
from flopsweep.text import plural
from flopsweep.tree import folder_skipped

CPU_NOTE = (
    "CPU timings are indicative only: ranks share the cores with each other, the GEMM burst and other "
    "tenants (flags noisy, load); compare set-ups on a GPU, with repeats=."
)


def spread_lines(runs: pd.DataFrame, args: argparse.Namespace) -> tuple[pd.DataFrame, list[str]]:
    """``runs`` with ``not_significant`` set on the best two when their 95% intervals overlap
    (:func:`analysis.significance.verdict`; flag ``tie?``) by :func:`verdict_metric`, and the lines under
    the table: that verdict (not under ``--pivot``, whose cells are no runs) and, once, :data:`CPU_NOTE` when
    a run is on the CPU.
    ``--frontier`` ranks set-ups by size and shows one run each (:func:`analysis.frontier.frontier_rows`):
    no verdict, the searches whose size no ok run measured (:func:`analysis.frontier.unmeasured_lines`),
    and the CPU note only when a run shown is on the CPU."""
    metric = column_name(args.metric)
    lines = []
    if args.format not in ("table", "markdown", "html"):
        return runs, lines  # csv and json keep the columns of load()
    if args.frontier:  # ranked by size, not by the metric: only the CPU note, of the runs shown
        return runs, unmeasured_lines(runs) + ([CPU_NOTE] if on_cpu(frontier_rows(runs)) else [])
    runs = runs.copy()
    runs["not_significant"] = False
    judged = verdict_metric(metric, args.sort)
    if not args.pivot and judged in runs:
        tied, line = verdict(runs, judged, rankable(runs, judged))
        runs.loc[tied, "not_significant"] = True
        lines += [line] if line else []
    if on_cpu(runs):
        lines.append(CPU_NOTE)
    return runs, lines


def verdict_metric(metric: str, sort: str | None) -> str:
    """The rate whose best two the ``tie?`` verdict judges: the ``--sort`` column where it carries a 95%
    interval (:data:`analysis.catalogue.CI_METRICS`: ``tokens_per_s``, ``mfu``, ...), else ``metric`` (the
    ranking metric, ``--metric``; the verdict's line names it, so it holds under any order of the rows). Was
    (session 41): no verdict and no ``tie?`` under any ``--sort`` but the metric's own."""
    from analysis.catalogue import CI_METRICS

    key = column_name(sort_spec(sort)[0]) if sort else metric
    return key if key in CI_METRICS else metric


def on_cpu(runs: pd.DataFrame) -> bool:
    """Whether some run of ``runs`` ran on the CPU (``device_name`` ``cpu``): :data:`CPU_NOTE` is due."""
    return "device_name" in runs and bool(runs["device_name"].fillna("").str.lower().eq("cpu").any())


def shown_note(loaded: pd.DataFrame, runs: pd.DataFrame, args: argparse.Namespace) -> str:
    """The end of the footer's summary: how many runs the table shows when filters left some out;
    with ``--frontier``, how many set-ups (one row each) when there is a frontier."""
    if args.frontier:
        rows = len(frontier_rows(runs))
        what = "the largest model or longest sequence" if grew_sequence(runs).any() else "the largest model"
        return f"; {plural(rows, 'set-up')} shown ({what} of each)" if rows else ""
    return f"; {len(runs)} shown" if len(runs) != len(loaded) else ""


def excluded_note(loaded: pd.DataFrame) -> str | None:
    """The note that ok runs were left out of rankings for failing the TFLOPs recomputation, and
    the one for failing another check of their figures (:mod:`analysis.checks`)."""
    left_out = loaded.loc[loaded["status"].eq("ok") & loaded["tflops_mismatch"], "run_dir"]
    notes = []
    if not left_out.empty:
        whose = "its" if len(left_out) == 1 else "their"
        notes.append(
            f"Note: {plural(len(left_out), 'ok run')} left out of rankings (best, baseline, order, pivot, "
            f"plots): {whose} recorded model TFLOPs differ >1% from model_flops_per_iteration / (mean time "
            "x world size) (tflops?): " + ", ".join(left_out)
        )
    if note := implausible_note(loaded):
        notes.append(note)
    return "\n".join(notes) or None


def implausible_note(loaded: pd.DataFrame) -> str | None:
    """The note naming the ok runs left out of rankings and plots because a value is of the wrong type
    or a figure fails its raw fields (``check?``), each with what failed."""
    if "implausible" not in loaded:
        return None
    bad = loaded[loaded["status"].eq("ok") & loaded["implausible"].notna()]
    if bad.empty:
        return None
    each = "; ".join(f"{d} ({why})" for d, why in zip(bad["run_dir"], bad["implausible"], strict=True))
    return (
        f"Note: {plural(len(bad), 'ok run')} left out of rankings and plots: a value is of the wrong type, "
        f"or a figure disagrees with the raw fields it is derived from or cannot be real (check?): {each}"
    )


def load_notes(loaded: pd.DataFrame) -> list[str]:
    """The HTML report's notes on what was read: the folders not searched and the records skipped (with
    why), the run ids shared by two records, and :func:`excluded_note`."""
    unreadable = loaded.attrs.get("unreadable", {})
    notes = [
        f"{'Folder not searched' if folder_skipped(why) else 'Unreadable, skipped'}: {path} ({why})"
        for path, why in unreadable.items()
    ]
    notes += [
        f"Run id shared with another record: {d}" for d in loaded.loc[loaded["duplicate_run_id"], "run_dir"]
    ]
    if note := excluded_note(loaded):
        notes += note.split("\n")
    return notes


def frontier_notes(runs: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """The lines under the HTML report's frontier table (``analysis.__main__.frontier_tables``): the
    searches whose size no ok run measured (:func:`analysis.frontier.unmeasured_lines`); ``--frontier``
    has them already (:func:`spread_lines`)."""
    return [] if args.frontier else unmeasured_lines(runs)


def frontier_stderr_lines(runs: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """The lines the terminal, markdown and HTML frontier print with it, for ``--frontier`` in csv
    or json, whose stdout stays machine-readable (json is an array of rows: no field to hold them):
    why there is no frontier (:func:`analysis.frontier.no_frontier`) and the searches whose size no
    ok run measured (:func:`analysis.frontier.unmeasured_lines`). They go to stderr with the footer."""
    if not args.frontier or args.format not in ("csv", "json"):
        return []
    why = no_frontier(runs)
    return [*([why] if why else []), *unmeasured_lines(runs)]
