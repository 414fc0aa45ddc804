"""The paths the analysis writes, as its options take them (``--output``, ``--notebook``, ``--plot``),
torch-free: each option's argparse type (:func:`output_path`, :func:`notebook_path`, :func:`plot_folder`),
refusing a control character (:func:`plain_path`) or a folder where a file is written (:func:`folder_fix`);
the format an ``--output`` name implies (:func:`output_format`) and the file a fix names for a format
(:func:`report_name`); a ``--plot`` path that cannot be a folder (:func:`plot_folder_problem`).

Imported by :mod:`analysis.cli` (the parser), :mod:`analysis.__main__` and :mod:`analysis.output`; it
imports no module of the analysis.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def plain_path(text: str, option: str) -> str:
    """``text`` unless it holds a character :func:`flopsweep.text.printable` escapes (a newline, a tab, ESC,
    a bidirectional mark): refused (argparse's one line, exit 2), the fix the name with each ``_`` instead.
    A non-UTF-8 byte of a name (a surrogate escape, ``\\udcff``) is kept: the analysis escapes it where shown.
    ``--output 'a\nb.csv'`` wrote a file whose name broke every listing and shell line that showed it."""
    from flopsweep.text import printable

    def kept(c: str) -> bool:  # a byte of a non-UTF-8 name (os.fsdecode's surrogate escape) names a real file
        return printable(c) == c or "\udc80" <= c <= "\udcff"

    if all(kept(c) for c in text):
        return text
    plain = "".join(c if kept(c) else "_" for c in text)
    raise argparse.ArgumentTypeError(
        f"{printable(text)} holds a control or invisible character (shown escaped), which a file name "
        f"must not: it breaks the listings and shell lines that show it. Fix: {option} {plain}"
    )


REPORT_NAMES = {
    "table": "report.md",
    "markdown": "report.md",
    "csv": "report.csv",
    "json": "report.json",
    "html": "report.html",
}
"""The file name a fix of ``--output`` gives for each ``--format`` (``--format html --output h/``:
``h/report.html``; the fix wrote HTML into ``report.md``)."""


SUFFIX_FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
}
"""The format an ``--output`` name ends in, which ``--format`` then defaults to (:func:`output_format`)."""


def output_format(output: object, fmt: str, given: bool) -> str:
    """The format of ``--output``'s name and ``--format``: a name ending in a format's suffix
    (:data:`SUFFIX_FORMATS`, any case) sets the format when ``--format`` was not given (``--output
    runs.csv`` wrote the terminal table into it, a spreadsheet's garbage); a ``--format`` given wins
    (``--format csv --output report.md`` writes CSV, as asked); any other name (``-``, ``.txt``, none)
    keeps ``fmt``."""
    named = SUFFIX_FORMATS.get(output.suffix.lower()) if isinstance(output, Path) else None
    return fmt if named is None or given else named


def report_name(fmt: str) -> str:
    """The example file name of ``--output`` for the format ``fmt`` (:data:`REPORT_NAMES`)."""
    return REPORT_NAMES.get(fmt, "report.md")


class FolderName(str):
    """``--output``'s text when it names a folder (``h/``, ``out/..``): refused once the whole command
    line is parsed (:class:`AnalysisParser`), where ``--format`` names the fix's file."""


def _normalised(path: str) -> str:
    """``path`` without its ``.`` and ``..`` parts (``out/../report.md``: ``report.md``; writing the
    first made an empty ``out/``), unless a ``..`` follows a link (the system resolves ``link/..`` at
    the link's target, not lexically): then as given."""
    parts = path.split(os.sep)
    for i, part in enumerate(parts):
        if part == ".." and i and os.path.islink(os.sep.join(parts[:i]) or os.sep):
            return path
    return os.path.normpath(path)


def folder_fix(text: str, option: str, example: str) -> str:
    """The one line refusing ``text`` of ``option`` (a file option) that names a folder, its fix ``example``
    in that folder, normalised (:func:`_normalised`); where that folder is a file already (``--output
    f.md/``, ``f.md`` a file: ``f.md/report.md`` was refused again), ``example`` beside it."""
    fix = _normalised(os.path.join(text, example))
    folder = os.path.dirname(fix)
    if folder and os.path.lexists(folder) and not os.path.isdir(folder):  # no folder can be made there
        fix = _normalised(os.path.join(os.path.dirname(folder), example))
    return (
        f"{text}: names a folder (a trailing / or a last . or ..), but {option} writes one file. "
        f"Fix: {option} {fix}"
    )


def names_folder(text: str) -> bool:
    return text.endswith(("/", os.sep)) or os.path.basename(text) in (".", "..")


def file_path(text: str, option: str, example: str) -> Path:
    """``text`` as the file ``option`` writes (:func:`plain_path`), refused (argparse's one line, exit 2)
    when it names a folder: a trailing ``/`` (``dir/``), or ``.``/``..`` last (:func:`folder_fix`).
    ``--output dir/`` wrote a file named ``dir`` (``Path`` drops the slash), where a user meant a folder;
    the fix names ``example`` in it (the folder made if missing, as for any ``--output``)."""
    plain = plain_path(text, option)
    if names_folder(plain):
        raise argparse.ArgumentTypeError(folder_fix(plain, option, example))
    return Path(plain)


def output_path(text: str) -> Path | FolderName | None:
    """``--output``'s value: a path; ``-`` is standard output (None), as Unix tools read it, never a
    file named ``-`` (write ``./-`` for that). One with a control character is refused
    (:func:`plain_path`); an empty one (``Path("")`` is this folder) or one naming a folder (``dir/``) is a
    :class:`FolderName`, refused once ``--format`` is known (:class:`AnalysisParser`)."""
    if not text.strip():
        return FolderName("")  # Path("") is this folder: refused with the file of --format
    if text == "-":
        return None
    plain = plain_path(text, "--output")
    return FolderName(plain) if names_folder(plain) else Path(plain)


def notebook_path(text: str) -> Path:
    """``--notebook``'s value: a path, not an empty one, whose name ends in ``.ipynb`` (the notebook
    format's suffix: Jupyter lists and opens only those; ``x.txt`` was written as a notebook)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: name the notebook file, e.g. results.ipynb")
    path = file_path(text, "--notebook", "results.ipynb")
    if path.suffix.lower() != ".ipynb":
        stem = path.stem if path.suffix else path.name
        fix = path.with_name(f"{stem or 'results'}.ipynb")
        if os.path.isdir(path):  # a folder there: the notebook in it (was DIR.ipynb beside it)
            fix = path / "results.ipynb"
        elif os.path.exists(path) and not os.path.isfile(path):  # /dev/null: was /dev/null.ipynb, in /dev
            fix = Path("results.ipynb")
        raise argparse.ArgumentTypeError(
            f"{text}: a notebook's name ends in .ipynb (Jupyter opens only those). Fix: --notebook {fix}"
        )
    return path


def plot_folder(text: str) -> Path:
    """``--plot``'s value: a path, not an empty one (``Path("")`` is this folder, unasked), nor one with a
    control character (:func:`plain_path`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: give a folder for the PNGs (made if missing)")
    return Path(plain_path(text, "--plot"))


def plot_folder_problem(path: Path) -> str | None:
    """Why ``--plot PATH`` cannot be a folder, checked before anything is written: the path itself
    or its nearest existing parent is not a folder (``a-file`` or ``a-file/sub``). None when it can be."""
    from flopsweep.safe_read import file_kind

    for place in (path, *path.parents):
        if os.path.lexists(place):
            if place.is_dir():
                return None
            what = file_kind(os.lstat(place).st_mode)
            return f"a {what}, not a folder" if place == path else f"{place} is a {what}, not a folder"
    return None
