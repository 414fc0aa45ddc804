"""Plots of a runs DataFrame (:func:`analysis.load`): matplotlib figures, saved as PNG.

Figures are built with :class:`matplotlib.figure.Figure` directly, never pyplot, so
no GUI backend or global figure state is involved (the Agg canvas renders PNG).
Failed runs are drawn as an × at their x value, labelled with their status. A
plot that the data cannot support raises :class:`PlotSkipped` with the reason.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis.display import SHORT
from analysis.query import SETUP_COLUMNS, normalize

DPI = 100
_COLORS = [
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:gray",
    "tab:olive",
    "tab:cyan",
]


class PlotSkipped(Exception):
    """The data does not support a plot; ``str(exc)`` says why."""


def _base_label(df: pd.DataFrame, column: str) -> pd.Series:
    label = df[column].astype(object).map(lambda v: "" if pd.isna(v) else str(v))
    if column == "backend" and "zero_stage" in df:
        zero = df["zero_stage"].astype(object).map(lambda v: "" if pd.isna(v) else f" ZeRO-{v}")
        label = label + zero
    return label


def series_labels(df: pd.DataFrame, *, facet: str, x: str, series: str) -> pd.Series:
    """One legend label per row: the ``series`` value (``backend`` with its ZeRO stage), plus
    ``short=value`` for every other set-up column that varies within some facet."""
    fixed = {facet, x, series, "zero_stage" if series == "backend" else series}
    extras = [
        c
        for c in SETUP_COLUMNS
        if c in df and c not in fixed and (df.groupby(facet, dropna=False)[c].nunique(dropna=False) > 1).any()
    ]
    label = _base_label(df, series)
    for c in extras:
        label = label + ", " + SHORT.get(c, c) + "=" + df[c].astype(object).map(normalize)
    return label


def _grid(n: int, title: str) -> tuple[Figure, list]:
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(5.2 * ncols, 3.8 * nrows + 0.9), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, axes[:n]


def _x_axis(ax, values: pd.Series, label: str) -> None:
    xs = sorted({float(v) for v in values.dropna()})
    if xs and xs[0] > 0 and xs[-1] / xs[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.minorticks_off()
    ax.set_xlabel(label)


def _draw_lines(ax, ok: pd.DataFrame, x: str, ys: list[tuple[str, str]], colors: dict[str, str]) -> None:
    """One line per label (mean of repeated ok runs at each x); ``ys`` pairs a column with a style."""
    for label, runs in ok.groupby("_label", sort=True):
        for y, style in ys:
            pts = runs.groupby(x)[y].mean().dropna().sort_index()
            face = colors[label] if style == "-" else "none"  # hollow markers on the secondary series
            ax.plot(pts.index.astype(float), pts.values, style, marker="o", color=colors[label], mfc=face)


def _mark_failed(ax, failed: pd.DataFrame, x: str, colors: dict[str, str], y_frac: float) -> None:
    """An × at each failed run's x, at height ``y_frac`` of the axes, with its status."""
    trans = ax.get_xaxis_transform()  # x in data units, y in axes fraction
    for _, run in failed.iterrows():
        color = colors.get(run["_label"], "black")
        ax.plot(float(run[x]), y_frac, "x", color=color, markersize=10, mew=2.5, transform=trans)
        ax.annotate(
            run["status"],
            (float(run[x]), y_frac),
            xycoords=trans,
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            color=color,
        )


def _legend(fig: Figure, colors: dict[str, str], styles: list[tuple[str, str]], failed: bool) -> None:
    handles = [Line2D([], [], color=c, marker="o", label=lbl) for lbl, c in colors.items()]
    if len(styles) > 1:
        handles += [Line2D([], [], color="black", linestyle=s, label=name) for name, s in styles]
    if failed:
        handles.append(
            Line2D(
                [], [], color="black", marker="x", linestyle="", mew=2.5, label="failed run (status above ×)"
            )
        )
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8)


def _on_device(df: pd.DataFrame) -> str:
    names = df["device_name"].dropna().unique() if "device_name" in df else []
    return f" on {names[0]}" if len(names) == 1 else ""


def line_figure(
    df: pd.DataFrame,
    *,
    x: str,
    ys: list[tuple[str, str, str]],
    series: str,
    title: str,
    xlabel: str,
    ylabel: str,
    facet: str = "model",
    fail_y: float = 0.06,
) -> Figure:
    """Lines of ``ys`` against ``x``, one per ``series`` label, one panel per ``facet`` value.

    Args:
        ys: ``(column, linestyle, name)``; the first column decides which runs count as data.
        fail_y: height (fraction of the axes) of the × that marks a failed run.

    Raises:
        PlotSkipped: when no ok run has both ``x`` and the first ``ys`` column.
    """
    data = df[df[x].notna() & df[facet].notna()].copy()
    data["_label"] = series_labels(data, facet=facet, x=x, series=series)
    ok = data[(data["status"] == "ok") & data[ys[0][0]].notna()]
    if ok.empty:
        raise PlotSkipped(f"no ok run has both {x} and {ys[0][0]}")
    failed = data[data["status"] != "ok"]
    labels = sorted(set(ok["_label"]) | set(failed["_label"]))
    colors = {lbl: _COLORS[i % len(_COLORS)] for i, lbl in enumerate(labels)}
    names = sorted(set(ok[facet]) | set(failed[facet]), key=str)  # panels with something to show
    fig, axes = _grid(len(names), title + _on_device(data))
    for ax, name in zip(axes, names, strict=True):
        _draw_lines(ax, ok[ok[facet] == name], x, [(c, s) for c, s, _ in ys], colors)
        _mark_failed(ax, failed[failed[facet] == name], x, colors, fail_y)
        _x_axis(ax, data.loc[data[facet] == name, x], xlabel)
        ax.set_ylim(bottom=0)
        ax.set(title=str(name), ylabel=ylabel)
        ax.grid(alpha=0.3)
    _legend(fig, colors, [(n, s) for _, s, n in ys], failed=not failed.empty)
    return fig


def plot_tflops_vs_micro_batch(df: pd.DataFrame) -> Figure:
    """TFLOPs per device (hardware FLOPs, 1e12 FLOP/s) vs micro batch size, a line per backend,
    a panel per model. Raises PlotSkipped when no ok run has TFLOPs."""
    return line_figure(
        df,
        x="micro_batch_size",
        ys=[("tflops_per_device", "-", "TFLOPs")],
        series="backend",
        title="TFLOPs per device vs micro batch size",
        xlabel="micro batch size (sequences per rank)",
        ylabel="TFLOPs per device (10¹² FLOP/s)",
    )


def plot_memory_vs_micro_batch(df: pd.DataFrame) -> Figure:
    """Peak GPU memory per rank (GiB; allocated solid, reserved dashed) vs micro batch size, a
    line per backend, a panel per model. Raises PlotSkipped when no run recorded GPU memory."""
    if not df["peak_cuda_allocated_gib"].notna().any():
        raise PlotSkipped("no run recorded peak GPU memory (CPU runs record none)")
    df = df[df["device_name"].fillna("").str.lower() != "cpu"]  # their × would mean nothing here
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
    model. Raises PlotSkipped unless some model was run at two or more sequence lengths."""
    ok = df[(df["status"] == "ok") & df["tokens_per_s"].notna()]
    per_model = ok.groupby("model")["seq_len"].nunique()
    if per_model.empty or per_model.max() < 2:
        lengths = ", ".join(str(v) for v in sorted(ok["seq_len"].dropna().unique())) or "none"
        raise PlotSkipped(f"the sweep does not vary seq_len within a model (seq_len of ok runs: {lengths})")
    return line_figure(
        df,
        x="seq_len",
        ys=[("tokens_per_s", "-", "tokens/s")],
        series="attention",
        title="Tokens per second vs sequence length",
        xlabel="sequence length (tokens)",
        ylabel="tokens per second (all ranks)",
    )


PLOTS: dict[str, Callable[[pd.DataFrame], Figure]] = {
    "tflops_vs_micro_batch": plot_tflops_vs_micro_batch,
    "memory_vs_micro_batch": plot_memory_vs_micro_batch,
    "tokens_vs_seq_len": plot_tokens_vs_seq_len,
}
"""Plot name (the PNG file's stem) -> function."""


def make_plots(df: pd.DataFrame) -> tuple[dict[str, Figure], dict[str, str]]:
    """Every plot of :data:`PLOTS` the data supports: ``(figures by name, skip reasons by name)``."""
    figures, skipped = {}, {}
    for name, plot in PLOTS.items():
        try:
            figures[name] = plot(df)
        except PlotSkipped as exc:
            skipped[name] = str(exc)
    return figures, skipped


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes (Agg, :data:`DPI` dots per inch)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def data_uri(fig: Figure) -> str:
    """``data:image/png;base64,...`` for an ``<img src>`` in a self-contained HTML file."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")


def write_pngs(figures: dict[str, Figure], out_dir: str | Path) -> dict[str, Path]:
    """Write each figure to ``out_dir/NAME.png`` (the folder is created); the paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / f"{name}.png" for name in figures}
    for name, fig in figures.items():
        paths[name].write_bytes(png_bytes(fig))
    return paths


def save_plots(df: pd.DataFrame, out_dir: str | Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Write ``out_dir/NAME.png`` for each supported plot; ``(paths by name, skip reasons by name)``."""
    figures, skipped = make_plots(df)
    return write_pngs(figures, out_dir), skipped
