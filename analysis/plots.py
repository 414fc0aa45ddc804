"""Plots of a runs DataFrame (:func:`analysis.load`): matplotlib figures, saved as PNG.

Figures are built with :class:`matplotlib.figure.Figure` directly, never pyplot, so
no GUI backend or global figure state is involved (the Agg canvas renders PNG).
Failed runs are drawn as an × at their x value, labelled with their status; runs
whose TFLOPs fail the recomputation (``tflops_mismatch``) are left out. A plot that
the data cannot support raises :class:`PlotSkipped` with the reason.

Cost scales with what is drawn, not with the data: a figure has at most
:data:`MAX_PANELS` panels (the models with the best :data:`analysis.load.RANK_METRIC`;
its title says how many were left out), so a report of 400 models makes the same
three figures as one of 4. Every text from a record (model names, labels, the
device) is escaped for matplotlib, so a ``$`` in it is drawn as a dollar, never
parsed as mathtext.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter

from analysis.catalogue import RANK_METRIC, header
from analysis.drawing import (  # noqa: F401 - the kit's public names stay importable from analysis.plots
    COLORS,
    DPI,
    MARKERS,
    MAX_BARS,
    MAX_PANELS,
    PlotSkipped,
    bar_figure,
    chart_kind,
    choose_panels,
    data_uri,
    differing_columns,
    legend_columns,
    line_figure,
    on_device,
    panel_grid,
    panels_shown,
    plain,
    png_bytes,
    series_labels,
    set_title,
    short,
    wrap_to_width,
)
from analysis.frontier import frontier_label_columns, frontier_points, searched
from analysis.load import failed_checks
from analysis.output import write_atomic
from analysis.query import normalize
from analysis.sanitize import MAX_LABEL, shorten
from flopsweep.text import figure


def plot_tflops_vs_micro_batch(df: pd.DataFrame) -> Figure:
    """Model TFLOPs per device (:data:`analysis.load.RANK_METRIC`, 1e12 FLOP/s), the chart the sweep
    calls for (:func:`analysis.drawing.chart_kind`): against micro batch size, a line per set-up, a
    panel per model, when a set-up was run at several micro batches; else one bar per set-up (a
    backend or layout sweep), the best on top with its 95% interval. Raises PlotSkipped when no ok
    run has them."""
    if chart_kind(df[df["status"].ne("ok") | df[RANK_METRIC].notna()], "micro_batch_size") == "bar":
        return bar_figure(
            df,
            y=RANK_METRIC,
            series="backend",
            title="Model TFLOPs per device by set-up (best on top; bars: 95% intervals)",
            xlabel="model TFLOPs per device (10¹² FLOP/s)",
        )
    return line_figure(
        df,
        x="micro_batch_size",
        ys=[(RANK_METRIC, "-", "model TFLOPs")],
        series="backend",
        title="Model TFLOPs per device vs micro batch size",
        xlabel="micro batch size (sequences per rank)",
        ylabel="model TFLOPs per device (10¹² FLOP/s)",
    )


def plot_memory_vs_micro_batch(df: pd.DataFrame) -> Figure:
    """Peak GPU memory per rank (GiB; allocated solid, reserved dashed) vs micro batch size, a
    line per backend, a panel per model; one bar per set-up (allocated, reserved as a tick) when
    every set-up has one micro batch (:func:`analysis.drawing.chart_kind`).
    Raises PlotSkipped when no run recorded GPU memory."""
    if not df["peak_cuda_allocated_gib"].notna().any():
        raise PlotSkipped("no run recorded peak GPU memory (CPU runs record none)")
    df = df[df["device_name"].fillna("").str.lower() != "cpu"]  # their × would mean nothing here
    if chart_kind(df[df["status"].ne("ok") | df["peak_cuda_allocated_gib"].notna()]) == "bar":
        return bar_figure(
            df,
            y="peak_cuda_allocated_gib",
            series="backend",
            title="Peak GPU memory allocated per rank by set-up (tick: reserved)",
            xlabel="peak GPU memory per rank (GiB)",
            mark=("peak_cuda_reserved_gib", "reserved"),
        )
    ys = [("peak_cuda_allocated_gib", "-", "allocated"), ("peak_cuda_reserved_gib", "--", "reserved")]
    return line_figure(
        df,
        x="micro_batch_size",
        ys=ys,
        series="backend",
        title="Peak GPU memory vs micro batch size",
        fail_y=0.92,
        xlabel="micro batch size (sequences per rank)",
        ylabel="peak GPU memory per rank (GiB)",
    )


def plot_tokens_vs_seq_len(df: pd.DataFrame) -> Figure:
    """Tokens per second (all ranks) vs sequence length, a line per attention type, a panel per
    model that was run at two or more sequence lengths. Raises PlotSkipped when none was."""
    ok = df[(df["status"] == "ok") & df["tokens_per_s"].notna() & df["seq_len"].notna()]
    per_model = ok.groupby("model")["seq_len"].nunique()
    varied = per_model[per_model >= 2].index
    if varied.empty:
        lengths = ", ".join(str(v) for v in sorted(ok["seq_len"].unique())) or "none"
        raise PlotSkipped(f"the sweep does not vary seq_len within a model (seq_len of ok runs: {lengths})")
    fig = line_figure(
        df[df["model"].isin(varied)],  # only the models run at several lengths
        x="seq_len",
        ys=[("tokens_per_s", "-", "tokens/s")],
        series="attention",
        title="Tokens per second vs sequence length",
        xlabel="sequence length (tokens)",
        ylabel="tokens per second (all ranks)",
    )
    return _eng_y(fig)


def _eng_y(fig: Figure) -> Figure:
    """``fig`` with engineering tick labels on every y axis (400k, 1.2M)."""
    for ax in fig.axes:
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    return fig


def plot_scaling(df: pd.DataFrame) -> Figure:
    """Tokens per second per device vs world size (weak scaling), a line per backend, a panel per
    model; only set-ups run at two or more world sizes (the same ``setup_id``). Raises
    PlotSkipped when there are none."""
    ok = df[df["status"].eq("ok") & df["tokens_per_s_per_device"].notna() & df["world_size"].notna()]
    sizes = ok.groupby("setup_id")["world_size"].nunique()
    scaled = sizes[sizes > 1].index
    if scaled.empty:
        raise PlotSkipped("no set-up was run at two or more world sizes")
    fig = line_figure(
        df[df["setup_id"].isin(scaled)],
        x="world_size",
        ys=[("tokens_per_s_per_device", "-", "tokens/s per device")],
        series="backend",
        title="Weak scaling: tokens per second per device vs world size",
        xlabel="world size (ranks)",
        ylabel="tokens per second per device",
    )
    return _eng_y(fig)


def pareto_front(points: pd.DataFrame, *, x: str, y: str) -> pd.DataFrame:
    """The rows of ``points`` that no other row beats on both ``x`` (lower is better: joules per
    token) and ``y`` (higher is better: tokens per second), sorted by ``x``: a row is on the front
    when every row with an ``x`` at most its own has a ``y`` below its own, or the same point.
    Rows without both values are never on it."""
    data = points[points[x].notna() & points[y].notna()].sort_values([x, y], ascending=[True, False])
    keep, best = [], -math.inf
    for index, value in data[y].items():
        if value > best:
            keep.append(index)
            best = value
    return data.loc[keep]


def plot_tokens_vs_joules_per_token(df: pd.DataFrame) -> Figure:
    """Tokens per second (all ranks) against GPU joules per token, a point per ok run coloured by
    precision (other set-up columns that vary named in the label), a panel per model, and each
    panel's Pareto front (:func:`pareto_front`: no run both faster and cheaper in energy) as a
    line through ringed points. Raises PlotSkipped when no ok run recorded energy (CPU runs and
    records made before the NVML reader have none)."""
    ok = df[df["status"].eq("ok") & df["joules_per_token"].notna() & df["tokens_per_s"].notna()]
    ok = ok[ok["model"].notna()]
    if ok.empty:
        raise PlotSkipped("no ok run recorded its GPU energy (CPU runs and older records have none)")
    ok, title = panels_shown(ok, "model", "Tokens per second vs GPU joules per token (Pareto front ringed)")
    shown = {
        m: sub.assign(_label=series_labels(sub, x="joules_per_token", series="precision"))
        for m, sub in ok.groupby("model")
    }
    labels = sorted({lbl for p in shown.values() for lbl in p["_label"]})
    colors = {lbl: COLORS[i % len(COLORS)] for i, lbl in enumerate(labels)}
    markers = {lbl: MARKERS[i // len(COLORS) % len(MARKERS)] for i, lbl in enumerate(labels)}
    fig, axes = panel_grid(len(shown), title + on_device(ok), labels)
    for ax, (name, panel) in zip(axes, shown.items(), strict=True):
        for label, runs in panel.groupby("_label", sort=True):
            ax.plot(
                runs["joules_per_token"],
                runs["tokens_per_s"],
                linestyle="",
                marker=markers[label],
                color=colors[label],
                label=label,
            )
        front = pareto_front(panel, x="joules_per_token", y="tokens_per_s")
        ax.plot(front["joules_per_token"], front["tokens_per_s"], "-", color="black", linewidth=1, zorder=1)
        ax.plot(
            front["joules_per_token"],
            front["tokens_per_s"],
            linestyle="",
            marker="o",
            markersize=12,
            mfc="none",
            color="black",
            zorder=1,
        )
        ax.set_xlabel("GPU joules per token (lower is better)")
        ax.set_ylabel("tokens per second (all ranks)")
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.grid(alpha=0.3)
        ax.margins(0.15)
        set_title(fig, short(name), ax)
        handles = [
            Line2D([], [], color=colors[lbl], marker=markers[lbl], linestyle="", label=lbl)
            for lbl in sorted(set(panel["_label"]))
        ]
        handles.append(Line2D([], [], color="black", marker="o", mfc="none", label="Pareto front"))
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncols=legend_columns(labels),
            fontsize=7,
        )
    return fig


def _frontier_label(row: pd.Series, columns: list[str]) -> str:
    """A frontier set-up's legend label: ``short=value`` for each column that tells set-ups apart
    (:func:`analysis.frontier.frontier_label_columns`) and that this set-up sets: a key it leaves
    blank (a ZeRO++ key of an FSDP set-up) is left out, never shown as ``-`` or ``None``; the backend
    when it sets none of them."""
    values = [(c, short(normalize(row[c]))) for c in columns]
    text = ", ".join(f"{header(c)}={v}" for c, v in values if v)
    if not text:
        text = f"backend={short(normalize(row.get('backend'))) or '?'}"
    return plain(shorten(text, 2 * MAX_LABEL))


def plot_frontier(df: pd.DataFrame) -> Figure:
    """The memory frontier: tokens per second (all ranks) against parameters, a line per frontier
    set-up (:mod:`analysis.frontier`: backend, checkpointing policy, offload, precision, ...; each
    size at its best micro batch), the set-up's largest ok size starred, the search's probes that
    trained hollow on a dotted line (one step each: indicative), a panel per family (``arch``).
    Raises PlotSkipped unless some ok run searched the largest model
    (``search.model=largest``)."""
    points = frontier_points(df)
    if not searched(df) or points.empty or not points["searched"].any():
        raise PlotSkipped("no ok run searched the largest model (search.model=largest)")
    points = points.assign(arch=points["arch"] if "arch" in points else "")
    label_cols = frontier_label_columns(points)
    points["_label"] = [_frontier_label(row, label_cols) for _, row in points.iterrows()]
    labels = sorted(set(points["_label"]))
    colors = {lbl: COLORS[i % len(COLORS)] for i, lbl in enumerate(labels)}
    markers = {lbl: MARKERS[i // len(COLORS) % len(MARKERS)] for i, lbl in enumerate(labels)}
    families = list(points.groupby("arch", dropna=False))[:MAX_PANELS]
    title = "The memory frontier: tokens/s against parameters (largest starred)" + on_device(points)
    fig, axes = panel_grid(len(families), title, labels)
    for ax, (family, panel) in zip(axes, families, strict=True):
        for label, line in panel.groupby("_label", sort=True):
            line = line.sort_values("n_params")
            ax.plot(line["n_params"], line["tokens_per_s"], "-", marker=markers[label], color=colors[label])
            probes = sorted(
                p for ps in line.get("search_probes", pd.Series(dtype=object)).dropna() for p in ps
            )
            if probes:  # the search's own probes: one step each, drawn hollow and dotted
                xs, ys = zip(*probes, strict=True)
                ax.plot(xs, ys, ":", marker=markers[label], color=colors[label], mfc="none", markersize=4)
            top = line[line["largest"]]
            star = {"linestyle": "", "marker": "*", "markersize": 16, "markeredgecolor": "black"}
            ax.plot(top["n_params"], top["tokens_per_s"], color=colors[label], **star)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.xaxis.set_minor_formatter(NullFormatter())  # the log axis's minor labels overlap
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_xlabel("parameters")
        ax.set_ylabel("tokens per second (all ranks)")
        ax.grid(alpha=0.3)
        ax.margins(0.15)
        set_title(fig, short(family) if isinstance(family, str) and family else "", ax)
        handles = [
            Line2D([], [], color=colors[lbl], marker=markers[lbl], label=lbl)
            for lbl in sorted(set(panel["_label"]))
        ]
        handles.append(
            Line2D([], [], color="black", marker="*", linestyle="", markersize=10, label="largest")
        )
        if "search_probes" in panel and panel["search_probes"].notna().any():
            probe = {"color": "black", "marker": "o", "mfc": "none", "linestyle": ":", "markersize": 4}
            handles.append(Line2D([], [], label="search probes (one step each)", **probe))
        where = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "fontsize": 7}
        ax.legend(handles=handles, ncols=legend_columns(labels), **where)
    return fig


BREAKDOWN_PARTS = [
    ("breakdown_compute_s", "compute", "tab:blue"),
    ("breakdown_optimizer_s", "optimizer", "tab:green"),
    ("breakdown_exposed_comm_s", "exposed communication", "tab:red"),
    ("breakdown_idle_s", "idle (host-bound)", "tab:gray"),
]
"""The parts of a profiled step (``profile=true``), in stacking order: column, label, colour."""


BAR_LABEL_CHARS = 48
"""Characters per line of a bar's label in :func:`plot_step_breakdown` (longer labels wrap)."""


def plot_step_breakdown(df: pd.DataFrame) -> Figure:
    """One stacked horizontal bar per profiled ok run (``profile=true``): the share of the
    profiled step spent in compute, the optimizer, exposed communication and idle, with the
    step's seconds at the bar's end. Raises PlotSkipped when no run was profiled."""
    cols = [c for c, _, _ in BREAKDOWN_PARTS]
    runs = df[df["status"].eq("ok") & df["breakdown_step_s"].gt(0) & df[cols].notna().all(axis=1)]
    if runs.empty:
        raise PlotSkipped("no ok run has a readable step breakdown (run with profile=true)")
    runs = runs.sort_values(["model", "backend", "world_size"], kind="stable").head(MAX_BARS)
    labels = series_labels(runs, x="world_size", series="backend")
    labels = [  # wrapped: a set-up named by many knobs (ZeRO-3's buckets) left the bars no width
        textwrap.fill(plain(f"{short(m)} {lbl} x{'' if pd.isna(w) else int(w)}"), BAR_LABEL_CHARS)
        for m, lbl, w in zip(runs["model"], labels, runs["world_size"], strict=True)
    ]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig = Figure(figsize=(9, 1.6 + 0.2 * lines + 0.15 * len(runs)), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    rows = list(range(len(runs)))
    left = [0.0] * len(runs)
    for col, name, color in BREAKDOWN_PARTS:
        share = (runs[col] / runs["breakdown_step_s"]).tolist()
        ax.barh(rows, share, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, share, strict=True)]
    for y, (total, seconds) in enumerate(zip(left, runs["breakdown_step_s"], strict=True)):
        ax.text(total + 0.01, y, f"{figure(seconds)} s", va="center", fontsize=8)
    ax.set_yticks(rows, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of the profiled step (its seconds at the end of each bar)")
    set_title(fig, "Where the profiled step's time goes" + on_device(runs))
    fig.legend(loc="outside lower center", ncol=4, fontsize=8)
    return fig


def plot_predicted_vs_measured(df: pd.DataFrame) -> Figure:
    """Predicted against measured mean step time (s), a point per ok run with both, coloured by
    backend, on log-log axes with the line of perfect prediction and the +-10% band; the title
    gives the median and worst absolute ``prediction_error``. Raises PlotSkipped when no ok run has
    a prediction (records from before ``metrics.predicted``: run ``python -m analysis --predict``)."""
    ok = df[
        df["status"].eq("ok") & df["predicted_iteration_time_s"].notna() & df["iteration_time_s_mean"].notna()
    ]
    if ok.empty:
        raise PlotSkipped("no ok run has a prediction (metrics.predicted; --predict fills older records)")
    errors = ok["prediction_error"].abs()
    title = (
        f"Predicted vs measured step time: median |error| {errors.median():.1%}, worst {errors.max():.1%}"
        + on_device(ok)
    )
    labels = sorted(ok["backend"].fillna("?").astype(str).unique())
    colors = {lbl: COLORS[i % len(COLORS)] for i, lbl in enumerate(labels)}
    fig, axes = panel_grid(1, title, labels)
    ax = axes[0]
    for label, runs in ok.groupby(ok["backend"].fillna("?").astype(str), sort=True):
        ax.plot(
            runs["iteration_time_s_mean"],
            runs["predicted_iteration_time_s"],
            linestyle="",
            marker="o",
            color=colors[label],
            label=plain(label),
        )
    low = min(ok["iteration_time_s_mean"].min(), ok["predicted_iteration_time_s"].min()) * 0.8
    high = max(ok["iteration_time_s_mean"].max(), ok["predicted_iteration_time_s"].max()) * 1.25
    line = [low, high]
    ax.plot(line, line, "-", color="black", linewidth=1, label="predicted = measured")
    ax.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line], color="gray", alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):  # plain seconds at 1, 2, 5 x 10^k; no overlapping minor labels
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: figure(v, 6)))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("measured mean step time (s)")
    ax.set_ylabel("predicted step time (s); band: +-10%")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=legend_columns(labels), fontsize=7)
    return fig


PLOTS: dict[str, Callable[[pd.DataFrame], Figure]] = {
    "tflops_vs_micro_batch": plot_tflops_vs_micro_batch,
    "memory_vs_micro_batch": plot_memory_vs_micro_batch,
    "tokens_vs_seq_len": plot_tokens_vs_seq_len,
    "scaling": plot_scaling,
    "step_breakdown": plot_step_breakdown,
    "tokens_vs_joules_per_token": plot_tokens_vs_joules_per_token,
    "predicted_vs_measured": plot_predicted_vs_measured,
    "frontier": plot_frontier,
}
"""Plot name (the PNG file's stem) -> function."""


def make_plots(df: pd.DataFrame) -> tuple[dict[str, Figure], dict[str, str]]:
    """Every plot of :data:`PLOTS` the data supports: ``(figures by name, skip reasons by name)``.

    Runs flagged ``tflops_mismatch`` or ``implausible`` are left out (their figures fail the
    recomputation from their raw fields, :func:`analysis.load.failed_checks`).
    """
    df = df[~failed_checks(df)]  # figures that fail their raw fields are not drawn
    figures, skipped = {}, {}
    for name, plot in PLOTS.items():
        try:
            figures[name] = plot(df)
        except PlotSkipped as exc:
            skipped[name] = str(exc)
    return figures, skipped


def write_pngs(figures: dict[str, Figure], out_dir: str | Path) -> dict[str, Path]:
    """Write each figure to ``out_dir/NAME.png`` (the folder is created); the paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / f"{name}.png" for name in figures}
    for name, fig in figures.items():
        write_atomic(paths[name], png_bytes(fig))  # whole or not at all; a planted link is replaced
    return paths


def save_plots(df: pd.DataFrame, out_dir: str | Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Write ``out_dir/NAME.png`` for each supported plot; ``(paths by name, skip reasons by name)``."""
    figures, skipped = make_plots(df)
    return write_pngs(figures, out_dir), skipped
