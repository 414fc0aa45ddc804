"""``python -m analysis DIR... [options]``: the comparison table of a sweep, and its plots.

    python -m analysis multirun/2026-11-29                       # terminal table, 120 columns
    python -m analysis DIR --filter backend=fsdp,ddp --sort tokens_per_s
    python -m analysis DIR --best-by model                       # best ok run per model
    python -m analysis DIR --baseline backend=fsdp               # adds speedup vs FSDP
    python -m analysis DIR --pivot model:backend:model_tflops_per_device
    python -m analysis DIR --frontier                            # the largest model per set-up
    python -m analysis DIR --format html --output report.html --plot plots/
    python -m analysis DIR --notebook results.ipynb              # a results notebook, executed
    python -m analysis DIR --predict                             # predicted step time and its error

Rankings (the default order, --best-by, --baseline, --pivot) use model TFLOPs per
device unless --metric says otherwise, and leave out runs whose recorded TFLOPs fail
the recomputation from their stored FLOPs (a note says which). --sort puts the best
run first by each metric's direction (:data:`analysis.load.BETTER`). The footer (run
counts, unreadable records, flags, notes, and one line per column that ok runs leave
blank, saying why and what to run: :mod:`analysis.blanks`) goes to stderr, so csv and
json on stdout stay clean (``--frontier``'s "not measured: ..." lines too, for csv and json);
the terminal and markdown tables end with a legend of their short headers.
--notebook writes the notebook of :mod:`analysis.notebook` for the paths and executes it
(a progress line per cell on stderr); each failure is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

if __name__ == "__main__":  # Ctrl-C in the imports below (pandas, matplotlib: ~0.6 s): one line and 130
    from flopsweep.signals import ANALYSIS_LINE, stop_as_it_starts

    stop_as_it_starts(ANALYSIS_LINE)

import argparse
import logging
import re
import sys
import textwrap
from pathlib import Path

import pandas as pd

from analysis.blanks import blank_notes, speedup_ci_lines
from analysis.catalogue import header
from analysis.cli import (  # noqa: F401 - build_parser and MIN_WIDTH are imported from here
    DEFAULT_WIDTH,
    FORMATS,
    MIN_WIDTH,
    asked_columns,
    build_parser,
    closed_stdout_problem,
    column_name,
    default_width,
    frontier_conflict,
    named_columns,
    pairs,
    run_entry,
    sort_spec,
)
from analysis.cli_paths import plot_folder_problem, report_name
from analysis.discover import no_records
from analysis.display import FLAGS, compact, flat_pivot, render, summary, with_flags
from analysis.filter_hints import misses, nothing_matches_line
from analysis.frontier import (
    frontier_drop_order,
    frontier_table,
    no_frontier,
    searched,
    unmeasured_lines,
)
from analysis.headline import headline
from analysis.load import (
    METRIC_COLUMNS,
    PREDICTION_COLUMNS,
    RANK_METRIC,
    display_path,
    load,
    rankable,
    table,
)
from analysis.missing_jobs import missing_lines
from analysis.notebook import NotebookError, ProgressLine, make_notebook
from analysis.notes import (
    excluded_note,
    frontier_notes,
    frontier_stderr_lines,
    load_notes,
    shown_note,
    spread_lines,
)
from analysis.output import (  # noqa: I001
    OutputError,
    check_folder,
    check_output,
    exists_problem,
    write_atomic,
    write_error_line,
    write_escaped,
    write_stdout,
)
from analysis.plots import PLOTS, make_plots, write_pngs
from analysis.prediction_error import error_summary, probe_cost_line, render_summary
from analysis.query import (
    AnalysisError,
    ColumnError,
    best_shown,
    check_columns,
    column_list,
    compare,
    pivot,
    pivot_winners,
    select,
    sort_runs,
)
from analysis.report import Report, render_html
from analysis.run_match import matched_line
from analysis.sanitize import SafeFormatter, printable
from analysis.significance import verdict
from flopsweep.budget import BudgetError
from flopsweep.streams import stdout_closed_at_start
from flopsweep.text import figure, plural


def _filter(df: pd.DataFrame, filters: dict) -> pd.DataFrame:
    """The rows of ``df`` that ``filters`` match. A value that matches no record is named, with the values
    its column has (:mod:`analysis.filter_hints`): the error when no row is left (exit 2), else a warning
    on stderr (``backend=zero3,fsdp``: the fsdp runs shown). A ``run_dir``/``run_id`` filter says which
    rows it matched, in one line (:func:`analysis.run_match.matched_line`)."""
    out = select(df, filters)
    if out.empty and not df.empty:
        raise AnalysisError(nothing_matches_line(df, filters))
    for line in misses(df, filters) if not df.empty else []:
        say(f"analysis: WARNING: {line}; the runs the other values match are shown")
    if line := matched_line(out, filters):  # a run_dir/run_id filter: which rows (a pooled row's rounds)
        say(f"analysis: {line}")
    return out


def _sort(df: pd.DataFrame, spec: str | None, metric: str = RANK_METRIC) -> pd.DataFrame:
    if not spec:
        return table(df, columns=list(df.columns), metric=metric)
    name, order = sort_spec(spec)
    return sort_runs(df, column_name(name), descending={"asc": False, "desc": True}.get(order))


def select_runs(df: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """The rows the options ask for: filtered, compared with a baseline, best per group, sorted. With
    ``flags`` named by an option, the rows carry it (:func:`with_flags`)."""
    if FLAGS in named_columns(args):
        df = with_flags(df)
    metric = column_name(args.metric)
    numeric = [c for c in METRIC_COLUMNS if c in df and pd.api.types.is_numeric_dtype(df[c])]
    if metric not in numeric:
        raise AnalysisError(
            f"--metric {args.metric!r} is not a numeric metric column; choose one of {', '.join(numeric)}"
        )
    df = _filter(df, pairs(args.filter, "--filter"))
    if args.baseline:
        df = compare(df, pairs(args.baseline, "--baseline"), metric=column_name(args.metric))
    if args.best_by:
        df = best_shown(df, args.best_by, metric, args.filter, column_name)
    return _sort(df, args.sort, column_name(args.metric))


def _pivot(df: pd.DataFrame, args: argparse.Namespace, mark_failed: bool) -> pd.DataFrame:
    parts = args.pivot.split(":")
    if len(parts) != 3 or not all(parts):
        raise AnalysisError(
            f"--pivot {args.pivot!r}: expected INDEX:COLUMNS:VALUES, "
            "e.g. model:backend:model_tflops_per_device"
        )
    index, columns, values = pivot_parts(args.pivot)
    return pivot(
        df,
        index=index,
        columns=columns,
        values=values,
        aggfunc=args.agg,
        mark_failed=mark_failed,
    )


def pivot_parts(spec: str) -> tuple[list[str], list[str], str]:
    """``--pivot INDEX:COLUMNS:VALUES``'s index and columns (:func:`analysis.query.column_list`) and values,
    each a full column name (:func:`column_name`: ``tokens/s`` -> ``tokens_per_s``)."""
    index, columns, values = spec.split(":")
    return (
        [column_name(c) for c in column_list(index)],
        [column_name(c) for c in column_list(columns)],
        (column_name(values.strip())),
    )


def mark_winners(
    table: pd.DataFrame, runs: pd.DataFrame, args: argparse.Namespace
) -> tuple[pd.DataFrame, list[str]]:
    """``table`` (a :func:`_pivot`) with ``[n]`` after each cell whose runs differ in a set-up
    column the pivot does not show, and the ``[n]`` lines naming the set-up that won
    (:func:`analysis.query.pivot_winners`)."""
    winners = pivot_winners(runs, *pivot_parts(args.pivot), args.agg)
    table = table.astype(object)
    lines = []
    for n, (row, col, note) in enumerate(winners, 1):
        at = (row[0] if len(row) == 1 else row, col[0] if len(col) == 1 else col)
        value = table.at[at]
        table.at[at] = f"{figure(value, 4)} [{n}]" if isinstance(value, float) else f"{value} [{n}]"
        lines.append(f"[{n}] {' / '.join(map(str, row + col))}: {note}")
    if lines:
        lines.insert(0, "Cells marked [n] hold runs of more than one set-up; the one shown:")
    return table, lines


def shown_columns(df: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """The columns to print: --columns, else compact ones for people and all for csv/json."""
    if args.columns == "all" or (not args.columns and args.format in ("csv", "json")):
        return df
    if args.columns:
        cols = asked_columns(args)
        check_columns(df, cols, "--columns")
        return df[cols]
    out = compact(df)
    if args.format == "html" and df["error"].notna().any():
        out["error"] = df["error"]  # no width limit in a browser: say why runs failed
    return out


def _heading(args: argparse.Namespace) -> str:
    if args.pivot:
        return (
            f"{args.pivot.split(':')[2]} ({args.agg} over ok runs) by {args.pivot.split(':')[0]} "
            f"and {args.pivot.split(':')[1]}"
        )
    if args.best_by:
        return f"Best ok run per {args.best_by} by {args.metric}"
    if args.frontier:
        return FRONTIER_HEADING
    return "Runs" + (f" (speedup vs {', '.join(args.baseline)})" if args.baseline else "")


def blank_lines(loaded: pd.DataFrame, runs: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """Lines saying why a column is blank for ok runs (:func:`analysis.blanks.blank_notes`), and
    what to run to fill it: for the columns named by ``--columns``, ``--sort`` and ``--pivot``'s
    VALUES (a cell of ok runs without a value shows ``ok``), and for the
    derived ones (``scale_eff``, ``speedup``) that the default table shows; a speedup interval's end left
    blank for want of a finite value (:func:`analysis.blanks.speedup_ci_lines`). None for ``--frontier``,
    whose table has its own columns (``--columns`` and ``--sort`` do not apply to it)."""
    if args.frontier:
        return []
    asked = asked_columns(args)
    if args.sort:
        asked.append(column_name(sort_spec(args.sort)[0]))
    if (
        args.pivot and len(parts := args.pivot.split(":")) == 3 and parts[2]
    ):  # its cells showed "ok" unexplained
        asked.append(column_name(parts[2]))
    people = args.format in ("table", "markdown", "html")
    if people and not args.columns and not args.pivot and not args.prediction_errors:  # the runs table's
        asked += [c for c in shown_columns(runs, args).columns if c in DERIVED]
    return blank_notes(
        runs,
        asked,
        loaded=loaded,
        where=" ".join(map(display_path, args.paths)),
        baseline=", ".join(args.baseline),
    ) + speedup_ci_lines(runs)


DERIVED = ("scaling_efficiency", "speedup")
"""The derived columns whose blanks :func:`blank_lines` explains where the runs table shows them (not
asked for): a line for one the table did not show (``--prediction-errors``' summary; hidden to fit
``--width``) is dropped by :func:`shown_blanks`."""


def shown_blanks(blanks: list[str], text: str, args: argparse.Namespace) -> list[str]:
    """``blanks`` less the line of each :data:`DERIVED` column not asked for (``--columns``, ``--sort``)
    that the table ``text`` (``table`` or ``markdown``) does not show in its header: ``scale_eff is blank
    ...`` under ``--prediction-errors`` or ``--baseline`` where no ``scale_eff`` column is shown."""
    if args.format not in ("table", "markdown"):
        return blanks
    heads = set(re.split(r"[\s|]+", text.split("\n", 1)[0]))
    asked = set(asked_columns(args)) | ({column_name(sort_spec(args.sort)[0])} if args.sort else set())
    gone = {header(c) for c in DERIVED if c not in asked and header(c) not in heads}
    return [b for b in blanks if b.split(" is blank", 1)[0] not in gone]


def output(
    loaded: pd.DataFrame, runs: pd.DataFrame, args: argparse.Namespace, blanks: list[str] | None = None
) -> str:
    """The text to write: the table (or pivot) in ``args.format``; HTML embeds the plots and ends
    with the notes, ``blanks`` (:func:`blank_lines`) among them."""
    people = args.format in ("table", "markdown", "html")
    if args.prediction_errors:
        errors_text = render_summary(error_summary(runs), args.format)
        cost = probe_cost_line(loaded) if people else None
        return f"{errors_text}\n\n{cost}" if cost else errors_text
    winners: list[str] = []
    runs, spread = spread_lines(runs, args)
    if FLAGS in runs:  # again, with tie? (spread_lines)
        runs = with_flags(runs)
    errors = [render_summary(error_summary(runs), args.format)] if args.predict and people else []
    if args.pivot:
        table = _pivot(runs, args, mark_failed=people)
        if people:
            table, winners = mark_winners(table, runs, args)
        frame = flat_pivot(table)
    elif args.frontier:
        if args.format in ("table", "markdown") and (why := no_frontier(runs)):
            return "\n".join([why, *unmeasured_lines(runs)])  # not every ok run nor an empty frame
        frame = frontier_table(runs) if searched(runs) else frontier_table(runs).iloc[:0]
    else:
        frame = shown_columns(runs, args)
    if args.format != "html":
        keep = [*(PREDICTION_COLUMNS if args.predict else ()), *asked_columns(args)]
        order = frontier_drop_order(frame) if args.frontier else None  # its size and tokens/s stay
        notes = [*winners, *(_wrapped(spread, args) if people else []), *errors]
        if args.format == "markdown":  # each note its own paragraph, not run on after the legend
            return "\n\n".join([render(frame, args.format, width=args.width, keep=keep, order=order), *notes])
        return "\n".join([render(frame, args.format, width=args.width, keep=keep, order=order), *notes])
    figures, skipped = make_plots(select(loaded, pairs(args.filter, "--filter")))
    metric = column_name(args.metric)
    opening = [] if args.frontier else headline(runs, metric)
    if opening and metric in runs:  # the verdict opens the page: its one-line form is not repeated below
        said = verdict(runs, metric, rankable(runs, metric))[1]
        spread = [line for line in spread if line != said]
    report = Report(
        verdict=opening,
        title="flopsweep results: " + " ".join(map(display_path, args.paths)),
        summary=summary(loaded),
        tables=[(_heading(args), frame), *frontier_tables(runs, args), *_error_tables(runs, args)],
        figures=figures,
        skipped=skipped,
        notes=winners + spread + frontier_notes(runs, args) + load_notes(loaded) + (blanks or []),
    )
    return render_html(report)


def _error_tables(runs: pd.DataFrame, args: argparse.Namespace) -> list[tuple[str, pd.DataFrame]]:
    """The HTML report's prediction-error table (:mod:`analysis.prediction_error`) with ``--predict``."""
    summary = error_summary(runs)
    if not args.predict or summary.empty:
        return []
    return [("Step time predicted before each run: error per backend and source", summary)]


FRONTIER_HEADING = "The largest model per set-up (search.model=largest): its tokens/s and MFU"


def frontier_tables(runs: pd.DataFrame, args: argparse.Namespace) -> list[tuple[str, pd.DataFrame]]:
    """The HTML report's frontier table (:func:`analysis.frontier.frontier_table`) under the runs,
    when some run searched the largest model and the main table is not the frontier already."""
    if args.frontier or not searched(runs):
        return []
    return [(FRONTIER_HEADING, frontier_table(runs))]


def _wrapped(lines: list[str], args: argparse.Namespace) -> list[str]:
    """``lines`` wrapped to ``--width`` for the terminal table (markdown keeps them whole)."""
    if args.format != "table" or args.width <= 0:
        return lines
    return [part for line in lines for part in textwrap.wrap(line, args.width, break_on_hyphens=False)]


def say(line: str) -> None:
    """One line to stderr, control characters escaped (:func:`analysis.sanitize.printable`): a
    name or path from a record cannot drive the terminal or forge another line."""
    write_escaped(sys.stderr, printable(line) + "\n")


def plots(df: pd.DataFrame, out_dir: Path) -> None:
    """Write the PNG plots of ``df`` to ``out_dir``; say on stderr which were written or skipped."""
    figures, skipped = make_plots(df)
    for path in write_pngs(figures, out_dir).values():
        say(f"wrote {display_path(path)}")
    for name, reason in skipped.items():
        say(f"skipped plot {name}: {reason}")


def write_outputs(loaded: pd.DataFrame, text: str, args: argparse.Namespace) -> None:
    """The table to ``--output`` (or stdout), then the plots to ``--plot``. ``--output`` is written
    whole or not at all (:func:`analysis.output.write_atomic`): on a full disk the previous file
    stays as it was. A stdout whose reader stopped early (``| head``) drops the rest quietly
    (:func:`analysis.output.write_stdout`), as ``flopsweep ... | head`` does.

    Raises:
        OSError: when a path cannot be written (a directory, a missing parent, no permission,
            no space); :class:`analysis.output.StdoutError` when stdout refuses (``> /dev/full``).
    """
    text = text if text.endswith("\n") else text + "\n"
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.output, text.encode("utf-8", "backslashreplace"), overwrite=args.force)
        named = (
            ""
            if getattr(args, "format_given", False) or args.format == "table"
            else f" (--format {args.format}, by its name)"
        )
        say(f"wrote {display_path(args.output)}{named}")
    else:
        write_stdout(text)
    if args.plot:
        plots(select(loaded, pairs(args.filter, "--filter")), args.plot)


def check_outputs(args: argparse.Namespace, records: list[str] | tuple[()]) -> None:
    """Refuse ``--output`` and each PNG ``--plot`` would write when writing it would replace a
    record, among ``records`` (being read) or any other (:func:`analysis.output.check_output`), and
    ``--output`` over any file already there unless ``--force`` (:func:`analysis.output.exists_problem`).

    Raises:
        OutputError: one line naming the option, the path and the fix; also when ``--output``'s folder
            or the ``--plot`` folder cannot take a file (:func:`analysis.output.check_folder`: a file
            where the folder should be, a folder under ``/proc``): exit 2, as for ``--notebook``.
    """
    if args.output:
        example = report_name(args.format)  # the fixes' file: report.html for --format html
        check_output(args.output, records, "--output", example=example)
        if not args.force and (why := exists_problem(args.output)):
            raise OutputError(why)
        check_folder(args.output, "--output", example)
    if args.plot is not None:
        for name in PLOTS:
            check_output(args.plot / f"{name}.png", records, "--plot", folder=True)
        check_folder(args.plot, "--plot", folder=True)


def notebook(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``--notebook FILE``: build, execute and write the results notebook of ``args.paths``.

    Each failure is one line on stderr, with :func:`main`'s exit status, as the table's: a table option
    given with it, a missing path, no ``metrics.json`` under the paths or a file named that is no record
    (``README.md``), FILE's folder unable to take a file, its name too long or FILE a record (exit 2);
    only unreadable records, a cell that fails, no kernel, the write failing (exit 1). The records are
    read once here, before the kernel (:func:`analysis.load.load`), so that a path the table refuses
    is refused in the same line, not as a failed cell.
    """
    table_options = [a for a in parser._actions if a.dest not in ("help", "paths", "notebook")]
    given = [a.option_strings[0] for a in table_options if getattr(args, a.dest) != a.default]
    if given:
        print(
            f"{parser.prog}: error: --notebook shows every run of the paths; it takes none of "
            f"{', '.join(given)} (filter in the notebook with analysis.select)",
            file=sys.stderr,
        )
        return 2
    try:  # read as the table reads them: a file that is no record is exit 2 here too, not a failed cell's 1
        loaded = load(args.paths)
    except (FileNotFoundError, BudgetError) as exc:
        say(f"{parser.prog}: error: {printable(exc)}")
        return 2
    if loaded.empty:  # as the table says it: each skipped file's reason (warned), then the line with the fix
        line, code = no_records(parser.prog, args.paths, summary(loaded), len(loaded.attrs["unreadable"]))
        say(line)
        return code
    found = loaded.attrs["records"]
    try:
        check_output(args.notebook, found, "--notebook")
        check_folder(args.notebook, "--notebook")  # before the kernel runs every cell
    except OutputError as exc:
        say(f"{parser.prog}: error: {exc}")
        return 2
    shown = display_path(args.notebook)
    print(f"starting a kernel to execute {shown} ({plural(len(found), 'record')})", file=sys.stderr)
    progress = ProgressLine(sys.stderr)
    try:
        try:
            _, seconds = make_notebook(args.paths, args.notebook, progress=progress)
        finally:
            progress.close()  # end a terminal's progress line before the next one
    except NotebookError as exc:
        print(f"{parser.prog}: error: {exc}; {shown} not written", file=sys.stderr)
        return 1
    except OutputError as exc:  # a record put at FILE while the kernel ran
        say(f"{parser.prog}: error: --notebook {exc}; not written")
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the kernel is stopped; one line, the shell's 128 + SIGINT
        print(f"{parser.prog}: interrupted; {shown} not written", file=sys.stderr)
        return 130
    except OSError as exc:
        where = display_path(exc.filename) if exc.filename else shown
        print(f"{parser.prog}: error: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {shown} (executed in {seconds:.0f} s)", file=sys.stderr)
    return 0


ALL_COLUMNS_HINT = "every column: the header of --format csv --columns all"
"""Where an unknown column's one-line error (:func:`analysis.query.check_columns`) sends for the
full list of the records' columns (some 140)."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (docs/analysis.md, "Exit status"): 0 ok; 2 when the command
    line is refused, before any work: a bad option, a path that is not there or holds no
    ``metrics.json`` (a plan's folder too: :func:`analysis.discover.no_records`), an output
    (``--output``, the HTML report, ``--plot``, ``--notebook``) whose folder cannot take a file or that
    would replace a record; 1 when what it names is there but the work fails: only unreadable
    records, a notebook cell, or the system refusing a write after the checks (a full disk)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.plot is not None and (why := plot_folder_problem(args.plot)):
        parser.error(
            f"--plot {printable(str(args.plot))}: {why}; give a folder for the PNGs (made if missing)"
        )
    if args.frontier and (other := frontier_conflict(args)):
        parser.error(
            f"--frontier with {other}: the frontier is one row per set-up, its largest size; drop {other}"
        )
    if why := closed_stdout_problem(args, stdout_closed_at_start()):
        say(f"{parser.prog}: error: {why}")
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("analysis: %(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    if args.notebook is not None:
        return notebook(args, parser)
    if args.width is None:  # after --notebook, which takes no table option
        args.width = default_width()
    try:
        loaded = load(args.paths, predict=args.predict)
        if loaded.empty:  # nothing there (exit 2), or only unreadable records (exit 1): the fix for each
            line, code = no_records(parser.prog, args.paths, summary(loaded), len(loaded.attrs["unreadable"]))
            say(line)
            return code
        check_outputs(args, loaded.attrs["records"])
        runs = select_runs(loaded, args)
        blanks = blank_lines(loaded, runs, args)
        text = output(loaded, runs, args, blanks)
        blanks = shown_blanks(blanks, text, args)
    except OutputError as exc:
        say(f"{parser.prog}: error: {exc}")
        return 2
    except ColumnError as exc:
        parser.error(f"{printable(exc)}; {ALL_COLUMNS_HINT}")
    except (FileNotFoundError, AnalysisError, BudgetError) as exc:
        parser.error(printable(exc))
    try:
        write_outputs(loaded, text, args)
    except OutputError as exc:  # a record put at an output path since the check
        say(f"{parser.prog}: error: {exc}")
        return 2
    except OSError as exc:  # --output or --plot names a place that cannot be written, or is full
        say(f"{parser.prog}: error: {write_error_line(exc, args)}")
        return 1
    sys.stdout.flush()  # the table before the footer when both go to one terminal
    for line in [*frontier_stderr_lines(runs, args), *(excluded_note(loaded) or "").splitlines(), *blanks]:
        say(line)
    for line in missing_lines(args.paths):  # a sweep cut short: its jobs without a record counted
        say(line)
    say(summary(loaded) + shown_note(loaded, runs, args))
    return 0


if __name__ == "__main__":  # a closed stdout is os.devnull; Ctrl-C one line, 130 (analysis.cli.run_entry)
    run_entry(main)
