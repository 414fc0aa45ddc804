"""The plan's terminal tables within :func:`width` characters: the one place that says how wide a plan
table may be, and which columns a single plan's table (:func:`flopsweep.job.planprint.plan_table`) hides
to fit, naming them; the table over clusters hides its own
(:data:`flopsweep.job.planrender.HIDDEN_FIRST`). Torch-free."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

WIDTH = 160
"""The widest terminal table of a plan, in characters, where standard output is no terminal wider than
it (:func:`width`; the analysis' default is 120, ``--width``)."""


def width(*, terminal: bool | None = None) -> int:
    """The widest terminal table of a plan, in characters: the terminal's columns
    (``shutil.get_terminal_size``: ``COLUMNS`` first) where standard output is a terminal (``terminal``:
    None asks ``sys.stdout.isatty()``) wider than :data:`WIDTH`, else :data:`WIDTH`; a table piped to a
    file keeps one width everywhere, as the analysis' tables (``analysis.cli.default_width``)."""
    import shutil
    import sys

    if terminal is None:
        terminal = sys.stdout.isatty()
    return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns) if terminal else WIDTH


HIDDEN_FIRST = (
    "GPU_h",
    "rank",
    "pred_world",
    "note",
    "source",
    "USD",
    "days",
    "USD/Mtok",
    "tokens/s/GPU",
    "peak_GiB",
    "MFU",
    "step_s",
    "fits",
)
"""The columns :func:`fitted_markdown` hides, in this order, until a single plan's table fits
:func:`width` (with ``cost.usd_per_gpu_hour`` and ``budget.tokens`` it was 177 wide): first each said
again in another (``GPU_h`` in ``days``, ``pred_world`` in ``world``) or least read, the footnotes
(``note``, ``source``) before the figures, ``peak_GiB`` (why a row does not fit) late; last what the
README promises: ``MFU``, predicted step time (``step_s``) and whether it fits (``fits``). Never a
column of what the job is (``model``, ``overrides``, ``world``, ``layout``), which tells rows apart,
nor ``status`` and ``reason``."""


BIG = 1e6
"""From here ``%g`` writes a float with an exponent (``9.124e+06`` dollars): :func:`float_formats`."""


def float_formats(frame: Any) -> list[str]:
    """The table's number format of each column of ``frame``: ``g`` (tabulate's own), but ``,.0f`` for a
    column of figures of at least 1 that reaches :data:`BIG` (``9,124,000`` dollars, ``19,010`` days: was
    ``9.124e+06``); plan.csv keeps the exact value."""
    import math

    out = []
    for column in frame.columns:
        values = [v for v in frame[column] if isinstance(v, float | int) and not isinstance(v, bool)]
        finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
        out.append(",.0f" if finite and max(finite) >= BIG and min(finite) >= 1 else "g")
    return out


def fitted_markdown(frame: Any, headers: Mapping[str, str], *, most: int | None = None) -> list[str]:
    """``frame`` (a pandas frame of text cells, named by ``plan.csv`` columns) as a markdown table under
    ``headers``' names, within ``most`` characters (None: :func:`width`) where hiding
    :data:`HIDDEN_FIRST` makes it fit, then, where it hid some, the line naming them: ``[table]`` or
    ``[table, "hidden to fit 160 columns: GPU_h, rank (the file keeps every column)"]``."""
    most = width() if most is None else most
    hidden: list[str] = []
    named = {v: k for k, v in headers.items()}
    table = frame.rename(columns=dict(headers)).to_markdown(index=False, floatfmt=float_formats(frame))
    for name in HIDDEN_FIRST:
        if max(map(len, table.splitlines())) <= most:
            break
        if named.get(name) in frame.columns:
            frame = frame.drop(columns=named[name])
            hidden.append(name)
            table = frame.rename(columns=dict(headers)).to_markdown(
                index=False, floatfmt=float_formats(frame)
            )
    said = f"hidden to fit {most} columns: {', '.join(hidden)} (the file keeps every column)"
    return [table, said] if hidden else [table]


CONTINUED = 4
"""How much deeper than its line a wrapped note's next lines are indented (:func:`unwrapped` reads it
back): deeper than any line a plan prints under another (``defaults used:`` then ``  space.top=5``)."""

_MARK = re.compile(r"\[\d+\] ")
"""A footnote's mark (``[1] ``), under which its wrapped lines are indented."""


def wrapped(line: str, *, most: int | None = None) -> list[str]:
    """``line``, a note below a plan's table (a footnote ``[1] nearest (shipped records): ...``, a legend,
    a job's reason), as lines of at most ``most`` characters (None: :func:`width`, the tables' own), cut at
    spaces, each after the first indented :data:`CONTINUED` past the line's own (under a footnote's text);
    a word longer than a line (a path) is kept whole on its own. The one place a plan's notes are wrapped:
    a single plan's footnote was 1,047 characters on one line. A command to copy is never wrapped."""
    import textwrap

    most = width() if most is None else most
    if len(line) <= most:
        return [line]
    mark = _MARK.match(line)
    own = len(line) - len(line.lstrip(" "))
    indent = " " * max(own + CONTINUED, mark.end() if mark else 0)
    return textwrap.wrap(
        line, most, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [line]


def wrapped_all(lines: list[str], *, most: int | None = None) -> list[str]:
    """Each of ``lines`` :func:`wrapped`, in order."""
    return [part for line in lines for part in wrapped(line, most=most)]


def unwrapped(text: str) -> list[str]:
    """``text``'s lines with each note :func:`wrapped` cut joined again: a line indented at least
    :data:`CONTINUED` deeper than the line it follows continues it (a reader of the plan's output, a test,
    ``grep``, gets one line a note)."""
    out: list[str] = []
    own = 0
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if out and line.strip() and indent >= own + CONTINUED:
            out[-1] += " " + line.strip()
            continue
        out.append(line)
        own = indent
    return out
