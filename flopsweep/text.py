"""Messages: how the sweep and the analysis write counts and sizes, and the one CSV-injection guard.

Torch-free and imports nothing of flopsweep: the job, the launchers, the Hydra callbacks and the
analysis all use it, so that every message writes a count with its noun (``1 run``, ``2 runs``), a
size in bytes (``12.0 KiB``), a parameter count (``12.4M``) and a figure to three significant
figures (``0.0123``) the same way, and so that every CSV the project writes (``plan=true``'s
``plan.csv``, ``python -m analysis --format csv``) defuses spreadsheet formulas the same way
(:func:`csv_cell`). :class:`OneLineParser` is the argparse parser of every command line
(``python -m analysis``, ``benchmarks/*.py``): a refused option is one line, not the usage block.
:func:`parse_int` and :func:`reject_constant` are the strict-JSON guards of
:func:`flopsweep.safe_read.read_json` (a number too long to read, ``NaN``), each a one-line reason.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import shlex
import sys
from typing import Any, NoReturn


def article(word: str) -> str:
    """``word`` with its indefinite article: ``an attention``, ``an optim``, ``a model``, ``a FIFO``
    (``an`` before a written vowel; words such as ``user`` or ``unit`` that start with a "you" sound
    take ``a``). Was: ``every job needs a attention option``."""
    you = word.lower().startswith(("use", "usu", "uni", "eu", "one"))
    return f"{'an' if word[:1].lower() in 'aeiou' and not you else 'a'} {word}"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` as a message writes them: ``1 run``, ``0 runs``, ``3 runs``.

    Args:
        noun: the singular, e.g. ``"run"``, ``"ok run"``, ``"visible GPU"`` (the last word takes
            the ``s``).
        many: the plural when adding ``s`` is wrong, e.g. ``"mismatches"`` for ``"mismatch"``.
    """
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def format_bytes(n: float) -> str:
    """Bytes as ``512 B``, ``12.0 KiB``, ``3.5 GiB``."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


COUNT_SUFFIXES = ("", "K", "M", "B", "T")
"""Thousands, millions, billions, trillions: the suffixes of parameter counts (``124M``, ``8B``)."""


def significant(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant figures, in plain decimal notation (no exponent):
    ``0.0123``, ``12.3``, ``1.00``, ``1230``, ``0``. A figure too small for a column rounded to 0.1
    (a tiny model's 0.0123 GiB) keeps its digits."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    rounded = float(f"{x:.{digits}g}")  # first, so 0.9996 is 1.00, not 1.000
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def figure(x: float | None, digits: int = 3) -> str:
    """``x`` as a reader expects a figure in a line of prose, to ``digits`` significant figures: as ``%g``
    writes it where that has no exponent (``0.0123``, ``12.3``, ``1604``), else, from ``10**digits``,
    whole with its digits grouped (``1,050``, ``2,040,000``: ``%.3g`` wrote ``1.05e+03 GiB``,
    ``2.04e+06``), and from 1e15 or below 1e-4 a power of ten without ``+`` or leading zeros (``2.72e16``,
    ``5e-5``); ``inf``, ``nan`` as words, None as ``?``. Never a value to type back (a command line reads
    ``1,050`` as a sweep): :func:`flopsweep.config.typed_form` is that one."""
    if x is None:
        return "?"
    shown = f"{x:.{digits}g}"
    if "e" not in shown or not math.isfinite(x):
        return shown
    rounded = float(shown)
    if 1 <= abs(rounded) < 1e15:
        return f"{rounded:,.0f}"
    mantissa, _, power = shown.partition("e")
    return f"{mantissa}e{int(power)}"


def percent(share: float, digits: int = 3) -> str:
    """``share`` (0.999) as a percentage of ``digits`` significant figures, no trailing zeros:
    ``99.9%``, ``0.1%``, ``90%``, ``3.04%`` (``:.0%`` said ``0%`` of 1 - 0.999)."""
    if share == 0 or not math.isfinite(share):
        return f"{share * 100:g}%"
    return f"{float(f'{share * 100:.{digits}g}'):g}%"


def format_count(n: float) -> str:
    """A count (parameters) to three significant figures with its suffix (:data:`COUNT_SUFFIXES`):
    ``263``, ``263K``, ``12.4M``, ``8.03B``, ``1.2T``."""
    x = float(f"{n:.3g}")  # rounded first, so 999_999 is 1M, not 1000K
    suffix = ""
    for suffix in COUNT_SUFFIXES:
        if abs(x) < 1000 or suffix == COUNT_SUFFIXES[-1]:
            break
        x /= 1000
    return f"{x:.3g}{suffix}" if abs(x) < 1000 else f"{x:.0f}{suffix}"


def printable(text: object) -> str:
    """``str(text)`` with every character :meth:`str.isprintable` refuses, but the space, written as
    Python's visible escape (``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\x9b``, ``\\u202e``,
    ``\\U000e0001``): C0 and C1 controls (ESC, CR, LF, tab, CSI U+009B, OSC U+009D), DEL, the
    bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E-F, U+202A-E, U+2066-9),
    zero-width characters, the byte-order mark, line and paragraph separators, spaces other than
    U+0020 (no-break, ideographic), private-use, unassigned and surrogate code points. A name from
    a record then cannot move the cursor, recolour or retitle the terminal, forge a log line, or
    reorder or hide text. One line in, one line out; other text, non-ASCII letters included, is kept:
    ``"tag=a\\n\\x1b[31m"`` -> ``"tag=a\\\\n\\\\x1b[31m"``. The one escaper of the project
    (:mod:`analysis.sanitize` re-exports it); records keep the exact value."""
    text = str(text)
    if text.isprintable():  # the common case, at C speed: a table applies this to every cell
        return text
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in text)


CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\0", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""First characters that make a spreadsheet read a CSV cell as a formula: OWASP's ``=``, ``+``,
``-``, ``@``, tab and carriage return ("CSV Injection"), ASVS 5.0 1.2.10's NUL, and the full-width
``=``, ``+``, ``-``, ``@`` that some spreadsheets normalise to them."""

_CSV_LEADING_SPACE = " \n\x0b\x0c\u00a0\u3000\ufeff\u200b\u200c\u200d\u2060"
"""White space a spreadsheet may skip before it looks for a formula sign (tab and CR are signs),
and the invisible characters a reader may drop there: a byte-order mark, zero-width spaces and
joiners, the word joiner."""

_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
"""A plain decimal number (``-0.5``, ``1.611e+09``): a spreadsheet reads it as that number, never
as a formula, so :func:`csv_cell` leaves it a number."""


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs: a text value whose first character after any leading
    white space is in :data:`CSV_FORMULA_PREFIXES` gets a leading apostrophe (OWASP's defence), and
    its carriage returns become line feeds (a bare CR ends a row for some readers). ``|`` and ``%``
    are not triggers on their own (OWASP lists neither: a DDE payload such as ``=cmd|' /C calc'!A0``
    needs a leading sign, which is defused). Numbers, booleans, blanks and a text that is a plain
    decimal number (``"-0.5"``, ``"1.6e+09"``: :data:`_DECIMAL`) are returned as they are.

    ``"=HYPERLINK(1)"`` -> ``"'=HYPERLINK(1)"``; ``"  @SUM(A1)"`` -> ``"'  @SUM(A1)"``;
    ``"-2+3"`` -> ``"'-2+3"``; ``"-2"`` -> ``"-2"``; ``-1.5`` -> ``-1.5``.
    """
    if not isinstance(value, str) or _DECIMAL.fullmatch(value):
        return value
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    if value.lstrip(_CSV_LEADING_SPACE).startswith(CSV_FORMULA_PREFIXES):
        return "'" + text
    return text


def csv_text(cell: str) -> str:
    """A cell of a CSV that :func:`csv_cell` guarded, as text to show (a table in the terminal):
    the apostrophe it put before a formula sign removed (``"'+sweep=x"`` -> ``"+sweep=x"``), any
    other text as it is. (A value that itself began with an apostrophe and a sign shows without
    that apostrophe; the file keeps it.)"""
    if cell.startswith("'") and cell[1:].lstrip(_CSV_LEADING_SPACE).startswith(CSV_FORMULA_PREFIXES):
        return cell[1:]
    return cell


class _Refused(Exception):
    """A refusal of :meth:`OneLineParser.accepts`'s trial parse: nothing printed, nothing exited."""


_NEGATIVE = re.compile(r"-\d")
"""An extra word that is a negative number, not an option (``--width -5`` is refused by its option)."""


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose refusals are one line on stderr, exit status 2 (argparse's
    convention): ``PROG: error: MESSAGE; see PROG --help``, control characters escaped
    (:func:`printable`), where argparse prints its usage block first. ``--help`` is unchanged.
    Options and positionals come in any order (``DIR --predict DIR2``), and an unknown option is
    refused with the nearest option and the command with it as the fix (:meth:`unknown_line`)."""

    aliases: dict[str, tuple[str, ...]] = {}
    """Options a user may guess that this parser spells otherwise, and what to give instead
    (``--html``: ``("--format", "html")``); every other unknown option gets the nearest by spelling."""

    _trial = False

    def error(self, message: str) -> NoReturn:
        """Print ``message`` (argparse's, or a caller's refusal naming the option, the value and the
        fix) as one line to stderr and exit with status 2 (raise :class:`_Refused` in a trial parse)."""
        if self._trial:
            raise _Refused(message)
        line = f"{self.prog}: error: {printable(str(message))}; see {self.prog} --help"
        self.exit(2, line + "\n")

    def parse_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's signature
        """argparse's, with options and positionals in any order (``parse_known_intermixed_args``:
        ``DIR --predict DIR2`` was ``unrecognized arguments: DIR2``), and any word left over refused in
        one line (:meth:`unknown_line`), exit 2."""
        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        parsed, extras = self.parse_known_intermixed_args(argv, namespace)
        if extras:
            self.error(self.unknown_line(argv, extras))
        return parsed

    def accepts(self, argv: list[str]) -> bool:
        """Whether ``argv`` parses with no refusal and nothing left over (a trial: nothing printed)."""
        self._trial = True
        try:
            return not self.parse_known_intermixed_args(argv)[1]
        except _Refused:
            return False
        finally:
            self._trial = False

    def nearest(self, option: str) -> tuple[str, ...] | None:
        """What to give for the unknown ``option``: the long option or :attr:`aliases` entry nearest in
        spelling (:func:`difflib.get_close_matches`: ``--colums``: ``--columns``; ``--htm``: ``--format
        html``), else None."""
        known = [o for o in self._option_string_actions if o.startswith("--")] + list(self.aliases)
        close = (
            [option] if option in self.aliases else difflib.get_close_matches(option, known, n=1, cutoff=0.6)
        )
        return (self.aliases.get(close[0]) or (close[0],)) if close else None

    def unknown_line(self, argv: list[str], extras: list[str]) -> str:
        """The refusal of the words ``extras`` that no option or positional took: ``unrecognized
        arguments: --colums model: --colums is no option; did you mean --columns? Fix: PROG DIR --columns
        model``, the fix given only when it parses (:meth:`accepts`)."""
        head = f"unrecognized arguments: {' '.join(extras)}"
        words = [e for e in extras if e.startswith("-") and len(e) > 1 and not _NEGATIVE.match(e)]
        fixed, named = list(argv), []
        for word in words:
            option, eq, value = word.partition("=")
            given = self.nearest(option)
            if given is None or word not in fixed or (eq and len(given) > 1):  # --html=x: none takes x
                named.append(f"{option} is no option")
                continue
            i = fixed.index(word)
            fixed[i : i + 1] = [given[0] + eq + value] if eq else list(given)
            named.append(f"{option} is no option; did you mean {' '.join(given)}?")
        if not named:
            return head
        fix = f" Fix: {self.prog} {shlex.join(fixed)}" if fixed != argv and self.accepts(fixed) else ""
        return f"{head}: {'; '.join(named)}{fix}"


def say(line: str, stream: Any = None) -> None:
    """Print ``line`` to ``stream`` (stdout by default) and flush; when the reader has gone (``| head``
    closed the pipe: ``BrokenPipeError``), the stream's descriptor is pointed at ``/dev/null`` so
    that this and every later line are dropped instead of failing the run that prints them (the
    pattern of Python's documentation on ``SIGPIPE``)."""
    stream = stream or sys.stdout
    try:
        print(line, file=stream, flush=True)
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # a stream without a descriptor: nothing more to write to


class LongNumber(ValueError):
    """A whole number longer than :data:`MAX_INT_DIGITS` digits in a record."""


MAX_INT_DIGITS = 1000
"""The longest whole number a record may hold (digits, sign included): a count of FLOPs or bytes
has at most 30; Python itself refuses to read one of over 4,300 digits (``sys.int_info``)."""


def parse_int(text: str) -> int:
    """``int(text)`` for :func:`json.loads`, or :class:`LongNumber` (one line naming the length)
    for a number longer than :data:`MAX_INT_DIGITS` (not Python's advice to raise its limit)."""
    if len(text) > MAX_INT_DIGITS:
        raise LongNumber(
            f"a whole number of {len(text):,} digits (a record holds none over {MAX_INT_DIGITS})"
        )
    return int(text)


def reject_constant(name: str) -> None:
    """``parse_constant`` for :func:`json.loads`: ``NaN``, ``Infinity``, ``-Infinity`` are not strict JSON
    (``ValueError``)."""
    raise ValueError(f"{name} is not strict JSON")


def json_type(value: Any) -> str:
    """JSON's name (RFC 8259) for a parsed value's type: ``null``, ``true``, ``false``, ``number``,
    ``string``, ``array`` or ``object`` (never Python's ``NoneType``, ``dict``, ``list``), for messages
    such as ``top level is a JSON null, not an object``; ``str(type)`` for anything JSON cannot parse to."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "number"
    names = {str: "string", list: "array", tuple: "array", dict: "object"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def machine_stdout(config: Any) -> Any:
    """For ``plan=true`` with ``plan_format=csv|json`` under ``-m``: ``sys.stdout`` pointed at stderr until
    the sweep ends, and the real one returned (None otherwise), so that stdout holds the file's text alone:
    ``-m ... plan_format=json > plan.json`` had held ``[HYDRA] Launching 2 jobs locally`` and ``flopsweep: 1
    of 2 jobs done`` before the JSON (Hydra's launcher sets its log's handler up on ``sys.stdout`` as it
    starts, after the callbacks' ``on_multirun_start``, so the handler itself cannot be moved). The
    callback puts it back before it prints the sweep's table (``SweepSummary.on_multirun_end``)."""
    if not (config.get("plan") and str(config.get("plan_format") or "") in ("csv", "json")):
        return None
    real, sys.stdout = sys.stdout, sys.stderr
    return real
