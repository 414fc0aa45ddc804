"""Text from records made safe for each output: the terminal, log lines, markdown, CSV, plot labels.

A record is written by whoever could write its folder, so every text in it (a model name, a
tag, an error message, a path) is hostile until shown otherwise:

- :func:`printable` (:func:`flopsweep.text.printable`, re-exported: the one escaper of the
  project): terminal control sequences (ESC and every other C0 and C1 control, DEL, the Unicode
  bidirectional marks and overrides that reorder what a reader sees, zero-width and other
  invisible characters) become visible escapes (``\\n``, ``\\x1b``, ``\\u202e``), so that a name
  cannot move the cursor, recolour the terminal, retitle its window, add a line to a log or hide
  text. Applied to every table cell, header, log line and footer line the analysis prints.
- :func:`markdown_cell`: a ``|`` cannot open a column, ``<`` cannot open HTML.
- :func:`csv_cell` (:func:`flopsweep.text.csv_cell`, the one guard of every CSV the project
  writes, ``plan=true``'s ``plan.csv`` too): a text cell a spreadsheet would run as a formula gets
  a leading apostrophe (OWASP, "CSV Injection": cells beginning with ``=``, ``+``, ``-``, ``@``,
  tab or carriage return; ASVS 5.0 1.2.10 adds NUL); leading white space is looked through, and
  so are the full-width forms of the four signs; a plain decimal number (``-0.5``) stays a number.
  Carriage returns inside a cell become line feeds, and every text cell is quoted
  (:data:`csv.QUOTE_NONNUMERIC`), so a cell can never end a row. ``|`` and ``%`` are not formula
  triggers on their own (OWASP lists neither): a DDE payload such as ``=cmd|' /C calc'!A0`` needs
  one of the leading signs, which is defused.
- :func:`label`: a plot label at most :data:`MAX_LABEL` characters (matplotlib's layout of a
  long label costs far more than linear time, and a long legend entry asks for a huge canvas).
"""

from __future__ import annotations

import logging

from flopsweep.text import CSV_FORMULA_PREFIXES, csv_cell, printable

__all__ = [
    "CSV_FORMULA_PREFIXES",
    "MAX_LABEL",
    "SafeFormatter",
    "csv_cell",
    "label",
    "markdown_cell",
    "printable",
    "shorten",
]

MAX_LABEL = 60
"""Longest text (characters) from a record in a plot title, tick or legend entry; longer ends in '…'."""


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut (``limit`` >= 1)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def label(text: object, limit: int = MAX_LABEL) -> str:
    """A record's text as a plot label: :func:`printable`, at most ``limit`` characters."""
    return shorten(printable(text), limit)


def markdown_cell(text: str) -> str:
    """A markdown table cell that stays one cell: ``|`` escaped as ``\\|``, ``<`` and ``>`` as
    entities (no raw HTML), control characters escaped (:func:`printable`: no new row)."""
    return printable(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


class SafeFormatter(logging.Formatter):
    """A log formatter whose message has its control characters escaped (:func:`printable`): a
    path or name in a log line cannot drive the terminal or start a forged line. A traceback
    appended by ``exc_info`` keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = printable(record.message)
        return super().formatMessage(record)
