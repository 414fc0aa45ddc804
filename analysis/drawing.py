"""The drawing kit of the plots (:mod:`analysis.plots`): figures and panels, titles wrapped to their
width, series labels, lines, failed runs' marks, legends, PNG bytes.

Figures are built with :class:`matplotlib.figure.Figure` directly, never pyplot, so no GUI backend or
global figure state is involved (the Agg canvas renders PNG). Every text from a record is escaped for
matplotlib (:func:`plain`) and bounded (:func:`short`).
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections.abc import Sequence
from typing import Literal

import pandas as pd
from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont
from matplotlib.lines import Line2D
from matplotlib.textpath import TextPath

from analysis.catalogue import RANK_METRIC, header
from analysis.query import SETUP_COLUMNS, normalize
from analysis.sanitize import MAX_LABEL, printable, shorten
from analysis.sanitize import label as _bounded
from flopsweep.columns import LAYOUT_COLUMNS
from flopsweep.text import figure

DPI = 100
MAX_PANELS = 9
"""Most panels (models) in one figure; the rest are named as left out in its title."""
MAX_BARS = 40
"""The step-breakdown plot shows at most this many runs."""
TITLE_FILL = 0.92
"""Share of the figure (or panel) width a title line may take; the rest is margin."""
COLORS = [
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
"""The series colours, in order (matplotlib's ``tab10``)."""
MARKERS = ["o", "s", "^", "D", "v"]
"""The series markers: series ``i`` has colour ``COLORS[i % 10]`` and marker ``MARKERS[i // 10 % 5]``,
so after every 10 series the marker changes and no two of the first 50 look alike."""


class PlotSkipped(Exception):
    """The data does not support a plot; ``str(exc)`` says why."""


def plain(text: object) -> str:
    """``text`` for matplotlib as literal characters: control characters escaped
    (:func:`analysis.sanitize.printable`) and ``$`` escaped, so that no mathtext is parsed (a
    model named ``$\\undefinedmacro{$`` would otherwise fail when the figure is drawn)."""
    return printable(text).replace("$", r"\$")


def short(text: object) -> str:
    """A record's text (a model, backend or device name, a status) as a plot label: at most
    :data:`analysis.sanitize.MAX_LABEL` characters (:func:`analysis.sanitize.label`), so that a
    name of hundreds of characters costs neither minutes of layout nor a huge canvas."""
    return _bounded(text)


_WIDTHS: dict[tuple, float] = {}
""":func:`_text_width_in`'s widths by text and font (what :class:`~matplotlib.textpath.TextPath`
depends on); emptied past :data:`_MAX_WIDTHS` entries. A path's extents walk every Bezier segment of
every glyph in Python (about 8 ms for a 60-character title); a report measures its titles again for
each figure that carries one."""

_MAX_WIDTHS = 4096


def _text_width_in(text: str, prop: FontProperties) -> float:
    """Width in inches of ``text`` (literal: ``$`` escaped by :func:`plain`) drawn in ``prop``."""
    font = (tuple(prop.get_family()), prop.get_slant(), prop.get_variant(), prop.get_weight())
    font += (prop.get_stretch(), prop.get_size_in_points(), prop.get_file(), prop.get_math_fontfamily())
    key = (text, font, findfont(prop))
    key += (rcParams["text.hinting_factor"], rcParams["text.kerning_factor"])
    if (width := _WIDTHS.get(key)) is None:
        if len(_WIDTHS) >= _MAX_WIDTHS:
            _WIDTHS.clear()
        width = _WIDTHS[key] = TextPath((0, 0), text, prop=prop).get_extents().width / 72  # points -> inches
    return width


def _widest_fitting_prefix(word: str, width_in: float, prop: FontProperties) -> int:
    """The length of the longest prefix of ``word`` (1 at least) no wider than ``width_in`` inches: a
    binary search, as a prefix's extents (the union of its glyphs' outlines) never shrink as it grows."""
    fits, wide = 1, len(word)  # word[:wide] is known to be too wide
    while wide - fits > 1:
        mid = (fits + wide) // 2
        if _text_width_in(word[:mid], prop) <= width_in:
            fits = mid
        else:
            wide = mid
    return fits


def wrap_to_width(text: str, width_in: float, prop: FontProperties) -> str:
    """``text`` broken at spaces into lines no wider than ``width_in`` inches in the font ``prop``
    (measured with :class:`matplotlib.textpath.TextPath`, no renderer needed); a word wider
    than a line is cut into pieces that fit."""
    lines: list[str] = []
    for word in text.split(" "):
        trial = f"{lines[-1]} {word}" if lines else word
        if lines and _text_width_in(trial, prop) <= width_in:
            lines[-1] = trial
            continue
        while len(word) > 1 and _text_width_in(word, prop) > width_in:
            cut = _widest_fitting_prefix(word, width_in, prop)
            if word[cut - 1] == "\\":
                cut = max(cut - 1, 1)  # never split an escaped dollar from its backslash
            lines.append(word[:cut])
            word = word[cut:]
        lines.append(word)
    return "\n".join(lines)


def set_title(fig: Figure, title: str, ax=None) -> None:
    """``title`` (escaped with :func:`plain`) as the figure's suptitle, or ``ax``'s title, wrapped
    to the width it has (:data:`TITLE_FILL` of the figure or of the panel), so that no line
    runs past the figure's edge (under constrained layout a wrapped title gets its rows)."""
    if ax is None:
        prop = FontProperties(size=rcParams["figure.titlesize"], weight=rcParams["figure.titleweight"])
        fig.suptitle(wrap_to_width(plain(title), TITLE_FILL * fig.get_figwidth(), prop))
        return
    prop = FontProperties(size=rcParams["axes.titlesize"], weight=rcParams["axes.titleweight"])
    width = ax.get_position().width * fig.get_figwidth()
    ax.set_title(wrap_to_width(plain(title), TITLE_FILL * width, prop))


def _base_label(df: pd.DataFrame, column: str) -> pd.Series:
    text = df[column].astype(object).map(lambda v: "" if pd.isna(v) else short(v))
    if column == "backend" and "zero_stage" in df:
        zero = df["zero_stage"].astype(object).map(lambda v: "" if pd.isna(v) else f" ZeRO-{v}")
        text = text + zero
    return text


def differing_columns(df: pd.DataFrame, *, x: str | None, series: str) -> list[str]:
    """The set-up columns (:data:`analysis.query.SETUP_COLUMNS`) that tell the rows of ``df`` apart,
    beside ``model``, ``x`` and ``series`` (``backend`` brings its ZeRO stage): a column counts when
    the rows that set it (a blank is a knob the set-up does not have: FSDP's ZeRO++ keys) take two or
    more values, so a DeepSpeed-only knob that every DeepSpeed row sets alike names no one. The layout
    degrees never count; the layout label counts where it tells apart rows of one world size (a layout
    sweep), not where it only follows the world size (a data-parallel scaling sweep: dp1, dp2)."""
    fixed = {"model", x, series, "zero_stage" if series == "backend" else series}
    out = []
    for c in SETUP_COLUMNS:
        if c not in df or c in fixed or (c in LAYOUT_COLUMNS and c != "layout"):
            continue
        if c == "layout":
            if _varies_per_world(df, c):
                out.append(c)
        elif df[c].dropna().astype(str).nunique() > 1:
            out.append(c)
    return out


def series_labels(
    df: pd.DataFrame, *, x: str | None, series: str, keep: Sequence[str] = (), series_always: bool = True
) -> pd.Series:
    """One legend label per row: the ``series`` value (``backend`` with its ZeRO stage), plus
    ``short=value`` for every set-up column that tells the rows of ``df`` apart
    (:func:`differing_columns`): only the knobs that differ, never every knob a backend has.
    ``keep``: columns named wherever a row sets them (the layout of a figure whose other panels
    differ in it: a panel of pipeline runs alone still says it is one). ``series_always=False``
    leaves the ``series`` value out when every row shares it and some knob differs (a layout sweep
    of FSDP: ``layout=dp4``, not ``fsdp, layout=dp4``)."""
    out = _base_label(df, series)
    named = differing_columns(df, x=x, series=series)
    if not series_always and named and out.nunique() == 1:
        out = pd.Series("", index=df.index)  # one backend for all: the knobs that differ name them
    for c in [*named, *(k for k in keep if k in df and k not in named)]:
        as_text = normalize if c != "layout" else lambda v: "" if pd.isna(v) else str(v)  # keeps 1F1B
        text = df[c].astype(object).map(as_text)
        out = out + text.map(lambda v, c=c: f", {header(c)}={short(v)}" if v else "")
    return out.map(lambda text: plain(shorten(text.strip(", "), 2 * MAX_LABEL)))


ChartKind = Literal["bar", "line"]

FOLLOWS_X: dict[str, tuple[str, ...]] = {
    "micro_batch_size": ("grad_accum",),
    "world_size": LAYOUT_COLUMNS,
}
"""Set-up columns that follow the x axis rather than name a set-up: the grad accumulation that a
global batch sets from the micro batch, the layout that follows the rank count."""


def chart_kind(df: pd.DataFrame, x: str = "micro_batch_size") -> ChartKind:
    """The chart a sweep calls for: ``"line"`` when some set-up (rows alike on every set-up column
    but ``x`` and what follows it, :data:`FOLLOWS_X`) was run at two or more values of the numeric
    axis ``x`` (a micro batch sweep), ``"bar"`` when every set-up has one ``x`` (the swept axes are
    categories: backend=ddp,fsdp,zero3, a layout sweep): one bar per set-up, not a stack of points
    on one vertical line. Only rows with an ``x`` count; failed runs count (their × sits at their x)."""
    rows = df[df[x].notna()] if x in df else df.iloc[:0]
    if rows.empty:
        return "bar"
    keys = [c for c in SETUP_COLUMNS if c in rows and c != x and c not in FOLLOWS_X.get(x, ())]
    if not keys:
        return "line" if rows[x].nunique() > 1 else "bar"
    named = rows[keys].astype(object).map(lambda v: "" if pd.isna(v) else str(v))
    per_setup = rows[x].groupby([named[c] for c in keys], sort=False).nunique()
    return "line" if bool(per_setup.gt(1).any()) else "bar"


def _varies_per_world(df: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` takes two values (a blank counts) among the rows of one world size."""
    if "world_size" not in df:
        return df[column].nunique(dropna=False) > 1
    text = df[column].astype(object).map(lambda v: "" if pd.isna(v) else str(v))
    return bool(text.groupby(df["world_size"].astype(object).map(str)).nunique().gt(1).any())


def legend_columns(labels: list[str]) -> int:
    """Legend columns for series ``labels``: 2 when the longest is at most 40 characters, else 1."""
    return 2 if max((len(lbl) for lbl in labels), default=0) <= 40 else 1


def panel_grid(n: int, title: str, labels: list[str]) -> tuple[Figure, list]:
    """A figure titled ``title`` (:func:`set_title`) with ``n`` panels, at most 3 a row, and the
    panels' axes (``n`` of them, row by row; spare grid cells hidden). Panels are sized so that a
    legend of ``labels`` under each fits: at least 5.2 in wide and 3.8 in tall, plus about 0.16 in
    per legend row and 0.055 in per character of the longest label."""
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    legend_cols = legend_columns(labels)
    rows = math.ceil((len(labels) + 3) / legend_cols)  # + line styles and the failed-run entry
    width = max(5.2, legend_cols * (0.6 + 0.055 * max((len(lbl) for lbl in labels), default=0)))
    height = 3.8 + 0.16 * rows
    fig = Figure(figsize=(width * ncols, height * nrows + 0.9), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    set_title(fig, title)
    return fig, axes[:n]


TICK_GAP = 1 / 14
"""Least distance between two labelled x ticks, as a share of the axis span (log or linear as drawn):
a tick closer to the last labelled one keeps its mark without a label, so ``25 2728`` never happens."""


def spaced_ticks(xs: Sequence[float], *, log: bool) -> list[bool]:
    """Which of the sorted ticks ``xs`` get a label: the first, then each at least :data:`TICK_GAP` of
    the span (in log2 on a log axis) from the last labelled one; the last tick is labelled in place of
    a too-close one before it."""
    pos = [math.log2(v) for v in xs] if log else [float(v) for v in xs]
    if len(pos) < 2:
        return [True] * len(pos)
    gap = TICK_GAP * (pos[-1] - pos[0])
    shown, last = [True], pos[0]
    for p in pos[1:]:
        shown.append(p - last >= gap)
        last = p if shown[-1] else last
    if not shown[-1]:  # the largest value is labelled; the closest labelled one before it gives way
        k = max(i for i in range(len(pos) - 1) if shown[i])  # never the first: the span is >= gap
        shown[k], shown[-1] = False, True
    return shown


def _x_axis(ax, values: pd.Series, label: str) -> None:
    xs = sorted({float(v) for v in values.dropna()})
    log = bool(xs and xs[0] > 0 and xs[-1] / xs[0] >= 4)
    if log:
        ax.set_xscale("log", base=2)
    shown = spaced_ticks(xs, log=log)
    ax.set_xticks(xs, [plain(figure(v, 6)) if s else "" for v, s in zip(xs, shown, strict=True)])
    ax.minorticks_off()
    ax.margins(x=0.1)  # room for the status text beside an × at the last x
    ax.set_xlabel(label)


def _draw_lines(
    ax, ok: pd.DataFrame, x: str, ys: list[tuple[str, str]], colors: dict[str, str], markers: dict[str, str]
) -> None:
    """One line per label (mean of repeated ok runs at each x), with the 95% interval as an error
    bar where the column has one (``<y>_ci_low``/``_ci_high``); ``ys`` pairs a column with a style.
    Failed runs are never drawn here: :func:`_mark_failed` puts an x on the axis, with the status."""
    for label, runs in ok.groupby("_label", sort=True):
        for y, style in ys:
            pts = runs.groupby(x)[y].mean().dropna().sort_index()
            face = colors[label] if style == "-" else "none"  # hollow markers on the secondary series
            if f"{y}_ci_low" in runs:  # the 95% interval (analysis.spread) as an error bar
                low = runs.groupby(x)[f"{y}_ci_low"].min().reindex(pts.index)
                high = runs.groupby(x)[f"{y}_ci_high"].max().reindex(pts.index).clip(upper=2 * pts.max())
                err = [
                    (pts - low).clip(lower=0).fillna(0).values,
                    (high - pts).clip(lower=0).fillna(0).values,
                ]
                ax.errorbar(
                    pts.index.astype(float), pts.values, yerr=err, fmt="none", ecolor=colors[label], capsize=3
                )
            ax.plot(
                pts.index.astype(float),
                pts.values,
                style,
                marker=markers[label],
                color=colors[label],
                mfc=face,
            )


def _mark_failed(ax, failed: pd.DataFrame, x: str, colors: dict[str, str], y_frac: float) -> None:
    """An × at each failed run's x, at height ``y_frac`` of the axes (stacked when several
    fail at one x), with its status above it."""
    trans = ax.get_xaxis_transform()  # x in data units, y in axes fraction
    step = 0.09 if y_frac < 0.5 else -0.09
    for _, group in failed.groupby(x):
        for k, (_, run) in enumerate(group.iterrows()):
            color, y = colors.get(run["_label"], "black"), y_frac + k * step
            ax.plot(float(run[x]), y, "x", color=color, markersize=9, mew=2.5, transform=trans)
            ax.annotate(
                plain(short(run["status"])),
                (float(run[x]), y),
                xycoords=trans,
                xytext=(9, -3),
                textcoords="offset points",
                fontsize=7,
                color=color,
            )


def _legend(
    ax,
    labels: list[str],
    colors: dict[str, str],
    markers: dict[str, str],
    styles: list[tuple[str, str]],
    failed: bool,
) -> None:
    """A legend under the panel: its series, the line styles when several, the failed-run ×."""
    handles = [Line2D([], [], color=colors[lbl], marker=markers[lbl], label=lbl) for lbl in labels]
    if len(styles) > 1:
        handles += [Line2D([], [], color="black", linestyle=s, label=name) for name, s in styles]
    if failed:
        cross = Line2D([], [], color="black", marker="x", linestyle="", mew=2.5, label="failed run (status)")
        handles.append(cross)
    ncols = legend_columns(labels)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols, fontsize=7)


def on_device(df: pd.DataFrame) -> str:
    """`` on NAME`` (a title's ending) when every run with a ``device_name`` names the same device
    (bounded: :func:`short`), else ``""`` (none, or several devices)."""
    names = df["device_name"].dropna().unique() if "device_name" in df else []
    return f" on {short(names[0])}" if len(names) == 1 else ""


def choose_panels(data: pd.DataFrame, facet: str, limit: int = MAX_PANELS) -> list:
    """The ``facet`` values to draw, at most ``limit``: those whose best ok
    :data:`analysis.load.RANK_METRIC` is highest (then the most runs, then by name)."""
    names = data[facet].drop_duplicates().tolist()
    if len(names) <= limit:
        return sorted(names, key=str)
    ok = data[data["status"].eq("ok")]
    score = ok.groupby(facet)[RANK_METRIC].max() if RANK_METRIC in ok else pd.Series(dtype=float)
    count = data.groupby(facet).size()
    key = {
        n: (-score.get(n, float("-inf")) if pd.notna(score.get(n)) else float("inf"), -count[n], str(n))
        for n in names
    }
    return sorted(sorted(names, key=key.get)[:limit], key=str)


def panels_shown(data: pd.DataFrame, facet: str, title: str) -> tuple[pd.DataFrame, str]:
    """``data`` cut to the panels :func:`choose_panels` draws, and ``title`` with how many of how many
    where some are left out (``... (9 of 12 models, best tokens/s first)``), as every plot of panels
    says it."""
    names = data[facet].drop_duplicates()
    chosen = choose_panels(data, facet)
    if len(chosen) < len(names):
        title += f" ({len(chosen)} of {len(names)} {facet}s, best {header(RANK_METRIC)} first)"
    return data[data[facet].isin(chosen)], title


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

    At most :data:`MAX_PANELS` panels (:func:`choose_panels`); the title says how many
    ``facet`` values were left out.

    Raises:
        PlotSkipped: when no ok run has both ``x`` and the first ``ys`` column.
    """
    data = df[df[x].notna() & df[facet].notna()]
    y0 = ys[0][0]
    data = data[data["status"].ne("ok") | data[y0].notna()]  # a panel needs a point or a failed run
    if _ok(data, y0).empty:
        raise PlotSkipped(f"no ok run has both {x} and {y0}")
    data, title = panels_shown(data, facet, title)
    keep = [c for c in ("layout",) if c in differing_columns(data, x=x, series=series)]
    shown = {
        name: sub.assign(_label=series_labels(sub, x=x, series=series, keep=keep))
        for name, sub in data.groupby(facet)
    }
    labels = sorted({lbl for p in shown.values() for lbl in p["_label"]})
    colors = {lbl: COLORS[i % len(COLORS)] for i, lbl in enumerate(labels)}
    markers = {lbl: MARKERS[i // len(COLORS) % len(MARKERS)] for i, lbl in enumerate(labels)}
    fig, axes = panel_grid(len(shown), title + on_device(data), labels)
    for ax, (name, panel) in zip(axes, shown.items(), strict=True):
        ok, failed = _ok(panel, ys[0][0]), panel[panel["status"] != "ok"]
        _draw_lines(ax, ok, x, [(c, s) for c, s, _ in ys], colors, markers)
        _mark_failed(ax, failed, x, colors, fail_y)
        _x_axis(ax, panel[x], xlabel)
        ax.set_ylim(bottom=0)
        set_title(fig, short(name), ax)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        used = sorted(set(ok["_label"]) | set(failed["_label"]))
        _legend(ax, used, colors, markers, [(n, s) for _, s, n in ys], failed=not failed.empty)
    return fig


def _ok(df: pd.DataFrame, column: str) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df[column].notna()]


def png_bytes(fig: Figure, dpi: int = DPI, *, palette: bool = False) -> bytes:
    """The figure as PNG bytes (Agg, ``dpi`` dots per inch: pixels = figure inches x dpi).

    ``palette=True`` stores it with a 256-colour adaptive palette (Pillow's median cut, which
    matplotlib already depends on) instead of 8-bit RGBA: a plot's flat colours and antialiased
    edges look the same, in about a third of the bytes (the notebook's H200 plots: 1.64 MB of
    RGBA PNGs, 0.57 MB as palette PNGs). The figure's white background is kept; transparency is not.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    if not palette:
        return buf.getvalue()
    from PIL import Image

    buf.seek(0)
    with Image.open(buf) as image:
        quantized = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue()


def data_uri(fig: Figure) -> str:
    """``data:image/png;base64,...`` for an ``<img src>`` in a self-contained HTML file."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")


BAR_LABEL_WIDTH = 34
"""Characters per line of a set-up's label beside its bar (:func:`bar_figure`; longer labels wrap)."""


def _bar_rows(panel: pd.DataFrame, y: str, mark: str | None = None) -> pd.DataFrame:
    """One row per set-up label of ``panel``: the mean ``y`` of its ok runs with the widest 95%
    interval among them (``lo``, ``hi``; NaN without one), and the status of a failed set-up (one
    with no ok run), best first, failed set-ups last."""
    rows = []
    for label, runs in panel.groupby("_label", sort=False):
        ok = runs[runs["status"].eq("ok") & runs[y].notna()]
        lo = ok[f"{y}_ci_low"].min() if f"{y}_ci_low" in ok else math.nan
        hi = ok[f"{y}_ci_high"].max() if f"{y}_ci_high" in ok else math.nan
        status = "ok" if not ok.empty else str(runs["status"].iloc[0])
        marked = ok[mark].mean() if mark and mark in ok else math.nan
        rows.append(
            {"label": label, "value": ok[y].mean(), "lo": lo, "hi": hi, "status": status, "mark": marked}
        )
    out = pd.DataFrame(rows)
    return out.sort_values("value", ascending=False, na_position="last", kind="stable").reset_index(drop=True)


def bar_figure(
    df: pd.DataFrame,
    *,
    y: str,
    series: str,
    title: str,
    xlabel: str,
    facet: str = "model",
    mark: tuple[str, str] | None = None,
) -> Figure:
    """One horizontal bar per set-up (its mean ``y`` over ok runs, the 95% interval as an error bar
    where the column has one), the best on top, one panel per ``facet`` value (at most
    :data:`MAX_PANELS`, :func:`choose_panels`). A set-up is named by ``series`` and the knobs that
    differ between the set-ups of the whole figure (:func:`series_labels`), wrapped beside its bar, so
    labels never overlap; a set-up with no ok run gets an empty bar and its status (``oom``).
    ``mark``: ``(column, name)`` drawn as a black tick on each bar (reserved beside allocated memory).

    Raises:
        PlotSkipped: when no ok run has ``y``.
    """
    data = df[df[facet].notna() & (df["status"].ne("ok") | df[y].notna())]
    if _ok(data, y).empty:
        raise PlotSkipped(f"no ok run has {y}")
    data, title = panels_shown(data, facet, title)
    data = data.assign(_label=series_labels(data, x=None, series=series, series_always=False))
    panels = {name: _bar_rows(sub, y, mark[0] if mark else None) for name, sub in data.groupby(facet)}
    colors = {lbl: COLORS[i % len(COLORS)] for i, lbl in enumerate(sorted(set(data["_label"])))}
    wrapped = {
        lbl: textwrap.fill(lbl, BAR_LABEL_WIDTH, break_long_words=False)
        for p in panels.values()
        for lbl in p["label"]
    }
    lines = [sum(wrapped[lbl].count("\n") + 1 for lbl in p["label"]) for p in panels.values()]
    heights = [0.9 + 0.3 * max(n, len(p)) for n, p in zip(lines, panels.values(), strict=True)]
    fig = Figure(figsize=(9, sum(heights) + 0.9), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights).ravel().tolist()
    set_title(fig, title + on_device(data))
    for ax, (name, bars) in zip(axes, panels.items(), strict=True):
        _draw_bars(ax, bars, wrapped, colors)
        if mark and bars["mark"].notna().any():
            ax.plot(
                bars["mark"], bars.index, "|", color="black", markersize=16, mew=2.5, label=plain(mark[1])
            )
            ax.legend(loc="lower right", fontsize=7)
        ax.set_xlabel(xlabel)
        set_title(fig, short(name), ax)
    return fig


def _draw_bars(ax, bars: pd.DataFrame, wrapped: dict[str, str], colors: dict[str, str]) -> None:
    """The bars of :func:`bar_figure`'s panel: values, intervals, the value (or status) at each base;
    a set-up keeps its colour (``colors``, by label) in every panel and every bar figure of a report."""
    rows = list(range(len(bars)))
    values = bars["value"].fillna(0.0)
    pairs = zip(bars["label"], bars["status"], strict=True)
    faces = [colors[lbl] if status == "ok" else "white" for lbl, status in pairs]
    ax.barh(rows, values, color=faces, edgecolor="black", linewidth=0.5)
    has_ci = bars["lo"].notna() & bars["hi"].notna()
    bounded = bars["hi"].where(bars["hi"].abs().lt(math.inf))  # an unbounded end (inf): no part of the scale
    top = float(pd.concat([bounded.where(has_ci, bars["value"]), bars["value"], bars["mark"]]).max())
    if has_ci.any():
        ci = bars[has_ci]
        high = ci["hi"].clip(upper=1.18 * top)  # an unbounded end runs off the axis
        err = [(ci["value"] - ci["lo"]).clip(lower=0), (high - ci["value"]).clip(lower=0)]
        ax.errorbar(ci["value"], ci.index, xerr=err, fmt="none", ecolor="black", capsize=3)
    for row, (value, status) in enumerate(zip(bars["value"], bars["status"], strict=True)):
        # the figure inside its bar, at the base: clear of the interval and of a mark at the end
        text, color = (f"{figure(value, 4)}", "white") if status == "ok" else (plain(short(status)), "black")
        ax.text(0.01 * top, row, text, va="center", fontsize=8, color=color, fontweight="bold")
    ax.set_yticks(rows, [wrapped[lbl] for lbl in bars["label"]], fontsize=8)  # labels are plain()
    ax.invert_yaxis()  # the best on top
    ax.set_xlim(0, 1.18 * top if top > 0 else 1)
    ax.grid(axis="x", alpha=0.3)
