"""Find ``metrics.json`` records under the paths a user names, and print paths safely.

How links are treated (once, for the sweep, resume and the analysis): a record is a regular file
at its own path, never a link; a directory named on the command line (or matched by a glob) may
be a link, a directory link met inside a walk is not followed (:func:`discover`). Nothing here
opens a record: :func:`analysis.schema.read_record` does.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from flopsweep.config import cut
from flopsweep.lock_names import held_by, inner_lock_path, lock_path
from flopsweep.record import METRICS_FILE
from flopsweep.safe_read import file_kind, not_a_record
from flopsweep.text import plural
from flopsweep.tree import unique_files, walk

RECORD_NAME = re.compile(r"metrics(\..+)?\.json", re.IGNORECASE | re.DOTALL)
"""File names no output takes: a run's record (``metrics.json``) and one set aside by
``resume=true`` (``metrics.<status>-<run id>.json``), in any case (a case-insensitive file system
takes ``METRICS.JSON`` for the record)."""

log = logging.getLogger("analysis")

PLAN_FILE = "plan.csv"
"""The table ``plan=true`` writes in its run or sweep folder instead of records
(``flopsweep.job.plantable.PLAN_FILE``, which the analysis does not import: a test keeps them one)."""


def plan_tables(paths: Iterable[str]) -> list[str]:
    """The ``plan.csv`` files among ``paths`` or directly in a folder of them: the folder of a plan
    (``plan=true`` runs no job and writes no record), which the analysis has nothing to read in."""
    found = []
    for p in paths:
        if os.path.basename(p.rstrip("/")) == PLAN_FILE and os.path.isfile(p):
            found.append(p)
        elif os.path.isdir(p) and os.path.isfile(os.path.join(p, PLAN_FILE)):
            found.append(os.path.join(p, PLAN_FILE))
    return found


def _plan_line(prog: str, where: str, summary: str, plans: list[str]) -> str:
    named = " ".join(map(display_path, plans))
    return (
        f"{prog}: error: no metrics.json under {where} ({summary}): {named} is the table of a plan "
        "(plan=true runs no job and writes no record; the plan's ranked set-ups are in that file). "
        f"Fix: read {named} (a CSV: every set-up, ranked, with its predicted figures), or run the sweep "
        "without plan=true and name its folder"
    )


SWEEP_FILE = "multirun.yaml"
"""The file a sweep writes in its folder first (``flopsweep.hydrafiles.MULTIRUN_FILE``, not imported: a
test keeps them one): a folder holding it and no record is a sweep whose jobs wrote none (yet)."""

RECORDS_FIX = (
    "name a sweep folder (its hydra.sweep.dir, e.g. multirun/smoke), a run folder "
    "(outputs/DATE/TIME) or metrics.json files"
)
"""The fix of every refusal of the paths to read (none there, no record under them)."""


MAX_FOLDERS = 100_000
"""The most folders one call of :func:`discover` lists, over every path it is given: a sweep of 10,000 jobs
lists about 30,000 (each job's folder, its ``.hydra``, a batch search's); a file system's 100,000 took 8 s
here (the whole of this machine's ``/``: 103,550 folders, 8.2 s). Past it the walk stops and names the
folder it stopped at (:data:`flopsweep.tree.STOPPED`, whose fix is to name the sweep's folder)."""

PROGRESS_S = 5.0
"""Seconds between the walk's progress lines on stderr (``still searching ...``): a walk of a slow or
large file system says what it does, never a silent wait."""

REFUSED_ROOTS = {
    "/": "the root of the file system (a search of every folder of the machine, minutes)",
    "/proc": "the kernel's process tree, which holds no record",
    "/sys": "the kernel's device tree, which holds no record",
    "/dev": "the device folder, which holds no record",
}
"""Folders the analysis refuses to search (by their real path), each with why: one line, exit 2."""


@dataclass
class _Search:
    """What one :func:`discover` call may walk: ``limit`` folders, ``left`` of them still to list; when its
    progress line was said last (:func:`time.monotonic`)."""

    limit: int
    left: int
    said: float = field(default_factory=time.monotonic)


def display_path(path: str | Path) -> str:
    """``path`` as printable text: bytes that are not UTF-8 (a directory name from another
    locale) become ``\\xNN`` escapes, so that no output stream or file write fails on them."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def from_folder(paths: Iterable[str | Path], start: str | Path) -> list[str]:
    """``paths`` as looked up from the folder ``start`` without changing the working directory: a
    relative path (or glob) joined to ``start`` made absolute (:func:`os.path.abspath`; in a glob, its
    ``*?[`` taken literally), an absolute one kept. :func:`named_from` names what is found under them."""
    base = os.path.abspath(start)
    out = []
    for p in map(os.fspath, paths):
        magic = any(c in p for c in "*?[")
        out.append(p if os.path.isabs(p) else os.path.join(glob.escape(base) if magic else base, p))
    return out


def named_from(path: str | Path, start: str | Path | None) -> str:
    """The printable name (:func:`display_path`) of ``path``, found under :func:`from_folder`'s paths,
    relative to ``start`` as the user spelled it (``../results/h200/a/metrics.json`` from a notebook
    in ``notebooks/``): the folder a joined relative path begins with is taken off, so that no absolute
    path of this machine names a record the user named relatively. A path outside ``start`` (an
    absolute one the user gave), and every path when ``start`` is None, is named as found."""
    text = os.fspath(path)
    if start is not None:
        prefix = os.path.join(os.path.abspath(start), "")
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return display_path(text)


def _walk(root: Path, skipped: dict[str, str], search: _Search) -> list[Path]:
    """The ``metrics.json`` regular files under the directory ``root``
    (:func:`flopsweep.tree.walk`: iterative, at most :data:`flopsweep.tree.MAX_DEPTH` levels deep, no
    link met on the way followed, at most ``search.left`` folders listed: :data:`MAX_FOLDERS` over the
    call). A linked directory is logged as not followed; every :data:`PROGRESS_S` seconds a line says how
    far the walk is; a ``metrics.json`` that is a link, a FIFO, a device or a directory, a folder that
    cannot be listed, one whose sub-folders are nested too deep and the one the walk stopped at go into
    ``skipped`` with the reason."""
    found: list[Path] = []

    def linked(path: Path) -> None:
        if path.name != METRICS_FILE:
            log.warning("not following the directory link %s (name it to read it)", display_path(path))

    listed = 0
    for folder, entries in walk(root, skipped, on_link=linked, max_folders=search.left):
        listed += 1
        for entry in entries:
            if entry.name == METRICS_FILE:
                _keep(folder / entry.name, found, skipped)
        _progress(root, listed, len(found), search)
    search.left -= listed
    return sorted(found)


def _progress(root: Path, listed: int, found: int, search: _Search) -> None:
    """The walk's progress line, at most every :data:`PROGRESS_S` seconds: ``still searching ROOT for
    metrics.json: N folders listed, M records found (the walk stops at 100,000 folders; name the sweep's
    folder to read only it)``."""
    if time.monotonic() - search.said < PROGRESS_S:
        return
    search.said = time.monotonic()
    log.warning(
        "still searching %s for %s: %s folders listed, %s found (the walk stops at %s folders; name the "
        "sweep's folder to read only it)",
        display_path(root),
        METRICS_FILE,
        f"{listed:,}",
        plural(found, "record"),
        f"{search.limit:,}",
    )


def _keep(path: Path, found: list[Path], skipped: dict[str, str]) -> None:
    """Add ``path`` to ``found`` when it is a regular file (not a link); else its reason to ``skipped``."""
    try:
        why = not_a_record(path)
    except OSError as exc:
        why = f"cannot read the file: {exc.strerror or exc}"
    if why is None:
        found.append(path)
    else:
        skipped[display_path(path)] = why


def _entries(base: Path, part: str, dirs_only: bool) -> list[Path]:
    """The entries of ``base`` whose names match the wildcard ``part`` (hidden ones only when
    ``part`` starts with a dot, as :mod:`glob`); with ``dirs_only``, directories (or links to one)."""
    try:
        with os.scandir(base) as it:
            entries = list(it)
    except OSError:
        return []
    hidden = part.startswith(".")
    return [
        base / e.name
        for e in entries
        if fnmatch.fnmatchcase(e.name, part)
        and (hidden or not e.name.startswith("."))
        and (not dirs_only or e.is_dir())
    ]


def _dirs_below(base: Path, skipped: dict[str, str], search: _Search) -> list[Path]:
    """``base`` and every directory under it, for ``**`` (:func:`flopsweep.tree.walk`: no link
    followed below ``base``, at most :data:`flopsweep.tree.MAX_DEPTH` levels deep, at most
    ``search.left`` folders)."""
    below = [folder for folder, _ in walk(base, skipped, max_folders=search.left)]
    search.left -= len(below)
    return below


def _glob(pattern: str, skipped: dict[str, str], search: _Search) -> list[Path]:
    """Paths matching ``pattern`` (``*``, ``?``, ``[...]``, ``**``), expanded one component at a time:
    ``**`` walks without following links (a link loop is never entered), a literal last component
    is matched when the path exists even as a dangling or looping link (so that it is skipped with
    its reason, not silently); ``[]`` when none match."""
    parts = Path(pattern).parts
    first = next((i for i, part in enumerate(parts) if glob.has_magic(part)), None)
    if first is None:
        return []
    current = [Path(*parts[:first]) if first else Path()]
    for i, part in enumerate(parts[first:], start=first):
        last = i == len(parts) - 1
        found: list[Path] = []
        for base in current:
            if part == "**":
                found += _dirs_below(base, skipped, search)
            elif glob.has_magic(part):
                found += _entries(base, part, dirs_only=not last)
            elif os.path.lexists(base / part) if last else (base / part).is_dir():
                found.append(base / part)
        current = found
    return sorted(set(current))


def _special(p: Path) -> str | None:
    """What a path named on the command line is when it is neither a folder nor a regular file: ``a FIFO``,
    ``a socket``, ``a character device`` (``/dev/null``), ``a symbolic link to a FIFO``; None for the others
    and a path not there. By ``stat`` alone: nothing is opened (a FIFO opened blocks till a writer comes)."""
    try:
        kind = file_kind(os.stat(p).st_mode)  # a link followed: what it names
    except OSError:
        return None
    if kind in ("regular file", "directory"):
        return None
    return f"a symbolic link to a {kind}" if os.path.islink(p) else f"a {kind}"


def _shown(path: str) -> str:
    """``path`` as the user would type it from here: relative to the working folder when under it,
    else absolute (:func:`display_path`)."""
    here = os.path.join(os.getcwd(), "")
    return display_path(path[len(here) :] if path.startswith(here) else path)


def _named_link(p: Path, skipped: dict[str, str], alone: bool) -> None:
    """A symbolic link the user named (on the command line or the API) that does not lead to a folder.

    A link that leads nowhere (dangling, or a loop) is a path that is not there; a link to a regular
    file is not read through (a record is read at its own path: :func:`flopsweep.safe_read.not_a_record`),
    and its fix names the file it leads to (:func:`_shown`, which reads when typed back). Beside other
    paths a link to a file is skipped with that reason, as a link met in a walk.

    Raises:
        FileNotFoundError: the link leads nowhere (``latest: a symbolic link to multirun/x, which is
            not there. Fix: ...``); or it is the one path named and leads to a regular file (``Fix: name
            the file it leads to, s1/0/metrics.json``); a link to a FIFO or device alone: :func:`_special`.
    """
    try:
        said = display_path(os.readlink(p))
    except OSError as exc:
        said = f"? ({exc.strerror})"
    if not os.path.exists(p):
        raise FileNotFoundError(
            f"{display_path(p)}: a symbolic link to {said}, which is not there (or a loop of links). "
            f"Fix: {RECORDS_FIX}"
        )
    target = os.path.realpath(p)
    if not os.path.isfile(target):
        if alone and (kind := _special(p)):
            raise FileNotFoundError(
                f"{display_path(p)}: is {kind}, not a folder or a regular file. Fix: {RECORDS_FIX}"
            )
        _keep(p, [], skipped)
        return
    why = (
        f"a symbolic link to {said} (not followed: a record is read at its own path, never through a "
        f"link). Fix: name the file it leads to, {_shown(target)}"
    )
    if alone:
        raise FileNotFoundError(f"{display_path(p)}: {why}")
    skipped[display_path(p)] = why


def _expand(
    p: Path,
    found: list[Path],
    skipped: dict[str, str],
    search: _Search,
    spelled: bool = True,
    alone: bool = False,
) -> None:
    """Records of one path: a directory walked (it may be a link the user named), any other path
    kept if it is a regular file, a glob expanded.

    Raises:
        FileNotFoundError: a path that is not there, or that the system refuses to look up (a name
            over 255 bytes, ENAMETOOLONG; a path through a file), or the one path the user named
            (``spelled``, ``alone``) that is neither a folder nor a regular file (a FIFO, a socket, a
            device: :func:`_special`, never opened): one line naming it and the fix. Beside other paths
            such a path is skipped with its reason, as one met in a walk. A folder of
            :data:`REFUSED_ROOTS` named (``/``): one line saying why, with the fix.
    """
    if spelled and (why := REFUSED_ROOTS.get(os.path.realpath(p))):
        raise FileNotFoundError(
            f"{display_path(p)}: not searched for {METRICS_FILE}: {why}. Fix: {RECORDS_FIX}"
        )
    try:
        os.stat(p)
    except FileNotFoundError:
        pass  # a glob, or not there: below
    except OSError as exc:  # Path.is_dir raised these (a traceback)
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP, errno.EACCES):
            shown = cut(display_path(p), 80)
            raise FileNotFoundError(
                f"{shown}: cannot be looked up ({exc.strerror}). Fix: {RECORDS_FIX}"
            ) from None
    if p.is_dir():
        found.extend(_walk(p, skipped, search))
    elif spelled and os.path.islink(p):  # latest -> a sweep since deleted: was "re-run those jobs", exit 1
        _named_link(p, skipped, alone)
    elif spelled and alone and (kind := _special(p)):  # mkfifo: it said "re-run with resume=true", exit 1
        raise FileNotFoundError(
            f"{display_path(p)}: is {kind}, not a folder or a regular file. Fix: {RECORDS_FIX}"
        )
    elif os.path.lexists(p):
        _keep(p, found, skipped)
    elif spelled and (matches := _glob(str(p), skipped, search)):
        for match in matches:
            _expand(match, found, skipped, search, spelled=False)
    elif spelled and search.left <= 0:  # the glob's ** listed the call's last folders: not "no match"
        raise FileNotFoundError(
            f"{display_path(p)}: no glob match in the {plural(search.limit, 'folder')} searched "
            f"(the limit of a walk). Fix: {RECORDS_FIX}"
        )
    else:
        raise FileNotFoundError(
            f"{display_path(p)}: no such file, directory or glob match. Fix: {RECORDS_FIX}"
        )


def discover(
    paths: Iterable[str | Path], *, max_folders: int = MAX_FOLDERS
) -> tuple[list[Path], dict[str, str]]:
    """``(records, skipped)`` under ``paths``: ``metrics.json`` regular files (directories walked
    without following links, files as given, globs expanded, each found once, in path order), and
    the paths that were passed over with the reason for each: a link, a FIFO, a device, a
    directory that cannot be listed or nested too deep, the folder a walk stopped at (``max_folders``
    listed over the call, :data:`MAX_FOLDERS`). Nothing is opened here. A file reached
    under two names (a directory named twice, a hard link: the same device and inode) is found
    once, under the first name found, and read once.

    How links are treated (once, for the sweep, resume and the analysis): a record is a regular
    file at its own path, never a link; a directory named on the command line (or matched by a
    glob) may be a link, a directory link met inside a walk is not followed.

    Raises:
        FileNotFoundError: when a path neither exists nor matches a glob, or is one of
            :data:`REFUSED_ROOTS` (``/``).
    """
    found: list[Path] = []
    skipped: dict[str, str] = {}
    paths = list(paths)
    search = _Search(limit=max_folders, left=max_folders)
    for p in paths:
        _expand(Path(p), found, skipped, search, alone=len(paths) == 1)
    return unique_files(found)[0], skipped


def still_written(paths: Iterable[str | Path]) -> dict[str, str]:
    """The folders among ``paths`` that a sweep or run is still writing, each with the holder of its
    lock (``{"multirun/x": "pid 1234"}``): the lock beside the folder or inside it is held
    (:func:`flopsweep.lock_names.held_by`: tried shared, without waiting, and released at once;
    nothing is made). Only the folders named are looked at, not those below them."""
    out = {}
    for p in map(os.fspath, paths):
        if os.path.isdir(p):
            holders = (held_by(lock) for lock in (lock_path(Path(p)), inner_lock_path(Path(p))))
            if holder := next((h for h in holders if h), None):
                out[p] = holder
    return out


def find_records(paths: Iterable[str | Path]) -> list[Path]:
    """The ``metrics.json`` regular files under ``paths`` (:func:`discover`, less what it skipped).

    Raises:
        FileNotFoundError: when a path neither exists nor matches a glob.
    """
    return discover(paths)[0]


def no_records(prog: str, paths: Iterable[str], summary: str, skipped: int) -> tuple[str, int]:
    """``(line, exit status)`` when the paths gave no readable record: nothing found (exit 2, as for a
    path that is not there: the paths are wrong; a folder that exists says so, as ``/nonexistent`` may),
    a file named that is not a record (``notes.txt``, not ``metrics*.json``: exit 2, the fix names what
    to give instead; a plan's folder or its ``plan.csv``: :func:`plan_tables`, exit 2, the fix to read
    that table) or only records skipped as unreadable (exit 1: they are there and bad; the
    warnings before the line say why each). ``summary`` ends the line
    (:func:`analysis.display.summary`: ``0 runs; 1 unreadable record skipped``)."""

    paths = [os.fspath(p) for p in paths]
    where = " ".join(map(display_path, paths))
    plans = plan_tables(paths)
    if plans and skipped <= sum(p in paths for p in plans):  # a plan's folder, or its plan.csv named
        return _plan_line(prog, where, summary, plans), 2
    if not skipped:
        folders = [p for p in paths if os.path.isdir(p)]
        if sweeps := [
            p for p in folders if os.path.isfile(os.path.join(p, SWEEP_FILE))
        ]:  # "name a sweep folder"
            named = " ".join(map(display_path, sweeps))
            return (
                f"{prog}: error: no metrics.json under {where} ({summary}): {named} holds a sweep's "
                f"{SWEEP_FILE} but no record: its jobs are still running (none ended yet), or it stopped "
                "before one ended. Fix: wait for a job to end, or run the sweep again with resume=true (the "
                "same command and hydra.sweep.dir) and name this folder again",
                2,
            )
        there = ""
        if folders and len(folders) == len(paths):
            there = (
                "; the folder exists, with none in it or below"
                if len(folders) == 1
                else "; the folders exist, with none"
            )
        return f"{prog}: error: no metrics.json under {where} ({summary}{there}). Fix: {RECORDS_FIX}", 2
    other = [p for p in paths if os.path.isfile(p) and not RECORD_NAME.fullmatch(os.path.basename(p))]
    if other:  # a file named on the command line that no job wrote: re-running jobs is no fix
        named = " ".join(map(display_path, other))
        rest = (
            " (the sweep again with resume=true re-runs every job without an ok record)"
            if skipped > len(other)
            else ""
        )
        return (
            f"{prog}: error: no readable metrics.json under {where} ({summary}; the warnings above say why): "
            f"{named} is not a record (a job writes its record as metrics.json). Fix: {RECORDS_FIX}{rest}",
            2,
        )
    return (
        f"{prog}: error: no readable metrics.json under {where} ({summary}; the warnings above say why). "
        "Fix: re-run those jobs (the sweep again with resume=true re-runs every job without an ok record), "
        f"or {RECORDS_FIX}",
        1,
    )
