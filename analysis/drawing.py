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

import pandas as pd
from matplotlib import rcParams
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.textpath import TextPath

from analysis.catalogue import RANK_METRIC, header
from analysis.query import SETUP_COLUMNS, normalize
from analysis.sanitize import MAX_LABEL, printable, shorten
from analysis.sanitize import label as _bounded
from flopsweep.columns import LAYOUT_COLUMNS

DPI = 100
MAX_PANELS = 9
"""Most panels (models) in one figure; the rest are named as left out in its title."""
MAX_BARS = 40
"""The step-breakdown plot shows at most this many runs."""
TITLE_FILL = 0.92
"""Share of the figure (or panel) width a title line may take; the rest is margin."""
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
_MARKERS = ["o", "s", "^", "D", "v"]
"""After every 10 series the marker changes, so that no two series look alike."""


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


def _text_width_in(text: str, prop: FontProperties) -> float:
    """Width in inches of ``text`` (literal: ``$`` escaped by :func:`plain`) drawn in ``prop``."""
    return TextPath((0, 0), text, prop=prop).get_extents().width / 72  # points -> inches


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
            cut = next(
                n for n in range(len(word) - 1, 0, -1) if _text_width_in(word[:n], prop) <= width_in or n == 1
            )
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


def series_labels(df: pd.DataFrame, *, x: str, series: str) -> pd.Series:
    """One legend label per row: the ``series`` value (``backend`` with its ZeRO stage), plus
    ``short=value`` for every other set-up column that varies within ``df`` (one panel)."""
    fixed = {"model", x, series, "zero_stage" if series == "backend" else series}
    extras = [c for c in SETUP_COLUMNS if c in df and c not in fixed and df[c].nunique(dropna=False) > 1]
    # The layout label (not its degrees) names a line where it tells apart runs of one world size
    # (a layout sweep); in a data-parallel scaling sweep it only follows the world size (dp1, dp2).
    degrees = LAYOUT_COLUMNS
    extras = [c for c in extras if c not in degrees or c == "layout" and _varies_per_world(df, c)]
    out = _base_label(df, series)
    for c in extras:
        as_text = normalize if c != "layout" else lambda v: "" if pd.isna(v) else str(v)  # keeps 1F1B
        text = df[c].astype(object).map(as_text)
        out = out + text.map(lambda v, c=c: f", {header(c)}={short(v)}" if v else "")
    return out.map(lambda text: plain(shorten(text, 2 * MAX_LABEL)))


def _varies_per_world(df: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` takes two values (a blank counts) among the rows of one world size."""
    if "world_size" not in df:
        return df[column].nunique(dropna=False) > 1
    text = df[column].astype(object).map(lambda v: "" if pd.isna(v) else str(v))
    return bool(text.groupby(df["world_size"].astype(object).map(str)).nunique().gt(1).any())


def _legend_cols(labels: list[str]) -> int:
    """Two legend columns for short labels, one for long ones."""
    return 2 if max((len(lbl) for lbl in labels), default=0) <= 40 else 1


def _grid(n: int, title: str, labels: list[str]) -> tuple[Figure, list]:
    """Panels sized so that a legend of ``labels`` (under each panel) fits: about 0.16 in
    per legend row and 0.055 in per character of the longest label."""
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    legend_cols = _legend_cols(labels)
    rows = math.ceil((len(labels) + 3) / legend_cols)  # + line styles and the failed-run entry
    width = max(5.2, legend_cols * (0.6 + 0.055 * max((len(lbl) for lbl in labels), default=0)))
    height = 3.8 + 0.16 * rows
    fig = Figure(figsize=(width * ncols, height * nrows + 0.9), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    set_title(fig, title)
    return fig, axes[:n]


def _x_axis(ax, values: pd.Series, label: str) -> None:
    xs = sorted({float(v) for v in values.dropna()})
    if xs and xs[0] > 0 and xs[-1] / xs[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [plain(f"{v:g}") for v in xs])
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
    ncols = _legend_cols(labels)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols, fontsize=7)


def _on_device(df: pd.DataFrame) -> str:
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
    names = data[facet].drop_duplicates()
    chosen = choose_panels(data, facet)
    if len(chosen) < len(names):
        title += f" ({len(chosen)} of {len(names)} {facet}s, best {header(RANK_METRIC)} first)"
    data = data[data[facet].isin(chosen)]
    shown = {
        name: sub.assign(_label=series_labels(sub, x=x, series=series)) for name, sub in data.groupby(facet)
    }
    labels = sorted({lbl for p in shown.values() for lbl in p["_label"]})
    colors = {lbl: _COLORS[i % len(_COLORS)] for i, lbl in enumerate(labels)}
    markers = {lbl: _MARKERS[i // len(_COLORS) % len(_MARKERS)] for i, lbl in enumerate(labels)}
    fig, axes = _grid(len(shown), title + _on_device(data), labels)
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
