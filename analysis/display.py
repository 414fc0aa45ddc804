"""Text forms of a runs DataFrame: the view, compact columns, the footer, csv/json/markdown.

Every output draws one :class:`View`: the columns with their specs (:data:`analysis.catalogue.SPECS`:
short header, legend line, number format) and the rows. The terminal and markdown tables
(:func:`render`), the HTML report (:mod:`analysis.report`) and the notebook's tables show its text
cells under its headers with its legend; csv and json write its rows under the full column names.
Blank cells stand for missing values: a failed run's metrics are blank, never 0.
"""

from __future__ import annotations

import csv
import math
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.catalogue import DROP_ORDER, OPTIONAL, SETUP_NAMES, SHORT, SPECS, TABLE_COLUMNS, header
from analysis.discover import MAX_FOLDERS
from analysis.sanitize import CSV_FORMULA_PREFIXES, csv_cell, markdown_cell, printable, shorten
from flopsweep.columns import SETUP_SPECS, ColumnSpec
from flopsweep.record import STATUSES
from flopsweep.strict_json import dumps as strict_dumps
from flopsweep.text import figure, plural
from flopsweep.tree import MAX_DEPTH, STOPPED, UNLISTED, folder_skipped

__all__ = [
    "CSV_FORMULA_PREFIXES",
    "SHORT",
    "View",
    "compact",
    "flat_pivot",
    "for_display",
    "legend",
    "render",
    "summary",
    "to_json",
]

MAX_CELL = 40
"""Longest text cell (characters) in the terminal and markdown tables; longer ones end in '…'."""

_SETUP = SETUP_NAMES
_SHOW = {spec.name: spec.show for spec in SETUP_SPECS}
_OPTIONAL = OPTIONAL  # shown only when some row has a value: metrics, the knobs of some options
_DROP_ORDER = DROP_ORDER  # hidden in this order to fit the width (ColumnSpec.hide)


HUGE = 1e15
"""From this magnitude a number is shown in scientific notation (``1.000e308``, not 309 digits and commas)."""
TINY = 1e-4
"""Below this magnitude (not 0) a number is shown in scientific notation (``1.23e-07``)."""


def spec_of(column: object) -> ColumnSpec:
    """The column's spec (:data:`analysis.catalogue.SPECS`); a column outside the catalogue (a pivot's
    model names, ``flags``) is shown under its own name, formatted by its values."""
    name = column if isinstance(column, str) else str(column)
    return SPECS.get(name) or ColumnSpec(name=name, header=name)


def _cell(spec: ColumnSpec, value: object) -> str:
    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return ""  # a failed run's metrics stay blank, never 0
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"  # an interval's unbounded end (analysis.spread), any format
    if isinstance(value, (int, float)) and abs(value) >= HUGE:  # 1e308: 1.000e308, not 309 digits
        return f"{float(value):.3e}".replace("e+", "e")
    if isinstance(value, (int, float)) and 0 < abs(value) < TINY and spec.format != "percent":
        return f"{figure(value)}"
    if spec.format == "thousands" and isinstance(value, (int, float)):
        return f"{value:,.0f}"
    if spec.format == "percent" and isinstance(value, (int, float)):
        return f"{value:.1%}"
    if spec.format == "times":
        return f"{value:.2f}x"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{figure(value, 4)}"
    return shorten(printable(value), MAX_CELL)  # no control sequence or line break from a record


@dataclass(frozen=True)
class View:
    """One table as every output draws it: ``rows`` (raw values, full column names) and the spec of
    each of its columns (header, legend line, format: :data:`analysis.catalogue.SPECS`)."""

    rows: pd.DataFrame

    @property
    def specs(self) -> list[ColumnSpec]:
        """The spec of each column of :attr:`rows`, in order."""
        return [spec_of(c) for c in self.rows.columns]

    def headers(self) -> list[object]:
        """The short headers, control characters escaped and cut to :data:`MAX_CELL`; a column named
        by something other than text (a pivot's) keeps its name."""
        return [
            shorten(printable(spec.header), MAX_CELL) if isinstance(c, str) else c
            for c, spec in zip(self.rows.columns, self.specs, strict=True)
        ]

    def cells(self) -> pd.DataFrame:
        """Text cells (:func:`_cell`: blank for missing, the spec's format, text escaped and cut to
        :data:`MAX_CELL`) under :meth:`headers`: the terminal, markdown, HTML and notebook tables."""
        cells = {
            c: [_cell(spec, v) for v in self.rows[c].astype(object)]
            for c, spec in zip(self.rows.columns, self.specs, strict=True)
        }
        return pd.DataFrame(cells, dtype=object).set_axis(self.headers(), axis=1)

    def legend(self, width: int = 0, columns: Sequence[object] | None = None) -> str:
        """``Legend: HEADER = description; ...`` for ``columns`` (default: every column) whose spec has
        a description, wrapped to ``width`` (0: one line); empty when none."""
        names = list(self.rows.columns) if columns is None else list(columns)
        items = [f"{s.header} = {s.description}" for s in map(spec_of, names) if s.description]
        if not items:
            return ""
        text = "Legend: " + "; ".join(items)
        return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) if width > 0 else text


def for_display(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells with short headers (:data:`SHORT`) for the terminal, markdown and HTML tables;
    control characters in cells and headers (a pivot's are model names) escaped
    (:func:`analysis.sanitize.printable`), long ones cut to :data:`MAX_CELL` characters:
    :meth:`View.cells`."""
    return View(df).cells()


FLAGS = "flags"
"""The default table's column of the checks a row failed (:func:`flags`); ``--columns``, ``--sort``
and ``--filter`` name it too (``--filter flags=check?``: the rows with that flag among theirs)."""


def flags(df: pd.DataFrame) -> pd.Series:
    """Per-row text naming the checks a row failed: ``dup-id``, ``tflops?`` and ``check?`` (left
    out of rankings; ``implausible`` says which figure), ``warn`` (the record has warnings); blank
    when none."""
    parts = []
    if "duplicate_run_id" in df:
        parts.append(df["duplicate_run_id"].fillna(False).astype(bool).map({True: "dup-id", False: ""}))
    if "tflops_mismatch" in df:
        parts.append(df["tflops_mismatch"].fillna(False).astype(bool).map({True: "tflops?", False: ""}))
    if "implausible" in df:
        parts.append(df["implausible"].notna().map({True: "check?", False: ""}))
    if "warnings" in df:
        parts.append(df["warnings"].notna().map({True: "warn", False: ""}))
    if "noise" in df:
        parts.append(df["noise"].fillna("").astype(str))
    if "not_significant" in df:
        parts.append(df["not_significant"].fillna(False).astype(bool).map({True: "tie?", False: ""}))
    if not parts:
        return pd.Series("", index=df.index)
    out = parts[0]
    for p in parts[1:]:
        out = (out + "," + p).str.strip(",")
    return out


def with_flags(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the default table's ``flags`` column (:func:`analysis.display.flags`, blank where a
    row has none), so that ``--columns``, ``--sort`` and ``--filter`` take it like any column it shows."""
    return df.assign(flags=flags(df).replace("", None))


def _codes(df: pd.DataFrame, column: str) -> np.ndarray:
    """``column``'s values as integer codes, one per distinct text (``str(value)``; a blank, ``None`` or
    NaN, is the text ``""``, a value of its own)."""
    text = df[column].astype(object).map(lambda v: "" if v is None or pd.isna(v) else str(v))
    return pd.factorize(text)[0]


def _pairs(group: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """One code per distinct (``group``, ``codes``) pair of a row, 0 up."""
    if not len(group):
        return group
    return pd.factorize(group * (int(codes.max()) + 1) + codes)[0]


def _group(df: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """A code per row, 0 up, one per distinct combination of the texts of ``columns`` (0 for every row
    when there are none)."""
    group = np.zeros(len(df), dtype=np.int64)
    for c in columns:
        group = _pairs(group, _codes(df, c))
    return group


def _splits(group: np.ndarray, codes: np.ndarray) -> bool:
    """Whether ``codes`` differ between two rows of one ``group``: the rows take more distinct
    (group, code) pairs than groups (both are codes 0 up)."""
    return bool(len(group)) and int(_pairs(group, codes).max()) > int(group.max())


def _tells_apart(df: pd.DataFrame, shown: list[str], column: str) -> bool:
    """Whether ``column`` differs (a blank counts as a value) between rows that agree on ``shown``."""
    return _splits(_group(df, shown), _codes(df, column))


def _setup_columns(df: pd.DataFrame) -> list[str]:
    """The default table's set-up columns: the ``table`` ones (the knobs of some options only when
    some row has a value), each ``varied`` one that takes two values, then, in declaration order,
    any other that tells apart rows the shown ones leave identical (``nnodes``, ``seed``, ...)."""
    shown = [
        c for c in _SETUP if c in df and _SHOW[c] == "table" and (c not in _OPTIONAL or df[c].notna().any())
    ]
    shown += [c for c in _SETUP if c in df and _SHOW[c] == "varied" and df[c].nunique(dropna=True) > 1]
    group = _group(df, shown)  # the rows that the shown columns leave identical share a code
    for c in _SETUP:
        if c in df and c not in shown and _splits(group, codes := _codes(df, c)):
            shown.append(c)
            group = _pairs(group, codes)
    return [c for c in _SETUP if c in shown]


def compact(df: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The columns worth a reader's screen: ``columns`` (default :data:`TABLE_COLUMNS`) less the
    optional ones that are blank in every row (and ``hfu`` where it equals ``mfu`` in every
    row: no recompute), plus ``speedup`` and a ``flags`` column when some row has them. By
    default the set-up columns are those of :func:`_setup_columns`: every set-up column that
    varies among the rows (precision, device, ...), and any that tells otherwise identical rows
    apart, so that no two rows look the same while their set-ups differ."""
    cols = list(columns or TABLE_COLUMNS)
    if columns is None:
        cols = _setup_columns(df) + [c for c in cols if c not in _SETUP]
        cols += [c for c in ("speedup",) if c in df]
        if "error" in df and df["status"].ne("ok").any():
            cols.append("error")  # why a run failed, cut to the cell width
        cols = [c for c in cols if c in df and (c not in _OPTIONAL or c in _SETUP or df[c].notna().any())]
        if "hfu" in cols and "mfu" in df and _same(df["hfu"], df["mfu"]):
            cols.remove("hfu")
    out = df[cols].copy()
    if columns is None and (f := flags(df)).ne("").any():
        out[FLAGS] = f
    return out


def _same(a: pd.Series, b: pd.Series) -> bool:
    both = a.notna() & b.notna()
    return bool(((a[both] - b[both]).abs() <= 1e-9 * b[both].abs()).all() and a.notna().eq(b.notna()).all())


def legend(columns: list[str], width: int = 0) -> str:
    """``Legend: HEADER = description; ...`` for the columns with a description (their specs:
    :data:`analysis.catalogue.SPECS`), wrapped to ``width`` (0: one line); empty when none."""
    return View(pd.DataFrame()).legend(width, columns)


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text cell and header (a pivot's are model names) made safe for a
    spreadsheet (:func:`analysis.sanitize.csv_cell`: a leading apostrophe before a formula
    character of :data:`CSV_FORMULA_PREFIXES`, leading white space looked through; carriage
    returns as line feeds), for CSV only; numbers are left as they are."""
    out = df.copy()
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    return out.set_axis([csv_cell(c) for c in out.columns], axis=1)


def to_csv(df: pd.DataFrame) -> str:
    """``df`` as CSV (RFC 4180) after :func:`csv_safe`, every text cell quoted
    (:data:`csv.QUOTE_NONNUMERIC`: a line break inside a cell never ends its row), numbers bare."""
    return csv_safe(df).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")


UNCOMPARABLE = ("device_name", "precision")
"""Set-up columns whose values make the rows' figures incomparable (a TFLOPs of an H200 beside one of an
H100; bf16 beside fp8, each against its own peak): :func:`fit_width` never hides one whose value differs
between the rows shown, even where another column already tells them apart (``--best-by model`` over
H100 and H200 records had hidden ``device``)."""

MIN_ERROR = 16
"""Fewest characters an ``error`` cell is cut to (the last an ellipsis) before the column is hidden to
fit the width: ``CUDA out of me…`` still says why a run failed."""


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()), default=0)


def drop_order(
    shown: pd.DataFrame, order: Sequence[str] | None = None, keep: Sequence[str] = ()
) -> list[str]:
    """The headers of ``shown`` (text cells, short headers) that :func:`fit_width` may hide, first to
    last: those blank in every row (any column: they say nothing), then those of ``order`` (full
    names; default :data:`_DROP_ORDER`) with one value in every row, then the rest of ``order``, and
    last ``error`` when some row has one (why a run failed is what its row tells). The columns of
    ``keep`` (full names) are never hidden."""
    kept = {header(c) for c in keep}
    names = [header(c) for c in (_DROP_ORDER if order is None else order)]
    names = [c for c in dict.fromkeys(names) if c in shown.columns and c not in kept]
    blank = [c for c in shown.columns if c not in kept and shown[c].eq("").all()]
    telling = [c for c in names if c == "error" and c not in blank]
    same = [c for c in names if c not in blank + telling and shown[c].nunique(dropna=False) <= 1]
    return blank + same + [c for c in names if c not in blank + telling + same] + telling


def fit_width(
    shown: pd.DataFrame,
    width: int,
    runs: pd.DataFrame | None = None,
    keep: Sequence[str] = (),
    order: Sequence[str] | None = None,
) -> tuple[str, list[str]]:
    """Render ``shown`` (text cells, short headers) no wider than ``width`` characters (0: no limit)
    by hiding columns in :func:`drop_order`; returns the text and the hidden headers. The ``error``
    column, last, is first cut to the room left (at least :data:`MIN_ERROR` characters) and hidden
    only when that is too little. A column not in ``order`` is hidden only when blank in every row.
    With ``runs`` (the rows of ``shown`` with full column names, in the same order), a set-up column
    is never hidden while it tells apart rows that the remaining set-up columns leave identical, nor one of
    :data:`UNCOMPARABLE` whose value differs between rows. The text may stay wider than ``width`` when
    the columns left cannot be hidden (:func:`render` says so)."""
    dropped: list[str] = []
    text = shown.to_string(index=False)
    full = dict(zip(shown.columns, runs.columns, strict=True)) if runs is not None else {}
    for col in drop_order(shown, order, keep):
        if width <= 0 or _widest(text) <= width:
            break
        if full.get(col) in _SETUP:
            rest = [full[c] for c in shown.columns if c != col and full[c] in _SETUP]
            if _tells_apart(runs, rest, full[col]):
                continue
        if full.get(col) in UNCOMPARABLE and runs[full[col]].nunique(dropna=False) > 1:
            continue  # --best-by model over H100 and H200 records: which GPU each figure is of
        room = width - (_widest(text) - _widest(shown[[col]].to_string(index=False)))
        if col == "error" and room >= MIN_ERROR:
            shown = shown.assign(error=[shorten(cell, room) for cell in shown["error"]])
        else:
            shown = shown.drop(columns=col)
            dropped.append(col)
        text = shown.to_string(index=False)
    return text, dropped


def width_note(width: int, dropped: list[str], needs: int) -> str | None:
    """The line under a terminal table of ``needs`` characters that had to fit ``width`` (0: no
    limit): the columns hidden, and, when the table is still wider, how wide it is and why (the columns
    left are never hidden: the set-up columns that tell rows apart, status, the headline figures, those
    asked for). None when nothing was hidden and the table fits."""
    if width <= 0 or (not dropped and needs <= width):
        return None
    parts = []
    if needs > width:
        parts.append(
            f"the table needs {needs} columns, more than the {width} it may take: the columns left "
            "cannot be hidden (they tell the rows apart or are the table's point)"
        )
    if dropped:
        parts.append(
            ("hidden: " if needs > width else f"hidden to fit {width} columns: ") + ", ".join(dropped)
        )
    return "(" + "; ".join([*parts, "see --columns, --width"]) + ")"


def json_value(value: object) -> object:
    """A cell as JSON holds it: a blank (None, NaN, ``pd.NA``, NaT) ``None``, a numpy scalar its Python
    value, a list or dict cell its items alike; ``inf`` stays (:func:`to_json` nulls it with its reason)."""
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or pd.isna(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def to_json(df: pd.DataFrame, indent: int = 2) -> str:
    """``df``'s rows as a strict JSON array of objects under the full column names
    (:mod:`flopsweep.strict_json`): a blank cell ``null``; an unbounded interval end (``inf``,
    :func:`analysis.spread.rate_ends`) ``null`` too, its row naming it under ``nulls``
    (``{"tokens_per_s_ci_high": "inf: no upper bound (...)"}``); never a bare ``Infinity`` or ``NaN``
    (``DataFrame.to_json`` wrote inf as a null no one could tell from a blank)."""
    rows = [
        {str(c): json_value(v) for c, v in zip(df.columns, values, strict=True)}
        for values in df.itertuples(index=False, name=None)
    ]
    return strict_dumps(rows, indent=indent, default=str)


def render(
    df: pd.DataFrame,
    fmt: str,
    width: int = 120,
    keep: Sequence[str] = (),
    order: Sequence[str] | None = None,
) -> str:
    """The table as text in ``fmt`` (``table``, ``markdown``, ``csv``, ``json``).

    ``table`` is at most ``width`` characters wide (0: no limit); columns that did not
    fit, hidden in ``order`` (default: the runs table's) after those blank in every row, are named in
    a line under it, never a set-up column that tells rows apart nor one of ``keep``; ``error`` is
    cut before it is hidden (:func:`fit_width`). When the columns left are still wider than
    ``width``, that line says so and how wide the table is (:func:`width_note`): the minimum
    depends on the rows, so a ``--width`` below it is not refused (only one below
    ``analysis.__main__.MIN_WIDTH``, when parsed), and the table is still shown. ``table`` and
    ``markdown`` end with a legend of the short metric headers shown. csv and json keep full
    column names and raw values (csv with formula-like text cells defused, :func:`csv_safe`; json strict,
    :func:`to_json`).
    """
    if fmt == "csv":
        return to_csv(df)
    if fmt == "json":
        return to_json(df)
    shown = for_display(df)
    if fmt == "markdown":
        shown = shown.map(markdown_cell).set_axis([markdown_cell(c) for c in shown.columns], axis=1)
        text = shown.to_markdown(index=False, disable_numparse=True)
        note = legend(list(df.columns))
        return text + ("\n\n" + note if note else "")
    text, dropped = fit_width(shown, width, df, keep, order)
    needs = _widest(text)
    if note := width_note(width, dropped, needs):  # wrapped to the table, which may be wider
        text += "\n" + "\n".join(textwrap.wrap(note, max(width, needs), break_on_hyphens=False))
    kept = [c for c in df.columns if header(c) not in dropped]
    note = legend(kept, width)
    return text + ("\n" + note if note else "")


def flat_pivot(table: pd.DataFrame) -> pd.DataFrame:
    """A pivot table as plain columns: the index becomes the first column(s), headed
    ``INDEX \\ COLUMNS`` (``model \\ backend``); several column keys join with ``/``."""
    names = [str(n) for n in table.columns.names]
    out = table.reset_index()
    heads = [" / ".join(str(x) for x in c if str(x)) if isinstance(c, tuple) else str(c) for c in out.columns]
    heads[table.index.nlevels - 1] += " \\ " + " / ".join(names)
    return out.set_axis(heads, axis=1)


def summary(df: pd.DataFrame) -> str:
    """The footer: run and status counts, unreadable records, duplicate ids, TFLOPs mismatches. Runs are
    records: where ``repeats=`` rounds were pooled (``df.attrs["runs"]``, :func:`analysis.load.load`'s
    count by status before pooling), ``3 runs (3 ok), pooled into 1 row``."""
    counts = Counter(df["status"]) if "status" in df else Counter()
    read = Counter(df.attrs.get("runs") or {})
    pooled = sum(read.values()) > len(df)
    counts = read if pooled else counts
    parts = [plural(sum(counts.values()) if pooled else len(df), "run")]
    if counts:
        parts[0] += " (" + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ")"
    if pooled:
        parts[0] += f", pooled into {plural(len(df), 'row')}"
    bad = df.attrs.get("unreadable", {})
    unlisted = sum(why.startswith(UNLISTED) for why in bad.values())
    stopped = sum(why.startswith(STOPPED.split("{", 1)[0]) for why in bad.values())
    deep = sum(folder_skipped(why) for why in bad.values()) - unlisted - stopped
    if len(bad) > deep + unlisted + stopped:
        parts.append(f"{plural(len(bad) - deep - unlisted - stopped, 'unreadable record')} skipped")
    if stopped:  # the walk listed its limit of folders: what lay after them was not searched
        parts.append(f"the search stopped at its limit of {MAX_FOLDERS:,} folders (name the sweep's folder)")
    if deep:  # a folder whose sub-folders lie past the walk's limit: not searched, no record
        parts.append(f"{plural(deep, 'folder')} nested deeper than the {MAX_DEPTH}-level limit skipped")
    if unlisted:
        parts.append(f"{plural(unlisted, 'folder')} that cannot be listed skipped")
    if "duplicate_run_id" in df and (n := int(df["duplicate_run_id"].sum())):
        parts.append(f"{plural(n, 'row')} share{'s' if n == 1 else ''} a run id (dup-id)")
    if "tflops_mismatch" in df and (n := int(df["tflops_mismatch"].sum())):
        mismatches = plural(n, "TFLOPs mismatch", "TFLOPs mismatches")
        parts.append(f"{mismatches} >1% vs the stored FLOPs, left out of rankings (tflops?)")
    if "implausible" in df and (n := int(df["implausible"].notna().sum())):
        parts.append(f"{plural(n, 'record')} failing a check of its figures, left out of rankings (check?)")
    return "; ".join(parts)
