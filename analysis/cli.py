"""The command line of ``python -m analysis``: the parser, and the checks of each option's value.

A refused value is argparse's one-line error (exit 2, :class:`flopsweep.text.OneLineParser`);
``--sort``, ``--filter``, ``--baseline`` and ``--columns`` take a column by its full name or its
short header (:data:`analysis.catalogue.SHORT`). :mod:`analysis.__main__` runs what it parses; the
paths its options write (``--output``, ``--notebook``, ``--plot``) are checked in :mod:`analysis.cli_paths`.
Imported by :mod:`analysis.__main__`, :mod:`analysis.notes`, and the console entries
(:mod:`flopsweep.console`, :mod:`flopsweep.cli`: :func:`run_entry`, :func:`entry`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from analysis.catalogue import COLUMNS, HIGHER_IS_BETTER, LOWER_IS_BETTER, RANK_METRIC, SHORT
from analysis.cli_paths import (
    FolderName,
    folder_fix,
    notebook_path,
    output_format,
    output_path,
    plot_folder,
    report_name,
)
from analysis.query import AnalysisError, column_list
from flopsweep.signals import ANALYSIS_LINE
from flopsweep.text import OneLineParser

FORMATS = ("table", "csv", "markdown", "json", "html")
_LONG = {short: long for long, short in SHORT.items() if short == long or short not in SHORT}
"""Short header -> column name, for options that take either; a short header that is also a column's
own name (``layout``) means that column."""


def _headers(names: set[str]) -> str:
    return ", ".join(SHORT.get(c, c) for c in [*COLUMNS, "speedup"] if c in names)


def sort_help() -> str:
    """The --sort help: the direction rule, with the columns of each direction
    (:data:`analysis.load.BETTER`) by their short headers."""
    return (
        "sort rows by a column (full name or short header), best first for a metric: descending where "
        f"higher is better ({_headers(HIGHER_IS_BETTER)}), ascending where lower is better "
        f"({_headers(LOWER_IS_BETTER)}); other columns ascending; blanks last. "
        ":asc or :desc overrides, e.g. --sort scale_eff:asc"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: paths, then the options of the module doc; a refused option is one line
    (:class:`flopsweep.text.OneLineParser`, exit 2)."""
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    p = AnalysisParser(  # the name the user typed: the console script, or python -m analysis
        prog=script if script == "flopsweep-analysis" else "python -m analysis",
        description="Comparison tables and plots of flopsweep runs (metrics.json).",
    )
    p.add_argument(
        "--version",
        nargs=0,
        action=_Version,
        help="print the versions of flopsweep, Hydra and torch (as flopsweep --version) and exit",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=_records,
        help="sweep/run directories (searched recursively), metrics.json files or globs",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        action=_GivenFormat,
        help="output format (default: table, or the format --output's name ends in: .csv, .json, .md, .html)",
    )
    p.add_argument(
        "--output",
        type=output_path,
        metavar="FILE",
        help="write here instead of stdout ('-': stdout); a file already there: refused unless --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="let --output replace a file already there (else refused: exit 2, the file kept)",
    )
    p.add_argument("--sort", type=_sort_arg, metavar="COL[:asc|:desc]", help=sort_help())
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep rows whose KEY equals VALUE (VALUE may be a comma list); repeatable",
    )
    p.add_argument(
        "--pivot",
        metavar="INDEX:COLUMNS:VALUES",
        help="lay VALUES of ok runs out INDEX x COLUMNS, e.g. model:backend:model_tflops_per_device",
    )
    p.add_argument(
        "--frontier",
        action="store_true",
        help="the memory frontier instead of the runs: the largest model each set-up trained "
        "(search.model=largest) and the longest sequence (search.grow=seq_len; column grew), "
        "its tokens/s and MFU",
    )
    p.add_argument(
        "--agg",
        default="max",
        choices=("max", "mean", "median", "min"),
        help="how --pivot combines repeated runs of a cell (default: max)",
    )
    p.add_argument(
        "--best-by",
        type=_column_list("--best-by model"),
        metavar="COLS",
        help="best ok run per group of these comma-separated columns",
    )
    p.add_argument(
        "--metric",
        default=RANK_METRIC,
        help=f"metric for --best-by, --baseline and the default order (default: {RANK_METRIC}: model "
        "FLOPs, attention counted at the blocks computed, no recompute)",
    )
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add a speedup column vs this set-up, matched on the other set-up columns; repeatable",
    )
    p.add_argument(
        "--plot",
        type=plot_folder,
        metavar="DIR",
        help="write PNG plots to DIR; a plot of the same name already there is replaced without asking "
        "(--force is --output's alone)",
    )
    p.add_argument(
        "--notebook",
        type=notebook_path,
        metavar="FILE",
        help="write the results notebook of these records to FILE (.ipynb) and execute it; a FILE already "
        "there is replaced without asking (--force is --output's alone); relative paths are stored relative "
        "to FILE's folder (needs the notebook or dev extra)",
    )
    p.add_argument(
        "--predict",
        action="store_true",
        help="fill metrics.predicted for ok records that lack it, calibrated from the other records of "
        "the paths (flopsweep.predict), and show predicted_iteration_time_s and prediction_error "
        "((predicted - measured) / measured)",
    )
    p.add_argument(
        "--prediction-errors",
        action="store_true",
        help="only the error of the step time predicted before each run, per backend and source of "
        "the prediction: median, 90th percentile and worst (analysis.prediction_error); --predict "
        "ends its table with it",
    )
    p.add_argument(
        "--columns",
        type=_column_list("--columns model,backend,tokens_per_s, or all (every column)", every=True),
        metavar="COLS",
        help="comma-separated columns to show, or 'all'",
    )
    p.add_argument(
        "--width",
        type=_width,
        default=None,
        help=f"widest terminal table in characters, at least {MIN_WIDTH}; columns are hidden to fit (0: no "
        "limit; default: the terminal's width, COLUMNS honoured, when the output is a terminal, else 120)",
    )
    return p


DEFAULT_WIDTH = 120
"""The table width when the output is not a terminal (a pipe, a file, a test's capture)."""

MIN_WIDTH = 40
"""The narrowest ``--width`` (characters) the table can honour: its notes and legend wrap without
cutting a column name (``stage3_prefetch_bucket_size``, 27) or the default metric
(``model_tflops_per_device``, 23) in two, and the columns never hidden (model, status, a figure)
take about that much. Below it the table came out wider than asked anyway, its notes in shreds."""


def _width(text: str) -> int:
    """``--width``'s value: 0 (no limit) or at least :data:`MIN_WIDTH` characters (argparse's
    one-line error, exit 2, names anything else, the value and the minimum)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of characters") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{value} is negative: give 0 (no limit) or at least {MIN_WIDTH} characters"
        )
    if 0 < value < MIN_WIDTH:
        raise argparse.ArgumentTypeError(
            f"{value} is below the minimum of {MIN_WIDTH} characters the table and its notes fit in: "
            f"give {MIN_WIDTH} or more, or 0 for no limit"
        )
    return value


def default_width() -> int:
    """The terminal's columns (``shutil.get_terminal_size``: ``COLUMNS`` first), at least
    :data:`MIN_WIDTH`, when standard output is a terminal, else :data:`DEFAULT_WIDTH`: a table piped
    to a file keeps one width everywhere."""
    import shutil

    if sys.stdout.isatty():
        return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


class _Version(argparse.Action):
    """``--version``: :func:`flopsweep.version.version_line` on stdout, exit 0, before the paths are
    required (argparse acts on a flag as it reads it). Was: ``flopsweep-analysis --version`` said
    ``the following arguments are required: paths``, exit 2."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001 - argparse's
        from flopsweep.version import version_line

        print(version_line())
        parser.exit(0)


class _GivenFormat(argparse.Action):
    """``--format``: stores the choice and marks it given (``format_given``), so that an ``--output``
    suffix sets the format only where none was given (:func:`output_format`)."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001 - argparse's
        setattr(namespace, self.dest, values)
        namespace.format_given = True


class AnalysisParser(OneLineParser):
    """The analysis's parser: :class:`flopsweep.text.OneLineParser`, and after parsing, an ``--output``
    that names a folder refused (argparse's one line, exit 2) with the file of its ``--format`` in it
    (:func:`report_name`: ``--format html --output h/``: ``Fix: --output h/report.html``); an option
    named after a format (``--html``) is refused with ``--format html`` as the fix; ``--force`` without an
    ``--output`` file (none, or ``-``) is refused: it replaces nothing."""

    aliases = {f"--{fmt}": ("--format", fmt) for fmt in FORMATS} | {"--md": ("--format", "markdown")}

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's signature
        parsed, rest = super().parse_known_args(args, namespace)
        output = getattr(parsed, "output", None)
        if hasattr(parsed, "format"):
            parsed.format = output_format(output, parsed.format, getattr(parsed, "format_given", False))
        if isinstance(output, FolderName):
            example = report_name(getattr(parsed, "format", "table"))
            if not output:
                self.error(
                    f"argument --output: an empty path: name a file, e.g. {example} ('-': standard output)"
                )
            self.error(f"argument --output: {folder_fix(output, '--output', example)}")
        if getattr(parsed, "force", False) and output is None:  # was accepted in silence: nothing to replace
            example = report_name(getattr(parsed, "format", "table"))
            self.error(
                "argument --force: it lets --output replace a file already there, and no --output file is "
                f"named (the output goes to standard output). Fix: drop --force, or add --output {example}"
            )
        return parsed, rest


def _column_list(example: str, every: bool = False):
    """The type of an option that takes comma-separated columns (``--columns``, ``--best-by``): the
    text as given, refused (argparse's one-line error, exit 2) when it names no column (``''``, ``,``:
    a shell variable left unset gave the default table in silence) or has an empty name between
    commas (``model,,status``); ``example`` is the fix's. ``every``: ``all`` (every column) stands
    alone (``all,model`` was an unknown column 'all', "did you mean 'cuda_alloc_retries'"), in lower
    case (``ALL`` was the same unknown column, its near names none of what was meant); else ``all`` is
    refused (``--best-by all,model`` was "unknown column 'all' in best"). An unknown name is refused once
    the records are loaded, with the nearest names and the option (``in --best-by``)."""

    def check(text: str) -> str:
        names = [name.strip() for name in text.split(",")]
        if not any(names):
            raise argparse.ArgumentTypeError(f"{text!r} names no column: give one or more, e.g. {example}")
        if not all(names):
            raise argparse.ArgumentTypeError(
                f"{text!r} has an empty name between commas: give each column once, e.g. {example}"
            )
        option, rest = example.split()[0], ",".join(n for n in names if n.lower() != "all")
        if not every and any(n.lower() == "all" for n in names):  # --best-by all: was 'unknown ... in best'
            raise argparse.ArgumentTypeError(
                f"{text!r}: all (every column) is a word of --columns, not of {option}, which takes the "
                f"columns that make a group; give them, e.g. {option} {rest or example.split()[1]}"
            )
        if every and len(names) > 1 and any(n.lower() == "all" for n in names):
            rest = ",".join(n for n in names if n.lower() != "all")
            raise argparse.ArgumentTypeError(
                f"{text!r}: all shows every column and stands alone; give --columns all, or the columns "
                f"alone: --columns {rest}"
            )
        if every and names[0].lower() == "all" != names[0]:  # ALL: "did you mean 'cuda_alloc_retries'"
            raise argparse.ArgumentTypeError(
                f"{text!r}: all (every column) is written in lower case, as each column; give --columns all"
            )
        return text

    return check


def _records(text: str) -> str:
    """A path, folder or glob of records: not an empty one, which would read every record under the
    current folder (``flopsweep-analysis "$DIR"`` with ``DIR`` unset); ``.`` says that on purpose."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"an empty path {text!r} (a shell variable left unset?) would read every record under the "
            "current folder: name a sweep or run folder, e.g. multirun/smoke, or . for this folder"
        )
    return text


def column_name(name: str) -> str:
    """The column an option names: a short header (``tokens/s``) gives its column (``tokens_per_s``), a
    header that is also a column's own name (``layout``) that column; any other ``name`` is returned
    as given (an unknown one is refused later, with the nearest names)."""
    return _LONG.get(name, name)


def pairs(items: list[str], option: str) -> dict[str, str | list[str]]:
    """``["backend=fsdp,ddp"]`` -> ``{"backend": ["fsdp", "ddp"]}``; raises AnalysisError without '=',
    for a key given twice (``--filter backend=fsdp --filter backend=ddp``: the last would win), or for
    an empty value (``backend=fsdp,,ddp``, ``backend=fsdp,``, ``backend=``: it matched the runs with a
    blank cell, or none, in silence), each in one line naming the option, the value and the fix."""
    out: dict[str, str | list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AnalysisError(f"{option} {item!r}: expected KEY=VALUE, e.g. {option} backend=fsdp")
        values = [v.strip() for v in value.split(",")]
        if not all(values):
            given, name = [v for v in values if v], key.strip()
            if given:
                kept = given[0] if option == "--baseline" else ",".join(given)
                raise AnalysisError(
                    f"{option} {item!r}: an empty value in the list (a doubled or trailing comma); give "
                    f"each value once: {option} {name}={kept}"
                )
            several = "" if option == "--baseline" else f" (several: {name}=a,b)"
            raise AnalysisError(
                f"{option} {item!r}: no value (a shell variable left unset?); give one: "
                f"{option} {name}=VALUE{several}"
            )
        column = column_name(key.strip())
        if column in out:  # the last would win in silence
            once = "one value" if option == "--baseline" else f"its values once, comma-separated ({key}=a,b)"
            raise AnalysisError(f"{option} {key.strip()}: given twice; give {once}")
        out[column] = values if len(values) > 1 else values[0]
    return out


SORT_DIRECTIONS = ("asc", "desc")
"""The directions ``--sort COL:DIRECTION`` takes; without one, the best first for a metric."""


def _sort_arg(text: str) -> str:
    """``--sort``'s value, kept as given: ``COL``, ``COL:asc`` or ``COL:desc`` (argparse's one-line
    error, exit 2, names an empty column or a direction other than :data:`SORT_DIRECTIONS`; an
    unknown column is refused once the records are loaded, with the nearest names)."""
    name, sep, order = text.rpartition(":")
    name = name if sep else text
    if not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no column: give COL, COL:asc or COL:desc")
    if sep and order not in SORT_DIRECTIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown direction {order!r}, expected asc or desc; give {name}:asc, {name}:desc, "
            f"or {name} for the best first"
        )
    return text


def sort_spec(spec: str) -> tuple[str, str]:
    """``--sort``'s value split at its last colon: ``"COL:desc"`` -> ``("COL", "desc")``; ``"COL"`` ->
    ``("COL", "")`` (the best first). ``spec`` is checked by argparse first (:func:`_sort_arg`)."""
    name, sep, order = spec.rpartition(":")
    return (name, order) if sep else (spec, "")


def frontier_conflict(args: argparse.Namespace) -> str | None:
    """The option that ``--frontier`` would silently override or be overridden by (``--pivot``,
    ``--best-by``, ``--baseline``; ``--columns`` and ``--sort``: the frontier has its own columns and
    order, largest model first), None when there is none."""
    for option, value in (
        ("--pivot", args.pivot),
        ("--best-by", args.best_by),
        ("--baseline", args.baseline),
        ("--columns", args.columns),
        ("--sort", args.sort),
    ):
        if value:
            return option
    return None


def asked_columns(args: argparse.Namespace) -> list[str]:
    """The columns ``--columns`` names (full names, each once: ``model,model`` or ``tokens/s,tokens_per_s``
    crashed the table; none for ``all`` or without it): the terminal table never hides them to fit the
    width, blank or not."""
    if args.columns in (None, "all"):
        return []
    return list(dict.fromkeys(column_name(c) for c in column_list(args.columns)))  # a column once


def named_columns(args: argparse.Namespace) -> set[str]:
    """Every column an option names (full names): ``--columns``, ``--sort``, ``--filter``'s and
    ``--baseline``'s keys, ``--best-by``, ``--pivot``'s three parts."""
    names = set(asked_columns(args))
    if args.sort:
        names.add(column_name(sort_spec(args.sort)[0]))
    for item in [*args.filter, *args.baseline]:
        names.add(column_name(item.partition("=")[0].strip()))
    names.update(column_name(c) for c in column_list(args.best_by or "") if c)
    names.update(column_name(c) for part in (args.pivot or "").split(":") for c in column_list(part) if c)
    return names


def closed_stdout_problem(args: argparse.Namespace, closed: bool) -> str | None:
    """The refusal (exit 2, before any record is read) of a command whose only output is the table on
    a stdout that was ``closed`` at start (``flopsweep-analysis DIR >&-``: the table went to
    ``os.devnull`` and the command exited 0), or None: stdout open, or something else is written
    (``--output FILE``, ``--plot DIR``, ``--notebook FILE``). ``> /dev/null`` is the way to drop it."""
    if not closed or args.output is not None or args.plot is not None or args.notebook is not None:
        return None
    return (
        "stdout is closed (>&-), so the table would be lost. Fix: --output FILE, or redirect it "
        "(> FILE; > /dev/null to drop it on purpose)"
    )


def entry(main: Callable[[], int]) -> int:
    """The analysis's process to its exit status: a closed stdout or stderr made ``os.devnull``
    (:func:`flopsweep.streams.standard_streams`), then ``main()``; Ctrl-C anywhere in it is one line and 130,
    never a traceback (a table for a stdout closed at start: :func:`closed_stdout_problem`). Outputs are
    written whole or not at all (:func:`flopsweep.files.create_new`, then a rename)."""
    from flopsweep.streams import standard_streams

    standard_streams()
    try:
        return main()
    except KeyboardInterrupt:
        print(ANALYSIS_LINE.format(name="Ctrl-C"), end="", file=sys.stderr)
        return 130


def run_entry(main: Callable[[], int]) -> NoReturn:
    """The analysis's process from its imports on (``python -m analysis``, ``flopsweep-analysis``; their
    handler as they start: :func:`flopsweep.signals.stop_as_it_starts`, :mod:`flopsweep.console`): SIGINT is
    ``KeyboardInterrupt`` again, SIGTERM the default, then :func:`entry` (a signal there: its line, 130); then
    a signal writes :data:`flopsweep.signals.ANALYSIS_DONE_LINE` (:func:`flopsweep.signals.work_done`)."""
    import signal

    from flopsweep.signals import ANALYSIS_DONE_LINE, work_done

    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = entry(main)
    except KeyboardInterrupt:  # between the handler's change and the entry's own try
        print(ANALYSIS_LINE.format(name="Ctrl-C"), end="", file=sys.stderr)
        code = 130
    finally:  # written and said: a signal in the teardown says so and changes nothing
        work_done(ANALYSIS_DONE_LINE)
    raise SystemExit(code)
